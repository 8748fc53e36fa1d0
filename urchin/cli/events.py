"""Commands on events: ingest, import, search, recent, get, tail, status."""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import click

from urchin.cli import AppContext, main
from urchin.cli.options import filter_options, json_option, print_json, print_result, window_options
from urchin.errors import UrchinError


@main.command()
@click.argument("content")
@click.option("--source", default="manual", show_default=True, help="Who wrote it.")
@click.option("--kind", default="note", show_default=True, help="conversation, decision, note, ...")
@click.option("--workspace", default=None, help="Project or workspace name.")
@click.option("--session", default=None, help="Session id.")
@click.option("--title", default=None, help="A short title.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable).")
@click.option("--timestamp", default=None, help="RFC 3339 time (default: now).")
@click.option("--id", "event_id", default=None, help="Event id (default: a new UUIDv7).")
@json_option
@click.pass_obj
def ingest(app: AppContext, content: str, as_json: bool, event_id: str | None, tags: tuple[str, ...],
           **fields: Any) -> None:
    """Append one event. CONTENT is the text, or - to read it from stdin."""
    if content == "-":
        content = sys.stdin.read()
    item = {k: v for k, v in fields.items() if v is not None}
    item["content"] = content
    if tags:
        item["tags"] = list(tags)
    if event_id is not None:
        item["id"] = event_id
    result = app.memory().ingest_one(item)
    if result.status == "rejected":
        raise UrchinError(result.reason or "rejected")
    if as_json:
        print_json(result.to_dict())
    else:
        click.echo(f"{result.label} {result.id}")


@main.command("import")
@click.argument("file", type=click.File("rb"))
@click.pass_obj
def import_(app: AppContext, file: Any) -> None:
    """Import events from a JSONL FILE (or - for stdin). Bad lines are reported, never fatal."""
    memory = app.memory()
    started = time.perf_counter()
    total = _size(file)
    if total and sys.stderr.isatty():
        with click.progressbar(length=total, label="importing", file=sys.stderr) as bar:
            report = memory.import_lines(_metered(file, bar.update))
    else:
        report = memory.import_lines(file)
    elapsed = time.perf_counter() - started
    for number, reason in report.rejected:
        click.echo(f"line {number}: rejected: {reason}", err=True)
    click.echo(f"appended {report.appended}, duplicate {report.duplicate}, suppressed {report.suppressed}, "
               f"rejected {len(report.rejected)} in {elapsed:.2f}s")
    if report.indexed_events:
        click.echo(f"search index: {report.indexed_events} events indexed in {report.index_seconds:.2f}s", err=True)


def _size(file: Any) -> int:
    try:
        return os.fstat(file.fileno()).st_size
    except (OSError, AttributeError, ValueError):
        return 0


def _metered(file: Any, update: Any) -> Any:
    for line in file:
        update(len(line))
        yield line


@main.command()
@click.argument("query")
@window_options(hours=168, limit=20)
@filter_options
@click.option("--team", is_flag=True, help="Search every device's events in the shared database instead.")
@json_option
@click.pass_obj
def search(app: AppContext, query: str, as_json: bool, team: bool, **params: Any) -> None:
    """Literal, case-insensitive search over event content, newest first."""
    print_result(app.memory().search(query, **params, **({"scope": "team"} if team else {})), as_json)


@main.command()
@window_options(hours=24, limit=20)
@click.option("--source", default=None, help="Only this source.")
@json_option
@click.pass_obj
def recent(app: AppContext, as_json: bool, **params: Any) -> None:
    """The newest events."""
    print_result(app.memory().recent(**params), as_json)


@main.command()
@click.argument("event_id", metavar="ID")
@click.pass_obj
def get(app: AppContext, event_id: str) -> None:
    """Print one whole event as JSON."""
    print_json(app.memory().get(event_id).to_dict())


@main.command()
@click.option("-n", "count", default=10, show_default=True, help="How many of the last events.")
@click.option("-f", "--follow", is_flag=True, help="Keep printing events as they are appended.")
@json_option
@click.pass_obj
def tail(app: AppContext, count: int, follow: bool, as_json: bool) -> None:
    """The last events in the order they were appended."""
    from urchin.search.query import one_line

    memory = app.memory()

    def show(event: Any) -> None:
        click.echo(one_line(event) if not as_json else __import__("orjson").dumps(event.to_dict()).decode())

    for event in memory.tail(count):
        show(event)
    if not follow:
        return
    offset = memory.end_offset()
    while True:
        events, offset = memory.follow(offset)
        for event in events:
            show(event)
        sys.stdout.flush()
        time.sleep(0.25)


@main.command()
@json_option
@click.pass_obj
def status(app: AppContext, as_json: bool) -> None:
    """Journal path, size, events, time span, torn and invalid lines."""
    info = app.memory().status()
    if as_json:
        print_json(info)
        return
    for key, value in info.items():
        if isinstance(value, dict):
            value = ", ".join(f"{k}={v}" for k, v in value.items())
        click.echo(f"{key:>16}: {value}")


@main.command()
@click.argument("query")
@window_options(hours=168, limit=10)
@filter_options
@json_option
@click.pass_obj
def semantic(app: AppContext, query: str, as_json: bool, **params: Any) -> None:
    """Ranked search for what QUERY is about (token-cosine, or the embedder when one is set), best first."""
    result = app.memory().semantic(query, **params)
    for note in result.notes:
        click.echo(f"warning: {note}", err=True)
    print_result(result, as_json, with_score=True)


@main.command()
@json_option
@click.pass_obj
def embed(app: AppContext, as_json: bool) -> None:
    """Embed every event the embedder's vector cache lacks (each event is embedded once, ever)."""
    memory = app.memory()
    if sys.stderr.isatty():
        with click.progressbar(length=0, label="embedding", file=sys.stderr, show_pos=True) as bar:
            report = memory.embed(progress=bar.update)
    else:
        report = memory.embed()
    if as_json:
        print_json(report)
    else:
        click.echo(f"embedded {report['embedded']} events; {report['cached']} cached for {report['model']}")
