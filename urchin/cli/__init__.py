"""The `urchin` command line: a thin skin over `Memory`.

Each command parses its flags, makes one call to the facade and formats the result. Library
errors (`UrchinError`) become a one-line message on stderr and exit code 1; usage errors exit 2.
Commands live in one module per noun under `urchin/cli/` and register on the `main` group.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from urchin.errors import UrchinError

__all__ = ["main"]


class UrchinGroup(click.Group):
    """Turns library errors into a clean message and exit code 1, never a traceback."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except UrchinError as exc:
            click.echo(f"error: {exc.message}", err=True)
            ctx.exit(1)
        except BrokenPipeError:
            sys.stderr.close()
            ctx.exit(0)
        except KeyboardInterrupt:
            click.echo("interrupted", err=True)
            ctx.exit(130)


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


@click.group(cls=UrchinGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--home", envvar="URCHIN_HOME", type=click.Path(file_okay=False), default=None,
              help="Urchin's data folder (default: $URCHIN_HOME or the platform's user data dir).")
@click.version_option(package_name="urchin-memory", prog_name="urchin")
@click.pass_context
def main(ctx: click.Context, home: str | None) -> None:
    """Urchin: local memory for coding agents. Append events, search them back."""
    ctx.obj = AppContext(home)


from urchin.cli import collect as _collect  # noqa: E402,F401  (registers commands)
from urchin.cli import context as _context  # noqa: E402,F401
from urchin.cli import demo as _demo  # noqa: E402,F401
from urchin.cli import doctor as _doctor  # noqa: E402,F401
from urchin.cli import events as _events  # noqa: E402,F401
from urchin.cli import find as _find  # noqa: E402,F401
from urchin.cli import forget as _forget  # noqa: E402,F401
from urchin.cli import index as _index  # noqa: E402,F401
from urchin.cli import mcp as _mcp  # noqa: E402,F401
from urchin.cli import privacy as _privacy  # noqa: E402,F401
from urchin.cli import serve as _serve  # noqa: E402,F401
from urchin.cli import workspace as _workspace  # noqa: E402,F401
