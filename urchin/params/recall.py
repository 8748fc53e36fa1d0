"""`recall`'s typed parameters: `RecallParams`, validated when built.

Which workspace (named, or a `cwd` mapped as capture maps it), the agent's `session`, the `prompt` (none:
the session-start digest) and the block's token `budget`. The contract builds one at the edge (the CLI,
HTTP `POST /recall`, the hooks' route, the MCP tool `urchin_recall`); `Memory.recall` takes it as it is,
or builds one from a Python caller's keywords.
"""

from __future__ import annotations

from dataclasses import dataclass

from urchin.errors import QueryError
from urchin.params.limits import MAX_RECALL_BUDGET, MAX_RECALL_PROMPT_CHARS
from urchin.params.reading import TypedParams, check_texts, set_checked
from urchin.value_checks import check_number

__all__ = ["RecallParams"]


@dataclass(frozen=True, slots=True)
class RecallParams(TypedParams):
    """The fields as given, checked; `budget` None: [recall]'s session_budget or prompt_budget."""

    workspace: str | None = None
    cwd: str | None = None
    session: str | None = None
    prompt: str | None = None
    budget: int | None = None

    def __post_init__(self) -> None:
        check_texts(self, ("workspace", "cwd", "session", "prompt"))
        if self.prompt is not None:
            if len(self.prompt) > MAX_RECALL_PROMPT_CHARS:
                raise QueryError("prompt", f"must be at most {MAX_RECALL_PROMPT_CHARS} characters, "
                                           f"got {len(self.prompt)}")
            if not self.prompt.strip():
                raise QueryError("prompt", "must not be empty")
        if self.budget is not None:
            set_checked(self, budget=check_number(self.budget, "budget", whole=True, low=1, high=MAX_RECALL_BUDGET))
