"""The `urchin` click group and its context: library errors become one line and exit code 1.

Command modules (one per noun) import `main` and `AppContext` from here and register on it;
`urchin/cli/__init__.py` imports them all, so nothing imports the package from inside it.
"""

from __future__ import annotations

import re
import sys
from typing import Any, TextIO

import click

from urchin.errors import UrchinError

__all__ = ["main", "AppContext", "UrchinGroup"]


class UrchinGroup(click.Group):
    """Turns library errors into a clean message and exit code 1, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UrchinError as exc:
            from urchin.redact import redact_message

            click.echo(f"error: {redact_message(exc.message)}", err=True)
            ctx.exit(1)
        except BrokenPipeError:
            sys.stderr.close()
            ctx.exit(0)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)


# C0 (but tab and newline), DEL and C1: what a terminal may read as the start of a control sequence
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class TerminalText:
    """A terminal's stdout that shows control characters as U+FFFD: events hold what tools
    and pages printed, and a stored escape sequence must not drive the user's terminal (OSC 52 writes
    the clipboard, others retitle, clear or hide text). JSON output escapes them already."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(_CONTROL.sub("\ufffd", text))
        return len(text)

    def __getattr__(self, name: str) -> Any:  # `buffer` too: binary writers (MCP stdio) write JSON
        return getattr(self._stream, name)


def _guard_terminal() -> None:
    """stdout only: it carries stored text; stderr carries our own messages (quoted with repr) and
    the progress bars, whose own control sequences must pass."""
    stream = sys.stdout
    try:
        tty = stream.isatty() and not isinstance(stream, TerminalText)
    except (AttributeError, ValueError):
        return
    if tty:
        sys.stdout = TerminalText(stream)


class AppContext:
    """Resolves settings and opens `Memory` lazily, so `--help` and usage errors do no I/O."""

    def __init__(self, home: str | None) -> None:
        self.home = home
        self._memory: Any = None

    def settings(self) -> Any:
        from urchin.config import Settings

        return Settings.resolve(self.home)

    def memory(self) -> Any:
        """The daemon's API when one runs for this home, else an in-process `Memory` (same results)."""
        if self._memory is None:
            from urchin.daemon.client import open_memory

            self._memory = open_memory(self.settings())
        return self._memory

    def close(self) -> None:
        """Called when the command ends, however it ends: the index connection, an embedded
        PostgreSQL this process started and the daemon connection are released."""
        if self._memory is not None:
            memory, self._memory = self._memory, None
            memory.close()


@click.group(cls=UrchinGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", envvar="URCHIN_HOME", type=click.Path(file_okay=False), default=None,
              help="Urchin's data folder (default: $URCHIN_HOME or the platform's user data dir).")
@click.version_option(package_name="urchin-memory", prog_name="urchin")
@click.pass_context
def main(ctx: click.Context, home: str | None) -> None:
    """Urchin: local memory for coding agents. Append events, search them back."""
    _guard_terminal()
    ctx.obj = AppContext(home)
    ctx.call_on_close(ctx.obj.close)
