"""The `urchin` click group and its context: library errors become one line and exit code 1.

Command modules (one per noun) import `main` and `CliState` from here and register on it;
`urchin/cli/__init__.py` imports them all, so nothing imports the package from inside it.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING, Any, TextIO

import click

from urchin.errors import UrchinError

if TYPE_CHECKING:
    from urchin.config import Settings
    from urchin.facade.api import Facade

__all__ = ["main", "CliState", "UrchinGroup"]


class UrchinGroup(click.Group):
    """Turns library errors into a clean message and exit code 1, never a traceback, and sends
    everything the command prints on stderr through the redactor (see `RedactedStderr`)."""

    def main(self, args: Any = None, *rest: Any, **kwargs: Any) -> Any:
        argv = [str(a) for a in (sys.argv[1:] if args is None else args)]
        stderr = sys.stderr
        sys.stderr = stderr if isinstance(stderr, RedactedStderr) else RedactedStderr(stderr, argv)
        try:
            return super().main(args, *rest, **kwargs)
        finally:
            sys.stderr = stderr

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


class RedactedStderr:
    """stderr of a CLI process: every message on it passes the redactor. Click's usage errors
    quote the argument they refused ("No such option: -----BEGIN ..."), warnings and log records
    quote what they were given, a traceback quotes values: one place covers them all. Only stdout
    may hand the user a credential (`token create`, `db setup`, the viewer's login link).

    A usage error may quote a piece of an argument (click splits `--name=value` at the `=`), which
    the redactor alone may not recognise: any 8 characters of a secret found in the command line
    are cut wherever they show up. The redactor is imported on the first write only: a command that
    prints nothing on stderr does not pay for it."""

    _WINDOW = 8

    def __init__(self, stream: TextIO, argv: list[str]) -> None:
        self._stream = stream
        self._argv = argv
        self._secrets: list[tuple[str, str]] | None = None

    def write(self, text: str) -> int:
        self._stream.write(self.scrub(text) if text.strip() else text)
        return len(text)

    def scrub(self, text: str) -> str:
        from urchin.redact import redact_message

        for secret, kind in self._argv_secrets():
            text = _cut_fragments(text, secret, f"[REDACTED:{kind}]", self._WINDOW)
        return redact_message(text)

    def _argv_secrets(self) -> list[tuple[str, str]]:
        if self._secrets is None:
            self._secrets = [(secret, kind) for arg in self._argv for secret, kind in _secrets_in(arg)
                             if len(secret) >= self._WINDOW]
        return self._secrets

    def __getattr__(self, name: str) -> Any:
        if name == "buffer":   # else click writes to the bytes under us (it does when the locale looks wrong)
            raise AttributeError(name)
        return getattr(self._stream, name)


_MARKER = re.compile(r"\[REDACTED:([a-z0-9_]+)\]")


def _secrets_in(text: str) -> list[tuple[str, str]]:
    """(secret, type) for each span the redactor replaces in `text`: what lies between the pieces
    it kept (the redactor only swaps spans for markers, so the kept pieces occur in order)."""
    from urchin.redact import redact_message

    parts = _MARKER.split(redact_message(text))
    if len(parts) == 1:
        return []
    kept, kinds = parts[0::2], parts[1::2]
    found: list[tuple[str, str]] = []
    pos = len(kept[0])
    for kind, piece in zip(kinds, kept[1:], strict=True):
        end = text.find(piece, pos) if piece else -1
        if piece and end < 0:          # cannot happen with a span-replacing redactor: take the rest
            end = len(text)
        if end >= 0:
            if end > pos:
                found.append((text[pos:end], kind))
            pos = end + len(piece)
    if pos < len(text):
        found.append((text[pos:], kinds[-1]))
    return found


def _cut_fragments(text: str, secret: str, marker: str, window: int) -> str:
    """`text` with each run of at least `window` characters that occurs in `secret` replaced by `marker`."""
    grams = {secret[i:i + window] for i in range(len(secret) - window + 1)}
    if not any(text[i:i + window] in grams for i in range(len(text) - window + 1)):
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i:i + window] in grams:
            end = i + window
            while end < len(text) and text[i:end + 1] in secret:
                end += 1
            out.append(marker)
            i = end
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


class CliState:
    """Resolves settings and opens `Memory` lazily, so `--help` and usage errors do no I/O."""

    def __init__(self, home: str | None) -> None:
        self.home = home
        self._memory: Facade | None = None

    def settings(self) -> Settings:
        from urchin.config import Settings

        return Settings.resolve(self.home)

    def memory(self) -> Facade:
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
    ctx.obj = CliState(home)
    ctx.call_on_close(ctx.obj.close)
