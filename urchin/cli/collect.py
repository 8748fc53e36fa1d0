"""Capture commands: `urchin collect`, `urchin hook`, `urchin install-hooks`, `urchin uninstall-hooks`."""

from __future__ import annotations

import sys
from typing import Any

import click

from urchin.cli.group import CliState, main
from urchin.cli.options import json_option, print_json

COLLECTOR_NAMES = ("claude", "copilot", "gemini", "codex", "shell", "git")


@main.command()
@click.argument("name", required=False, type=click.Choice((*COLLECTOR_NAMES, "all")))
@click.option("--list", "show_list", is_flag=True, help="Show each collector, its folders and last run.")
@json_option
@click.pass_obj
def collect(app: CliState, name: str | None, show_list: bool, as_json: bool) -> None:
    """Backfill events from agent transcripts, shell history and git (NAME or all)."""
    memory = app.memory()
    if show_list or name is None:
        rows = memory.collectors_status()
        if as_json:
            for row in rows:
                print_json(row)
            return
        for row in rows:
            found = "found" if row["found"] else "not found"
            click.echo(f"{row['name']:<8} {found:<10} events {row['events']:<7} last run {row['lastRun'] or 'never'}"
                       + (f"  last error: {row['lastError']}" if row["lastError"] else ""))
            for folder in row["folders"]:
                click.echo(f"         {folder}")
        return
    reports = memory.collect(name)
    for report in reports:
        if as_json:
            print_json(report.to_dict())
        else:
            click.echo(report.summary())
            for error in report.errors:
                click.echo(f"  error: {error}", err=True)
    if not reports:
        click.echo("no collector found anything to read (see urchin collect --list)")


@main.command(context_settings={"ignore_unknown_options": True})
@click.argument("agent")
@click.argument("extra", nargs=-1, required=False)
@click.option("--event", default=None, help="The hook event, for agents whose payload does not name it.")
@click.option("--shell", "shell_name", default=None, help="shell: bash, zsh or fish.")
@click.option("--exit-code", default=None, help="shell: the command's exit code.")
@click.option("--cwd", default=None, help="shell: the folder the command ran in.")
@click.option("--started", default=None, help="shell: start time, epoch seconds.")
@click.option("--duration-ms", default=None, help="shell: how long it ran.")
@click.option("--session", default=None, help="shell: the shell's session (its pid).")
@click.pass_obj
def hook(app: CliState, agent: str, extra: tuple[str, ...], event: str | None, shell_name: str | None,
         **shell: Any) -> None:
    """Record one hook payload from stdin (AGENT: claude, gemini, copilot, shell), and print the context
    an agent takes at session start and at each prompt (claude, gemini; codex: context only). Always exits 0."""
    from urchin.hooks import run_hook

    try:
        raw = sys.stdin.buffer.read()
    except (OSError, ValueError):
        raw = b""
    fields = {k: v for k, v in shell.items() if v not in (None, "")}
    if shell_name:
        fields["shell"] = shell_name
    sys.exit(run_hook(agent, raw, home=app.home, event=event, fields=fields))


@main.command("install-hooks")
@click.argument("target", type=click.Choice(("claude", "gemini", "copilot", "codex", "shell")))
@click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False),
              help="The file to change (default: the agent's user settings, or ~/.bashrc / ~/.zshrc).")
@click.option("--shell", "shell_name", default=None, type=click.Choice(("bash", "zsh")),
              help="For shell: which shell (default: from --config, else bash).")
@click.option("--dry-run", is_flag=True, help="Print the diff; change nothing.")
@click.pass_obj
def install_hooks(app: CliState, target: str, config_path: str | None, shell_name: str | None,
                  dry_run: bool) -> None:
    """Merge Urchin's hooks into an agent's config (idempotent, with a backup)."""
    result = app.memory().install_hooks(target, path=config_path, dry_run=dry_run, shell=shell_name)
    if dry_run and result.diff:
        click.echo(result.diff, nl=False)
    click.echo(result.describe(), err=dry_run)


@main.command("uninstall-hooks")
@click.argument("target", required=False, type=click.Choice(("claude", "gemini", "copilot", "codex", "shell")))
@click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False),
              help="The file to change (needs TARGET; default: the agent's user settings, or ~/.bashrc / ~/.zshrc).")
@click.option("--shell", "shell_name", default=None, type=click.Choice(("bash", "zsh")),
              help="For shell: which shell (default: both rc files when no --config).")
@click.option("--dry-run", is_flag=True, help="Print the diff; change nothing.")
@click.pass_obj
def uninstall_hooks(app: CliState, target: str | None, config_path: str | None, shell_name: str | None,
                    dry_run: bool) -> None:
    """Remove Urchin's hooks (every agent's, and the shells', without TARGET), keeping everything else in
    each file, after a backup. Safe to run again."""
    if config_path and not target:
        raise click.UsageError("--config needs a TARGET (which agent's file it is)")
    if target == "shell" and not config_path and not shell_name:
        results = [r for shell in ("bash", "zsh")
                   for r in app.memory().uninstall_hooks("shell", dry_run=dry_run, shell=shell)]
    else:
        results = app.memory().uninstall_hooks(target, path=config_path, dry_run=dry_run, shell=shell_name)
    for result in results:
        if dry_run and result.diff:
            click.echo(result.diff, nl=False)
        click.echo(result.describe(), err=bool(result.error) or dry_run)
    if any(result.error for result in results):
        sys.exit(1)
