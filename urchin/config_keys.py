"""Every key `config.toml` may hold, declared once; what a file holds beyond them; and the guard that
keeps the declaration complete.

`SCHEMA` is the declaration: a table maps each key to `VALUE` or to its own table; `ANY` stands for
keys the user names (a rule's name under `[redact.extra]`, a workspace under `[recall.workspaces]`).
`unknown_keys()` lists what a file holds that `SCHEMA` does not, each with the nearest known key, for
`urchin doctor` and the daemon's start-up log (a typo is warned about, never refused). `Table` is the
read-only view `Settings.config` hands out: reading a key `SCHEMA` does not declare is a programming
error (`UndeclaredSetting`), so a reader added without its declaration fails in the first test that
runs it. A leaf: no imports from the package.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["SCHEMA", "ANY", "VALUE", "Table", "Unknown", "UndeclaredSetting", "unknown_keys", "declared_keys"]

ANY = "*"
VALUE: None = None
_RECALL = {"enabled": VALUE, "session_budget": VALUE, "prompt_budget": VALUE, "exclude_sources": VALUE}

SCHEMA: dict[str, Any] = {
    "urchin": {key: VALUE for key in (
        "journal_path", "durability", "soft_cap_bytes", "embedder_url", "embedder_model", "embedder_api",
        "embedder_timeout_s", "database_url", "intake_token", "host", "port", "no_daemon")},
    "identity": {"account": VALUE, "device": VALUE},
    "collectors": {"claude_dir": VALUE, "copilot_dir": VALUE, "gemini_dir": VALUE, "codex_dir": VALUE,
                   "shell": {"histories": VALUE}, "git": {"roots": VALUE}},
    "redact": {"extra": {ANY: VALUE}, "allow": VALUE},
    "daemon": {"sse_idle_timeout_s": VALUE},
    "recall": {**_RECALL, "no_daemon_deadline_ms": VALUE, "workspaces": {ANY: dict(_RECALL)}},
}


class UndeclaredSetting(LookupError):
    """Code read a config key that `SCHEMA` does not declare: declare it there."""


@dataclass(frozen=True, slots=True)
class Unknown:
    key: str                     # dotted: `urchin.durabilty`, `deamon`
    nearest: str | None          # the known key it most resembles, dotted

    def describe(self) -> str:
        hint = f" (did you mean {self.nearest}?)" if self.nearest else ""
        return f"unknown key {self.key}{hint}, ignored"


def declared_keys(schema: Mapping[str, Any] = SCHEMA, prefix: str = "") -> list[str]:
    """Every declared key, dotted (`recall.workspaces.*.enabled`), tables included."""
    out = []
    for key, child in schema.items():
        out.append(prefix + key)
        if isinstance(child, Mapping):
            out.extend(declared_keys(child, f"{prefix}{key}."))
    return out


def unknown_keys(config: Mapping[str, Any]) -> list[Unknown]:
    """What `config` holds beyond `SCHEMA`, in file order, each with the nearest known key."""
    return list(_walk(config, SCHEMA, ""))


def _walk(table: Mapping[str, Any], schema: Mapping[str, Any], prefix: str) -> Iterator[Unknown]:
    for key, value in table.items():
        child = schema.get(ANY, schema.get(key, _MISSING)) if ANY in schema else schema.get(key, _MISSING)
        if child is _MISSING:
            yield Unknown(prefix + key, _nearest(key, schema, prefix))
        elif isinstance(child, Mapping) and isinstance(value, Mapping):
            yield from _walk(value, child, f"{prefix}{key}.")


_MISSING = object()


def _nearest(key: str, schema: Mapping[str, Any], prefix: str) -> str | None:
    """The closest sibling; at the top level also a key of any section (`durability` -> urchin.durability)."""
    candidates = {prefix + k: k for k in schema if k != ANY}
    if not prefix:
        candidates.update({path: path.rsplit(".", 1)[1] for path in declared_keys() if "." in path and ANY not in path})
    best = difflib.get_close_matches(key.lower(), list(dict.fromkeys(candidates.values())), n=1, cutoff=0.6)
    if not best:
        return None
    return min((path for path, name in candidates.items() if name == best[0]), key=lambda p: (p.count("."), p))


class Table(Mapping[str, Any]):
    """A read-only view of a config table that refuses reads of undeclared keys (`UndeclaredSetting`: a
    setting read in code but not declared) unless the file holds them: iterating shows every key the file
    holds, declared or not, and reading those back never fails (a user's typo is warned about, never fatal)."""

    __slots__ = ("_data", "_schema", "_where")

    def __init__(self, data: Mapping[str, Any], schema: Mapping[str, Any] = SCHEMA, where: str = "") -> None:
        self._data, self._schema, self._where = data, schema, where

    def _child(self, key: str) -> Any:
        if ANY in self._schema:
            return self._schema[ANY]
        if key not in self._schema:
            if key in self._data:   # the user's unknown key, met by iterating the file: warned about, never fatal
                return None
            raise UndeclaredSetting(f"config key {self._where}{key} is read but not declared in "
                                    "urchin/config_keys.py SCHEMA")
        return self._schema[key]

    def _wrap(self, key: str, value: Any) -> Any:
        child = self._child(key)
        if isinstance(child, Mapping) and isinstance(value, Mapping):
            return Table(value, child, f"{self._where}{key}.")
        return value

    def __getitem__(self, key: str) -> Any:
        self._child(key)
        return self._wrap(key, self._data[key])

    def get(self, key: str, default: Any = None) -> Any:
        self._child(key)
        return self._wrap(key, self._data[key]) if key in self._data else default

    def __contains__(self, key: object) -> bool:
        if isinstance(key, str):
            self._child(key)
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __eq__(self, other: object) -> bool:        # by content, unknown keys too (Settings compare)
        return dict(self._data) == dict(other.raw if isinstance(other, Table) else other) \
            if isinstance(other, Mapping) else NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Table({self._data!r})"

    @property
    def raw(self) -> Mapping[str, Any]:
        """The table as the file holds it (for the unknown-key check)."""
        return self._data
