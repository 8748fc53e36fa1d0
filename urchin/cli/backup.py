"""`urchin backup PATH` and `urchin restore PATH`: the home's irreplaceable files in one tar file."""

from __future__ import annotations

from pathlib import Path

import click

from urchin.cli.group import CliState, main
from urchin.cli.options import print_json


@main.command("backup")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.pass_obj
def backup(app: CliState, path: Path, as_json: bool) -> None:
    """Write a backup of the home to PATH (a new tar file, 0600; .tar.gz compresses; a folder: a new
    file in it): the journal, config, install key, tokens' hashes, forget log, collectors'
    checkpoints, workspace roots and curated memories. Safe while the daemon runs."""
    from urchin.facade.backup import backup as run

    report = run(app.settings(), path)
    if as_json:
        print_json(report.to_dict())
        return
    left = f", {_count(report.forgotten_left_out, 'forgotten event')} left out" if report.forgotten_left_out else ""
    click.echo(f"backed up {_count(report.events, 'event')} ({report.journal_bytes:,} bytes of journal{left}) "
               f"and {_count(len(report.files) - 1, 'other file')} to {report.path}")


@main.command("restore")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--force", is_flag=True, help="Restore over a home that holds data: it is moved aside first "
              "(to <home>.before-restore-<time>), never deleted.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as one JSON object.")
@click.pass_obj
def restore(app: CliState, path: Path, force: bool, as_json: bool) -> None:
    """Restore a backup made by `urchin backup` into the home (which must be empty, unless --force).
    Views and the index rebuild from the restored journal by themselves."""
    from urchin.facade.backup import restore as run

    report = run(app.settings(), path, force=force)
    if as_json:
        print_json(report.to_dict())
        return
    if report.moved_aside:
        click.echo(f"moved the former home aside to {report.moved_aside}")
    click.echo(f"restored {_count(report.events, 'event')} and {_count(len(report.files) - 1, 'other file')} "
               f"from {report.path} (taken {report.created}) into {report.home}")
    click.echo("the daemon's bearer token and the hooks' token are not in a backup: new ones are made on first "
               "use (run `urchin install-hooks` again for your agents)")


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}{'' if n == 1 else 's'}"
