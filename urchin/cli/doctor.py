"""`urchin doctor`: check the installation and say how to fix what is wrong."""

from __future__ import annotations

import click

from urchin.cli import AppContext, main
from urchin.cli.options import json_option, print_json

_MARK = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


@main.command()
@json_option
@click.pass_obj
def doctor(app: AppContext, as_json: bool) -> None:
    """Check the journal, permissions, torn lines, daemon, token, embedder and database.

    Prints one line per check (ok, warn or FAIL) with a fix hint; exits 1 if any check fails.
    """
    from urchin.doctor import run_checks

    checks = run_checks(app.settings())
    for check in checks:
        if as_json:
            print_json(check.to_dict())
            continue
        click.echo(f"{_MARK[check.level]}  {check.name:<9} {check.detail}")
        if check.hint and check.level != "ok":
            click.echo(f"      {'':<9} fix: {check.hint}")
    if any(check.level == "fail" for check in checks):
        raise SystemExit(1)
