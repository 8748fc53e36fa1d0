"""`urchin demo`: a guided tour on a throwaway home - ingest a few events, then search them."""

from __future__ import annotations

import sys

import click

from urchin.cli.group import CliState, main
from urchin.cli.options import print_text
from urchin.config import Settings
from urchin.contract.render import render_events
from urchin.timestamps import format_timestamp

SAMPLES = [
    ("claude", "decision", "Decided to keep the journal append-only and rebuild every index from it."),
    ("claude", "conversation", "The flaky test was a race in the watcher: fixed by awaiting the first event."),
    ("shell", "command", "pytest -q tests/test_journal.py  # exit 0 in 4.1s"),
    ("git", "commit", "Add group commit to the HTTP intake: one fsync acknowledges every waiting writer."),
    ("codex", "conversation", "Die Straße des Deployments: staging first, then production after review."),
    ("gemini", "tool_use", "Read README.md and docs/deploy.md to answer how rollbacks work."),
]


@main.command()
@click.option("--keep", is_flag=True, help="Use the real Urchin home instead of a throwaway folder.")
@click.pass_obj
def demo(app: CliState, keep: bool) -> None:
    """Ingest a few sample events and search them interactively (Ctrl-D to quit)."""
    import tempfile

    if keep:
        _tour(app.settings())
        return
    with tempfile.TemporaryDirectory(prefix="urchin-demo-") as home:   # removed however the tour ends
        _tour(Settings.resolve(home))


def _tour(settings: Settings) -> None:
    from datetime import UTC, datetime, timedelta

    from urchin.facade import Memory

    now = datetime.now(UTC)
    items = [{"source": s, "kind": k, "content": c, "workspace": "demo",
              "timestamp": format_timestamp(now - timedelta(minutes=10 * (len(SAMPLES) - i)))}
             for i, (s, k, c) in enumerate(SAMPLES)]
    with Memory(settings) as memory:
        for result in memory.ingest(items):
            click.echo(f"{result.label:>10}  {result.id}")
        click.echo(f"\nJournal: {settings.journal_path}\nTry: STRASSE, fsync, deploy, race (Ctrl-D quits)\n")
        while True:
            try:
                query = click.prompt("search", prompt_suffix="> ", default="", show_default=False)
            except (EOFError, click.Abort):
                click.echo()
                return
            if not query.strip():
                continue
            found = memory.search(query)
            print_text(render_events(found))
            if not found.hits:
                click.echo("(no match)")
            sys.stdout.flush()
