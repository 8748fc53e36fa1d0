"""`ephemeral`'s typed parameters: `EphemeralParams`, validated when built.

The contract builds one at the edge (the MCP tool `urchin_ephemeral`; the CLI's `on`/`off` are `start`/`end`)
and `Memory.ephemeral` takes it as it is, or builds one from a Python caller's arguments.
"""

from __future__ import annotations

from dataclasses import dataclass

from urchin.errors import QueryError
from urchin.params.limits import EPHEMERAL_ACTIONS as ACTIONS
from urchin.params.limits import MAX_EPHEMERAL_MINUTES as MAX_MINUTES
from urchin.params.reading import TypedParams, set_checked
from urchin.value_checks import check_number, describe

__all__ = ["EphemeralParams"]


@dataclass(frozen=True, slots=True)
class EphemeralParams(TypedParams):
    """start: store nothing (for `minutes`, else until end); end: store again; status: say which."""

    action: str = "status"
    minutes: float | None = None

    def __post_init__(self) -> None:
        action = self.action.strip().lower() if isinstance(self.action, str) else self.action
        if action not in ACTIONS:
            raise QueryError("action", f"must be one of {', '.join(ACTIONS)}, got {describe(self.action)}")
        minutes = None if self.minutes is None else \
            check_number(self.minutes, "minutes", whole=False, above=0, high=MAX_MINUTES)
        set_checked(self, action=action, minutes=minutes)

