"""`urchin forget`: remove events everywhere, for good (journal, every view, PostgreSQL)."""

from __future__ import annotations

import click

from urchin.cli.group import CliState, main
from urchin.cli.options import call, json_option, print_json


@main.command()
@click.argument("ids", nargs=-1)
@click.option("--session", default=None, help="Forget every event of this session.")
@click.option("--query", default=None, help="Forget events whose content contains this text (case-insensitive).")
@click.option("--since", default=None, help="Only events at or after this time (RFC 3339).")
@click.option("--until", default=None, help="Only events at or before this time (RFC 3339).")
@click.option("--yes", is_flag=True, help="Really forget (without it, --session, --query and a time range "
                                          "only preview what would go).")
@click.option("--purge", is_flag=True, help="Also rewrite Urchin's own PostgreSQL tables (VACUUM FULL, then a "
                                              "CHECKPOINT), so no data file keeps the forgotten rows' bytes.")
@json_option
@click.pass_obj
def forget(app: CliState, ids: tuple[str, ...], session: str | None, query: str | None, since: str | None,
           until: str | None, yes: bool, purge: bool, as_json: bool) -> None:
    """Forget events by id, session, query or time range: hidden at once, then removed from the journal
    (every other line kept byte-identical) and from every index. Selectors given together must all hold.

    Ids alone act at once; anything broader previews the matches until you add --yes.
    """
    if not (ids or session or query or since or until):
        raise click.UsageError("say what to forget: ids, --session, --query, --since/--until")
    confirm = yes or not (session or query or since or until)
    result = call("forget", app.memory(), {"ids": ids, "session": session, "query": query, "since": since,
                                           "until": until, "confirm": confirm, "purge": purge})
    if as_json:
        print_json(result.to_dict())
    else:
        click.echo(result.render(confirm="run again with --yes"))
    if ids and result.not_found and not result.matched:
        raise SystemExit(1)
