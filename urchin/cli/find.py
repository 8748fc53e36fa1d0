"""`urchin find QUERY`: textrawl's `search` tool (documents; memories and conversations on request)."""

from __future__ import annotations

from typing import Any

import click

from urchin.cli.group import AppContext, main
from urchin.cli.options import print_json


@main.command("find")
@click.argument("query")
@click.option("--limit", type=int, default=None, help="Most results (default 10, at most 100).")
@click.option("--full-text-weight", type=float, default=None, help="Weight of the keyword leg (default 1.0).")
@click.option("--semantic-weight", type=float, default=None, help="Weight of the semantic leg (default 1.0).")
@click.option("--tag", "tags", multiple=True, help="Only results with ALL these tags (repeatable).")
@click.option("--source-type", default=None, help="Only this type: an event kind, or file, markdown, code.")
@click.option("--min-score", type=float, default=None, help="Drop results under this absolute score (0-1).")
@click.option("--memories", "include_memories", is_flag=True, default=None,
              help="Also search memories (curated memories and urchin_remember decisions).")
@click.option("--conversations", "include_conversations", is_flag=True, default=None,
              help="Also search conversations (agent sessions with their best turns).")
@click.option("--memory-weight", type=float, default=None, help="Weight of memories (default 1.0).")
@click.option("--json", "as_json", is_flag=True, help="Print the same object the MCP tool `search` returns.")
@click.pass_obj
def find(app: AppContext, query: str, tags: tuple[str, ...], as_json: bool, **flags: Any) -> None:
    """Find documents for QUERY (textrawl's search): file chunks and events, best first."""
    from urchin.contract.render import render_document_search as render

    names = {"full_text_weight": "fullTextWeight", "semantic_weight": "semanticWeight", "source_type": "sourceType",
             "min_score": "minScore", "include_memories": "includeMemories",
             "include_conversations": "includeConversations", "memory_weight": "memoryWeight", "limit": "limit"}
    params: dict[str, Any] = {"query": query, **{names[k]: v for k, v in flags.items() if v is not None}}
    if tags:
        params["tags"] = list(tags)
    memory = app.memory()
    try:
        result = memory.document_search(params)
    finally:
        memory.close()
    if as_json:
        print_json(result)
    else:
        click.echo(render(result))
