"""Commands on events: ingest, import, search, recent, get, tail, status."""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Any

import click

from urchin.cli.group import CliState, main
from urchin.cli.options import as_flag, build, call, json_option, operation_options, print_json, print_text
from urchin.contract import OPERATIONS
from urchin.contract.render import (
    older_note,
    rejection,
    render_event,
    render_events,
    render_ingest,
    render_status,
)

if TYPE_CHECKING:
    from urchin.search.query import SearchResult

# What the CLI writes when no flag says otherwise: a person typing a note (MCP writes source mcp).
_WRITER = {"source": "manual", "kind": "note"}


@main.command()
@operation_options("ingest")
@json_option
@click.pass_obj
def ingest(app: CliState, as_json: bool, **params: Any) -> None:
    """Append one event. CONTENT is the text, or - to read it from stdin (default source manual, kind note)."""
    if params.get("content") == "-":
        params["content"] = sys.stdin.read()
    typed = build("ingest", params).with_writer(_WRITER)     # checked once, here
    result = OPERATIONS["ingest"].run(app.memory(), typed)
    if result.status == "rejected":
        raise as_flag(rejection(result.reason), "ingest")
    print_json(result.to_dict()) if as_json else click.echo(render_ingest(result.to_dict()))


@main.command("import")
@click.argument("file", type=click.File("rb"))
@json_option
@click.pass_obj
def import_(app: CliState, file: Any, as_json: bool) -> None:
    """Import events from a JSONL FILE (or - for stdin). Bad lines are reported by number and skipped;
    every good line is imported, and the exit code is 1 if any line was bad. --json prints the report
    (counts, and each rejected line's number and reason: the reasons HTTP /ingest/batch gives)."""
    memory = app.memory()
    started = time.perf_counter()
    total = _size(file)
    if total and sys.stderr.isatty():
        with click.progressbar(length=total, label="importing", file=sys.stderr) as bar:
            report = memory.import_lines(_metered(file, bar.update))
    else:
        report = memory.import_lines(file)
    elapsed = time.perf_counter() - started
    if as_json:
        print_json(report.to_dict())
        if report.rejected:
            raise click.exceptions.Exit(1)
        return
    for number, reason in report.rejected:
        click.echo(f"line {number}: rejected: {reason}", err=True)
    click.echo(f"appended {report.appended}, duplicate {report.duplicate}, suppressed {report.suppressed}, "
               f"rejected {len(report.rejected)} in {elapsed:.2f}s")
    if report.indexed_events:
        click.echo(f"search index: {report.indexed_events} events indexed in {report.index_seconds:.2f}s", err=True)
    if report.rejected:   # every good line landed; the exit code still says some did not
        raise click.exceptions.Exit(1)


def _size(file: Any) -> int:
    try:
        return os.fstat(file.fileno()).st_size
    except (OSError, AttributeError, ValueError):
        return 0


def _metered(file: Any, update: Any) -> Any:
    for line in file:
        update(len(line))
        yield line


def print_events(result: SearchResult, as_json: bool) -> None:
    """A search result: the same object HTTP and MCP return with --json, else its one render."""
    print_json(result.to_dict()) if as_json else print_text(render_events(result))


@main.command()
@operation_options("search")
@click.option("--team", is_flag=True, help="Search every device's events in the shared database (--scope team).")
@json_option
@click.pass_obj
def search(app: CliState, as_json: bool, team: bool, **params: Any) -> None:
    """Literal, case-insensitive search over event content, newest first."""
    if team:
        params["scope"] = "team"
    typed = build("search", params)
    result = OPERATIONS["search"].run(app.memory(), typed)
    print_events(result, as_json)
    if result.older and not result.hits:   # stderr: what is printed for the query stays empty
        click.echo(older_note(typed.hours, result.older), err=True)


@main.command()
@operation_options("recent")
@json_option
@click.pass_obj
def recent(app: CliState, as_json: bool, **params: Any) -> None:
    """The newest events."""
    print_events(call("recent", app.memory(), params), as_json)


@main.command()
@operation_options("get")
@json_option
@click.pass_obj
def get(app: CliState, as_json: bool, **params: Any) -> None:
    """Print one whole event as JSON (--json: on one line)."""
    event = call("get", app.memory(), params).to_dict()
    print_json(event) if as_json else click.echo(render_event(event))


@main.command()
@operation_options("tail")
@click.option("-f", "--follow", is_flag=True, help="Keep printing events as they are appended.")
@click.option("--json", "as_json", is_flag=True, help="Print each event as one JSON object per line.")
@click.pass_obj
def tail(app: CliState, follow: bool, as_json: bool, **params: Any) -> None:
    """The last events in the order they were appended."""
    from urchin.search.query import one_line

    count = build("tail", params)
    memory = app.memory()

    def show(event: Any) -> None:
        click.echo(one_line(event) if not as_json else __import__("orjson").dumps(event.to_dict()).decode())

    for event in OPERATIONS["tail"].run(memory, count):
        show(event)
    if not follow:
        return
    sys.stdout.flush()
    for event in memory.follow_events():
        show(event)
        sys.stdout.flush()


@main.command()
@json_option
@click.pass_obj
def status(app: CliState, as_json: bool) -> None:
    """Journal path, size, events, time span, torn and invalid lines."""
    info = app.memory().status()
    print_json(info) if as_json else click.echo(render_status(info))


@main.command()
@operation_options("semantic")
@json_option
@click.pass_obj
def semantic(app: CliState, as_json: bool, **params: Any) -> None:
    """Ranked search for what QUERY is about (token-cosine, or the embedder when one is set), best first."""
    print_events(call("semantic", app.memory(), params), as_json)


@main.command()
@json_option
@click.pass_obj
def embed(app: CliState, as_json: bool) -> None:
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
