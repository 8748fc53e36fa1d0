"""`urchin context QUERY`: the hybrid `search_context` query, its flags generated from the contract."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import click

from urchin.cli.group import CliState, main
from urchin.cli.options import as_flag, build, operation_options, print_json
from urchin.contract.render import render_context
from urchin.errors import ValidationError

if TYPE_CHECKING:
    from urchin.hybrid.search_context import ContextResult


@main.command("context")
@operation_options("context")
@click.option("--json", "as_json", is_flag=True, help="Print the same object the MCP tool search_context returns.")
@click.pass_obj
def context(app: CliState, as_json: bool, **params: Any) -> None:
    """Find the most relevant events for QUERY: full-text and semantic legs fused by weighted RRF."""
    memory = app.memory()
    try:
        result = memory.context(build("context", params))
    except ValidationError as exc:
        raise as_flag(exc, "context") from None
    finally:
        memory.close()
    print_context(result, as_json)


def print_context(result: ContextResult, as_json: bool) -> None:
    """A `search_context` result: the MCP tool's object with --json, else the MCP tool's text."""
    print_json(result.to_dict()) if as_json else click.echo(render_context(result.to_dict()))
