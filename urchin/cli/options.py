"""Flags shared by several commands, as decorators, and the output helpers they pair with."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
import orjson

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["window_options", "filter_options", "json_option", "print_result", "print_json"]


def window_options(hours: float, limit: int) -> Callable[[F], F]:
    def decorate(func: F) -> F:
        func = click.option("--limit", default=limit, show_default=True, type=int,
                            help="Most results to return (1-1000).")(func)
        func = click.option("--hours", default=hours, show_default=True, type=float,
                            help="Only events from the last N hours.")(func)
        return func
    return decorate


def filter_options(func: F) -> F:
    for name, text in (("kind", "Only this kind (conversation, decision, tool_use, ...)."),
                       ("session", "Only this session."), ("workspace", "Only this workspace."),
                       ("source", "Only this source (claude, shell, git, ...).")):
        func = click.option(f"--{name}", default=None, help=text)(func)
    return func


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line.")(func)


def print_json(obj: Any) -> None:
    click.echo(orjson.dumps(obj).decode())


def print_result(result: Any, as_json: bool, with_score: bool = False) -> None:
    """Events one per line: JSON objects with --json, else `[time] source — content`."""
    from urchin.search.query import one_line

    if as_json:
        for hit in result.hits:
            print_json(hit.to_dict())
        return
    for hit in result.hits:
        click.echo(one_line(hit.event, score=hit.score if with_score else None))
