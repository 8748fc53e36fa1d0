"""`urchin serve`: run the daemon (intake HTTP API, hot views) in the foreground."""

from __future__ import annotations

import click

from urchin.cli.group import CliState, main


@main.command()
@click.option("--host", default=None, help="Loopback address to listen on (default: 127.0.0.1 or $URCHIN_HOST).")
@click.option("--port", default=None, type=click.IntRange(0, 65535),
              help="TCP port (default: 18799 or $URCHIN_PORT; 0 picks a free one).")
@click.option("--uds", default=None, type=click.Path(dir_okay=False),
              help="Listen on this Unix socket (made 0600) instead of TCP.")
@click.option("--log-level", default="info", show_default=True,
              type=click.Choice(["debug", "info", "warning", "error"], case_sensitive=False),
              help="Log verbosity on stderr (debug also logs every request).")
@click.option("--no-collect", is_flag=True,
              help="Do not run the collectors (Claude, Codex, shell, ...) in the background.")
@click.option("--no-index", is_flag=True, help="Do not feed the Postgres hybrid index in the background.")
@click.option("--no-mcp", is_flag=True,
              help="Do not serve the MCP tools at /mcp (the MCP SDK is never loaded: about 2 s of CPU saved).")
@click.pass_obj
def serve(app: CliState, host: str | None, port: int | None, uds: str | None, log_level: str,
          no_collect: bool, no_index: bool, no_mcp: bool) -> None:
    """Run the daemon until SIGTERM or Ctrl-C: the HTTP API, with every view kept hot.

    Clients (the CLI, the MCP server) find it through $URCHIN_HOME/daemon.json; requests need
    `Authorization: Bearer <token>` from $URCHIN_INTAKE_TOKEN or $URCHIN_HOME/token.
    """
    from urchin.daemon.deferred_route import mcp_extension
    from urchin.daemon.server import Daemon

    Daemon(app.settings(), host=host, port=port, uds=uds, log_level=log_level,
           extensions=[] if no_mcp else [mcp_extension], collect=not no_collect, feed_index=not no_index).run()
