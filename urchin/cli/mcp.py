"""`urchin mcp`: serve Urchin's MCP tools over stdio for an agent that launches it.

stdout carries nothing but the protocol; logs go to stderr. The tools reach the daemon when one
runs, and the journal in-process otherwise.
"""

from __future__ import annotations

import sys

import click

from urchin.cli.group import CliState, main


@main.command("mcp")
@click.option("--log-level", default="warning", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"]), help="Logging on stderr.")
@click.pass_obj
def mcp_command(app: CliState, log_level: str) -> None:
    """Serve the MCP tools on stdin/stdout (for Claude Code, Cursor, VS Code, Gemini CLI, Codex, ...)."""
    import logging  # here, not at module level: every other command would pay for it

    import anyio

    from urchin.mcp_server import serve_stdio

    logging.basicConfig(stream=sys.stderr, level=log_level.upper(),
                        format="urchin mcp: %(levelname)s %(name)s: %(message)s")
    try:
        anyio.run(serve_stdio, app.memory())   # the daemon's when one runs; closed with the command
    except KeyboardInterrupt:
        pass
