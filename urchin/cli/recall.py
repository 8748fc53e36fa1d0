"""`urchin recall`: what an agent is told without asking, at session start or for a prompt."""

from __future__ import annotations

from typing import Any

import click

from urchin.cli.group import CliState, main
from urchin.cli.options import as_flag, build, operation_options, print_json, print_text
from urchin.contract import OPERATIONS
from urchin.errors import ValidationError


@main.command("recall")
@operation_options("recall")
@click.option("--json", "as_json", is_flag=True, help="Print {text, items, tokens}: the same object as HTTP and MCP.")
@click.pass_obj
def recall(app: CliState, as_json: bool, **params: Any) -> None:
    """Print the block an agent's hook injects: the session-start digest of a workspace, or with
    --prompt the few past records relevant to it (nothing when none is)."""
    typed = build("recall", params)      # checked once, here: a bad value never reaches the daemon
    memory = app.memory()
    try:
        result = OPERATIONS["recall"].run(memory, typed)
    except ValidationError as exc:
        raise as_flag(exc, "recall") from None
    finally:
        memory.close()
    print_json(result.to_dict()) if as_json else print_text(result.text)
