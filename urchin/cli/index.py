"""`urchin index`: feed the journal into the Postgres hybrid index (rebuild, follow, status)."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import click

from urchin.cli import AppContext, main
from urchin.cli.options import print_json
from urchin.contract.render import render_status


@main.command("index")
@click.option("--rebuild", is_flag=True, help="Empty the index and replay the whole journal into it.")
@click.option("--follow", is_flag=True, help="Keep feeding new events until interrupted (Ctrl-C).")
@click.option("--status", "show_status", is_flag=True, help="Print the index's state and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_obj
def index(app: AppContext, rebuild: bool, follow: bool, show_status: bool, as_json: bool) -> None:
    """Feed the journal into the Postgres index (URCHIN_DATABASE_URL, else the embedded server)."""
    memory = app.memory()
    try:
        if show_status:
            info = memory.index_status()
            print_json(info) if as_json else click.echo(render_status(info))
            return
        started = time.perf_counter()
        stop = threading.Event()
        bar: Any = None
        if sys.stderr.isatty() and not as_json:
            bar = click.progressbar(length=max(1, memory.end_offset()), label="indexing", file=sys.stderr)
            bar.__enter__()

        def progress(done: int, total: int) -> None:
            if bar is not None:
                bar.length = max(total, 1)
                bar.update(done - bar.pos)

        try:
            report = memory.index(rebuild=rebuild, follow=follow, on_progress=progress, stop=stop)
        except KeyboardInterrupt:
            stop.set()
            return
        finally:
            if bar is not None:
                bar.__exit__(None, None, None)
        files = memory.index_files() if not follow and memory.workspace_list() else None
        elapsed = time.perf_counter() - started
        if as_json:
            print_json({**report.to_dict(), "seconds": round(elapsed, 3),
                        **({"files": files.to_dict()} if files is not None else {})})
        else:
            rate = report.events / elapsed if elapsed > 0 else 0.0
            click.echo(f"indexed {report.events} events ({report.inserted} new) in {elapsed:.1f} s "
                       f"({rate:,.0f}/s); cursor at byte {report.offset}"
                       + (f"; {report.retries} retries" if report.retries else ""))
            if files is not None:
                click.echo(f"workspace files: {files.indexed} indexed ({files.chunks} chunks), {files.unchanged} "
                           f"unchanged, {files.cataloged} cataloged (over the size cap), {files.failed} failed, "
                           f"{files.removed} removed")
    finally:
        memory.close()
