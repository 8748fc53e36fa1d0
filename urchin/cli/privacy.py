"""Privacy commands: ephemeral mode and the identity stamped on events."""

from __future__ import annotations

import re

import click

from urchin.cli.group import CliState, main
from urchin.cli.options import json_option, print_json
from urchin.contract.render import plural
from urchin.errors import QueryError

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*$")
_MINUTES = {"s": 1 / 60, "m": 1, "": 1, "h": 60, "d": 1440}


def parse_minutes(text: str) -> float:
    """`30m`, `2h`, `90s`, `1d`, or a bare number of minutes."""
    match = _DURATION.match(text)
    if not match or float(match.group(1)) <= 0:
        raise QueryError("--for", f"must be a duration like 30m, 2h or 1d, got {text!r}")
    return float(match.group(1)) * _MINUTES[match.group(2)]


@main.command()
@click.argument("action", type=click.Choice(["on", "off", "status"]), default="status")
@click.option("--for", "duration", default=None, help="With `on`: switch off by itself after this long (30m, 2h).")
@json_option
@click.pass_obj
def ephemeral(app: CliState, action: str, duration: str | None, as_json: bool) -> None:
    """Stop recording for a while: while on, every write is dropped and counted as suppressed."""
    if duration is not None and action != "on":
        raise click.UsageError("--for goes with `on`")
    minutes = parse_minutes(duration) if duration else None
    from urchin.contract import OPERATIONS
    from urchin.params.ephemeral import EphemeralParams

    try:   # --for is checked here as the contract's minutes (7 days at most), and named as the user typed it
        params = EphemeralParams({"on": "start", "off": "end"}.get(action, action), minutes)
    except QueryError as exc:
        raise QueryError("--for", exc.rule) from None
    state = OPERATIONS["ephemeral"].run(app.memory(), params)
    if as_json:
        print_json(state.to_dict())
    else:
        click.echo(state.describe())


@main.command()
@json_option
@click.pass_obj
def identity(app: CliState, as_json: bool) -> None:
    """The account and device stamped on events this machine writes (URCHIN_ACCOUNT_ID / URCHIN_DEVICE_ID)."""
    who = app.memory().identity()
    if as_json:
        print_json(who)
    else:
        click.echo(f"account: {who['account']}\ndevice:  {who['device']}")


@main.command()
@click.option("--check", "path", default=None, type=click.Path(dir_okay=False),
              help="The file to audit (a journal, a log, a transcript).")
@click.option("--rewrite", is_flag=True,
              help="Apply the current rules to the whole journal: changed lines are rewritten (all others kept "
                   "byte-identical) and every index is refreshed.")
@click.option("--purge", is_flag=True, help="With --rewrite: also rewrite Urchin's own PostgreSQL tables (VACUUM "
                                              "FULL, then a CHECKPOINT), so no data file keeps the old text.")
@json_option
@click.pass_obj
def redact(app: CliState, path: str | None, rewrite: bool, purge: bool, as_json: bool) -> None:
    """Audit a file (--check: what redaction would remove, by type, line and column; values masked; exits 1
    when anything would be), or --rewrite the journal with the current rules (a secret type added later)."""
    if (path is None) == (not rewrite):
        raise click.UsageError("give one of --check FILE or --rewrite")
    if purge and not rewrite:
        raise click.UsageError("--purge goes with --rewrite")
    if rewrite:
        done = app.memory().redact_rewrite(purge)
        if as_json:
            print_json(done)
        else:
            click.echo("\n".join([f"rewrote {plural(done['rewritten'], 'journal line')}", *done["notes"]]))
        return
    assert path is not None
    found = 0
    for finding in app.memory().redact_check(path):
        found += 1
        if as_json:
            print_json({"type": finding.type, "line": finding.line, "column": finding.column,
                        "masked": finding.masked})
        else:
            click.echo(f"{path}:{finding.line}:{finding.column}: {finding.type} {finding.masked}")
    click.echo(f"{found} secret{'s' if found != 1 else ''} found", err=True)
    if found:
        raise SystemExit(1)
