"""`urchin find QUERY` and `urchin get-document ID`: textrawl's `search` and `get_document` tools."""

from __future__ import annotations

from typing import Any

import click

from urchin.cli.group import CliState, main
from urchin.cli.options import call, operation_options, print_json


@main.command("find")
@operation_options("document_search")
@click.option("--json", "as_json", is_flag=True, help="Print the same object the MCP tool `search` returns.")
@click.pass_obj
def find(app: CliState, as_json: bool, **params: Any) -> None:
    """Find documents for QUERY (textrawl's search): file chunks and events, best first."""
    from urchin.contract.render import render_document_search as render

    memory = app.memory()
    try:
        result = call("document_search", memory, params)
    finally:
        memory.close()
    if as_json:
        print_json(result)
    else:
        click.echo(render(result))


@main.command("get-document")
@operation_options("get_document")
@click.option("--json", "as_json", is_flag=True, help="Print the same object the MCP tool `get_document` returns.")
@click.pass_obj
def get_document(app: CliState, as_json: bool, **params: Any) -> None:
    """Print a search result's whole document (its documentId), at the version indexed."""
    from urchin.contract.render import render_document

    memory = app.memory()
    try:
        result = call("get_document", memory, params)
    finally:
        memory.close()
    print_json(result) if as_json else click.echo(render_document(result))
