"""`urchin token`: scoped API tokens of the daemon (ingest, read, admin; optionally per workspace)."""

from __future__ import annotations

import datetime as dt

import click

from urchin.cli.group import CliState, main
from urchin.cli.options import print_json
from urchin.timestamps import format_timestamp


def _when(epoch: float | None) -> str:
    return "never" if epoch is None else format_timestamp(dt.datetime.fromtimestamp(epoch, dt.UTC), ms=False)


@main.group("token")
def token() -> None:
    """Scoped tokens for the daemon's HTTP API and /mcp (hooks and agents need not hold the admin key)."""


@token.command("create")
@click.option("--scope", required=True, type=click.Choice(["ingest", "read", "hook", "admin"]),
              help="ingest: only write events; read: only query; hook: write events and recall "
                   "(an agent hook's); admin: everything.")
@click.option("--workspace", "workspaces", multiple=True,
              help="Limit the token to this workspace (repeatable; default: every workspace).")
@click.option("--expires", default=None, help="Lifetime: 12h, 30d, 2w (default: never).")
@click.option("--name", default=None, help="A label shown by `urchin token list`.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def create(app: CliState, scope: str, workspaces: tuple[str, ...], expires: str | None, name: str | None,
           as_json: bool) -> None:
    """Create a token; it is printed once (only its hash is kept, in $URCHIN_HOME/tokens.json)."""
    from urchin.facade import Memory

    result = Memory(app.settings()).token_create(scope, list(workspaces), expires, name)
    if as_json:
        print_json(result)
        return
    click.echo(result["token"])
    limit = f" in workspaces {', '.join(result['workspaces'])}" if result["workspaces"] else ""
    click.echo(f"id {result['id']}: scope {scope}{limit}, expires {_when(result['expires'])} "
               "(shown once: store it now)", err=True)


@token.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per token.")
@click.pass_obj
def list_tokens(app: CliState, as_json: bool) -> None:
    """The tokens (ids, scopes, workspaces, expiry); never the tokens themselves."""
    from urchin.facade import Memory

    for entry in Memory(app.settings()).token_list():
        if as_json:
            print_json(entry)
            continue
        limit = ",".join(entry["workspaces"] or []) or "*"
        state = " (expired)" if entry["expired"] else ""
        click.echo(f"{entry['id']}  {entry['scope']:<6}  workspaces {limit}  expires {_when(entry['expires'])}{state}"
                   + (f"  {entry['name']}" if entry.get("name") else ""))


@token.command("revoke")
@click.argument("token_id")
@click.pass_obj
def revoke(app: CliState, token_id: str) -> None:
    """Revoke the token with id TOKEN_ID: the daemon refuses it from the next request on."""
    from urchin.facade import Memory

    Memory(app.settings()).token_revoke(token_id)
    click.echo(f"revoked {token_id}")
