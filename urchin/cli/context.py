"""`urchin context QUERY`: the hybrid `search_context` query, one flag per parameter."""

from __future__ import annotations

from typing import Any

import click

from urchin.cli import AppContext, main
from urchin.cli.options import print_json


def _searches(values: tuple[str, ...]) -> list[dict[str, str]] | None:
    out = []
    for value in values:
        kind, _, text = value.partition(":")
        out.append({"type": kind.strip().lower(), "query": text})
    return out or None


@main.command("context")
@click.argument("query")
@click.option("--strategy", type=click.Choice(["hybrid", "keyword", "semantic"]), default=None,
              help="Which legs run (default hybrid).")
@click.option("--search", "searches", multiple=True, metavar="TYPE:TEXT",
              help="A sub-query: lex:WORDS (keyword leg), vec:TEXT or hyde:PASSAGE (semantic leg). "
                   "Repeatable, up to 8.")
@click.option("--full-text-weight", type=float, default=None, help="Weight of the keyword leg (default 1.0).")
@click.option("--semantic-weight", type=float, default=None, help="Weight of the semantic leg (default 1.0).")
@click.option("--k", "k", type=int, default=None, help="RRF constant: score = sum weight / (k + rank) (default 60).")
@click.option("--source", "sources", multiple=True, help="Only these sources (repeatable).")
@click.option("--kind", "kinds", multiple=True, help="Only these kinds (repeatable).")
@click.option("--workspace", default=None, help="Only this workspace.")
@click.option("--session", default=None, help="Only this session.")
@click.option("--tag", "tags", multiple=True, help="Only results with ALL these tags (repeatable).")
@click.option("--since", default=None, help="Only events at or after this RFC 3339 time.")
@click.option("--until", default=None, help="Only events before this RFC 3339 time.")
@click.option("--hours", type=float, default=None, help="Only the last N hours (default: no time window).")
@click.option("--include-memories/--no-include-memories", default=None,
              help="Search memories (decision events); default yes.")
@click.option("--include-conversations/--no-include-conversations", default=None,
              help="Search everything that is not a memory; default yes.")
@click.option("--memory-weight", type=float, default=None,
              help="Weight of memories against conversations (default 1.0).")
@click.option("--min-score", type=float, default=None, help="Drop results under this calibrated score (0-1).")
@click.option("--limit", type=int, default=None, help="Most results (default 10, at most 100).")
@click.option("--token-budget", type=int, default=None,
              help="Pack results best first into this many tokens (estimated at 4 characters per token).")
@click.option("--explain", is_flag=True, default=None, help="Show each leg's rank, score, weight and contribution.")
@click.option("--per-file-cap", type=int, default=None, help="Most passages of one workspace file (default 3).")
@click.option("--mode", type=click.Choice(["indexed", "live"]), default=None,
              help="live: also read cataloged (over-cap) files at query time (default indexed).")
@click.option("--live-byte-budget", type=int, default=None,
              help="Bytes read live per query in live mode (default 8 MiB).")
@click.option("--json", "as_json", is_flag=True, help="Print the same object the MCP tool search_context returns.")
@click.pass_obj
def context(app: AppContext, query: str, searches: tuple[str, ...], as_json: bool, **flags: Any) -> None:
    """Find the most relevant events for QUERY: full-text and semantic legs fused by weighted RRF."""
    memory = app.memory()
    try:
        result = memory.context(query=query, searches=_searches(searches),
                                **{k: (list(v) or None) if isinstance(v, tuple) else v for k, v in flags.items()})
    finally:
        memory.close()
    print_context(result, as_json)


def print_context(result: Any, as_json: bool) -> None:
    """A `search_context` result: the MCP object with --json, else cited excerpts and a coverage line."""
    if as_json:
        print_json(result.to_dict())
        for warning in result.coverage.get("warnings", []):
            click.echo(f"warning: {warning}", err=True)
        return
    for r in result.results:
        click.echo(f"[{r['updatedAt']}] {r['source']} ({r['score']:.3f}) {r['citation']}")
        for line in r["content"].splitlines() or [""]:
            click.echo(f"    {line}")
        if "explain" in r:
            legs = ", ".join(f"{x['leg']}/{x['origin']} #{x['rank']} +{x['contribution']:.4f}"
                             for x in r["explain"]["legs"])
            click.echo(f"    explain: {legs}; fused {r['explain']['fused']:.4f}")
    cov = result.coverage
    for warning in cov.get("warnings", []):
        click.echo(f"warning: {warning}", err=True)
    legs = ", ".join(f"{leg['leg']}/{leg['origin']} {leg['candidates']}" for leg in cov["legs"])
    notes = "; ".join(cov["skipped"] + ([cov["index"]["note"]] if cov.get("index", {}).get("note") else []))
    click.echo(f"-- {len(result.results)} results; candidates: {legs}; ~{result.tokens_used} tokens "
               f"({cov['tokenEstimate']}){'; truncated' if result.truncated else ''}{'; ' + notes if notes else ''}",
               err=True)
