"""`urchin db`: least privilege on a shared PostgreSQL (owner, reader, one feeder role per device)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from urchin.cli.group import CliState, main
from urchin.cli.options import print_json

if TYPE_CHECKING:
    from urchin.hybrid.pg_roles import FeederRole, RoleSetup


def _show_roles(result: RoleSetup, as_json: bool) -> None:
    if as_json:
        print_json(result)
        return
    for name, role in (("owner", result["owner"]), ("reader", result["reader"])):
        click.echo(f"{name}: role {role['role']}" + (f"; URL (shown once): {role['url']}" if role["url"] else
                                                     " (exists; password unchanged)"))


def _show_feeder(result: FeederRole, as_json: bool) -> None:
    if as_json:
        print_json(result)
        return
    click.echo(f"feeder of device {result['device']} (account {result['account'] or 'none'}): role {result['role']}"
               + (f"; URL (shown once): {result['url']}" if result["url"] else " (exists; password unchanged)"))


@main.group("db")
def db() -> None:
    """Roles on the shared PostgreSQL (URCHIN_DATABASE_URL must be an administrator's)."""


@db.command("setup")
@click.option("--owner-password", default=None, help="Password of the owner role (default: generated when created).")
@click.option("--reader-password", default=None, help="Password of the reader role (default: generated when created).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def setup(app: CliState, owner_password: str | None, reader_password: str | None, as_json: bool) -> None:
    """Create the owner (migrations), reader and feeder roles; migrate as the owner. Safe to run again."""
    from urchin.facade import Memory

    memory = Memory(app.settings())
    try:
        _show_roles(memory.db_setup(owner_password, reader_password), as_json)
    finally:
        memory.close()


@db.command("feeder")
@click.argument("device")
@click.option("--password", default=None, help="The role's password (default: generated when created).")
@click.option("--account", default=None,
              help="The account its rows carry (URCHIN_ACCOUNT_ID of that machine); given again, it rebinds the role.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_obj
def feeder(app: CliState, device: str, password: str | None, account: str | None, as_json: bool) -> None:
    """Create the role that feeds DEVICE: the database lets it write only that device's rows, as its account."""
    from urchin.facade import Memory

    memory = Memory(app.settings())
    try:
        _show_feeder(memory.db_feeder(device, password, account), as_json)
    finally:
        memory.close()
