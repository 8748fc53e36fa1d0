"""`urchin doctor`: check the installation and say how to fix what is wrong."""

from __future__ import annotations

import click

from urchin.cli.group import CliState, main
from urchin.cli.options import json_option, print_json

_MARK = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


@main.command()
@click.option("--fix", "do_fix", is_flag=True,
              help="Remove the embedded PostgreSQL data that removed homes left (as root, under /var/lib/urchin/pg).")
@json_option
@click.pass_obj
def doctor(app: CliState, do_fix: bool, as_json: bool) -> None:
    """Check the journal, permissions, torn lines, daemon, token, embedder and database, and say where
    the embedded PostgreSQL keeps its data.

    Prints one line per check (ok, warn or FAIL) with a fix hint; exits 1 if any check fails.
    Changes nothing, except with --fix.
    """
    from urchin.doctor import fix, run_checks

    if do_fix:
        for done in fix(app.settings()):
            if as_json:
                print_json({"check": "fix", "level": "ok", "detail": done})
            else:
                click.echo(f"fixed {done}")
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
