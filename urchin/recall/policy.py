"""`[recall]` in config.toml: on or off, budgets and sources left out, globally and per workspace.

    [recall]
    enabled = true                 # false: nothing is ever injected
    session_budget = 1200          # tokens of the session-start digest
    prompt_budget = 600            # tokens at each prompt
    exclude_sources = ["shell"]    # never recalled
    [recall.workspaces.secret-project]
    enabled = false                # this workspace only; any key above may be set here
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from urchin.errors import ConfigError, QueryError
from urchin.params.limits import MAX_RECALL_BUDGET as MAX_BUDGET
from urchin.value_checks import check_bool, check_number

__all__ = ["Policy", "SESSION_BUDGET", "PROMPT_BUDGET", "MAX_BUDGET"]

SESSION_BUDGET = 1200
PROMPT_BUDGET = 600


@dataclass(frozen=True, slots=True)
class Policy:
    enabled: bool = True
    session_budget: int = SESSION_BUDGET
    prompt_budget: int = PROMPT_BUDGET
    exclude_sources: frozenset[str] = frozenset()

    @classmethod
    def of(cls, config: Mapping[str, Any], workspace: str | None) -> Policy:
        """The policy for `workspace`: its own table over `[recall]` over the defaults."""
        section = config.get("recall", {})
        section = section if isinstance(section, Mapping) else {}
        tables = section.get("workspaces", {})
        own = tables.get(workspace, {}) if isinstance(tables, Mapping) and workspace else {}
        own = own if isinstance(own, Mapping) else {}
        where = f"recall.workspaces.{workspace}" if own else "recall"

        def pick(key: str, default: Any) -> tuple[Any, str]:
            if key in own:
                return own[key], f"{where}.{key}"
            return section.get(key, default), f"recall.{key}"

        enabled, name = pick("enabled", True)
        try:
            enabled = check_bool(enabled, name)
            budgets = []
            for key, default in (("session_budget", SESSION_BUDGET), ("prompt_budget", PROMPT_BUDGET)):
                value, name = pick(key, default)
                budgets.append(int(check_number(value, name, whole=True, low=1, high=MAX_BUDGET)))
        except QueryError as exc:     # the one check of numbers and booleans, as a setting's error
            raise ConfigError(str(exc)) from None
        sources, name = pick("exclude_sources", [])
        if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
            raise ConfigError(f"{name}: must be a list of source names, got {sources!r}")
        return cls(enabled, budgets[0], budgets[1], frozenset(s.strip().lower() for s in sources))
