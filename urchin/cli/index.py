"""`urchin index`: feed the journal into the Postgres hybrid index (rebuild, follow, status)."""

from __future__ import annotations

import sys
import threading
import time
from typing import Any

import click

from urchin.cli.group import CliState, main
from urchin.cli.options import print_json
from urchin.contract.render import render_status


@main.command("index")
@click.option("--rebuild", is_flag=True, help="Empty the index and replay the whole journal into it.")
@click.option("--follow", is_flag=True, help="Keep feeding new events until interrupted (Ctrl-C).")
@click.option("--status", "show_status", is_flag=True, help="Print the index's state and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_obj
def index(app: CliState, rebuild: bool, follow: bool, show_status: bool, as_json: bool) -> None:
    """Feed the journal into the Postgres index (URCHIN_DATABASE_URL, else the embedded server)."""
    memory = app.memory()
    if show_status:
        info = memory.index_status()
        print_json(info) if as_json else click.echo(render_status(info))
        return
    stop = threading.Event()
    progress = _Progress(follow and not as_json, sys.stderr.isatty() and not as_json, memory.end_offset())
    if follow and not as_json:
        click.echo("following the journal into the index (Ctrl-C stops)", err=True)
    try:
        run = memory.update_index(rebuild=rebuild, follow=follow, on_progress=progress, stop=stop)
    except KeyboardInterrupt:
        stop.set()
        return
    finally:
        progress.close()
    if as_json:
        print_json(run.to_dict())
    else:
        click.echo(run.render())


class _Progress:
    """A bar on a terminal; when following, a line per second that the cursor moved (logs, pipes too)."""

    def __init__(self, lines: bool, bar: bool, total: int) -> None:
        self._lines = lines
        self._bar: Any = click.progressbar(length=max(1, total), label="indexing", file=sys.stderr) if bar else None
        if self._bar is not None:
            self._bar.__enter__()
        self._said = 0.0

    def __call__(self, done: int, total: int) -> None:
        if self._bar is not None:
            self._bar.length = max(total, 1)
            self._bar.update(done - self._bar.pos)
        elif self._lines and (done >= total or time.monotonic() - self._said >= 1.0):
            self._said = time.monotonic()
            click.echo(f"indexed up to byte {done:,} of {total:,}", err=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.__exit__(None, None, None)
            self._bar = None
