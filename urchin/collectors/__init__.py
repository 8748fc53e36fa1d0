"""Capture: collectors that backfill from files agents keep, and adapters for their live hooks.

`COLLECTORS` names every collector; `collector(name, settings)` imports only the one asked for,
so the hook path stays light. `run(names, settings, sink)` and `status(settings)` are what
`Memory.collect()` and `Memory.collectors_status()` call; `adapt_hook()` serves `urchin hook`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

from urchin.errors import ValidationError

if TYPE_CHECKING:
    from urchin.collectors.base import Collector, CollectReport, Item, Sink
    from urchin.config import Settings

__all__ = ["COLLECTORS", "HOOK_AGENTS", "CollectorStatus", "collector", "run", "status", "adapt_hook"]


class CollectorStatus(TypedDict):
    """`urchin collect --list`: one collector's folders, whether any exists, and its last run."""

    name: str
    folders: list[str]
    found: bool
    events: int
    lastRun: str | None
    lastError: str | None

COLLECTORS: dict[str, tuple[str, str]] = {
    "claude": ("urchin.collectors.claude", "ClaudeCollector"),
    "copilot": ("urchin.collectors.copilot", "CopilotCollector"),
    "gemini": ("urchin.collectors.gemini", "GeminiCollector"),
    "codex": ("urchin.collectors.codex", "CodexCollector"),
    "shell": ("urchin.collectors.shell", "ShellCollector"),
    "git": ("urchin.collectors.git", "GitCollector"),
}
HOOK_AGENTS = ("claude", "gemini", "copilot", "shell")


def collector(name: str, settings: Settings) -> Collector:
    if name not in COLLECTORS:
        raise ValidationError("collector", f"must be one of {', '.join(COLLECTORS)} or all, got {name!r}")
    module, cls = COLLECTORS[name]
    return getattr(importlib.import_module(module), cls)(settings)


def names(which: str | Sequence[str]) -> list[str]:
    if isinstance(which, str):
        return list(COLLECTORS) if which == "all" else [which]
    return list(which)


def run(which: str | Sequence[str], settings: Settings, sink: Sink) -> list[CollectReport]:
    """Run the named collectors (or `all`) once; each reports counts and errors of its own."""
    chosen = [collector(name, settings) for name in names(which)]
    return [c.run(sink) for c in chosen if which != "all" or c.found()]


def status(settings: Settings) -> list[CollectorStatus]:
    """Each collector: its folders, whether found, events collected, last run and last error."""
    from urchin.collectors.checkpoints import Checkpoints

    out: list[CollectorStatus] = []
    for name in COLLECTORS:
        c = collector(name, settings)
        stats = Checkpoints(settings, name).load().stats
        out.append({"name": name, "folders": [str(p) for p in c.folders()], "found": c.found(),
                    "events": int(stats.get("events") or 0), "lastRun": stats.get("lastRun"),
                    "lastError": stats.get("lastError")})
    return out


def adapt_hook(agent: str, payload: Mapping[str, Any], event: str | None = None, *,
               key: bytes) -> Item | None:
    """One agent hook payload -> one event dict (None when the event is not worth keeping); ids
    derived from its content are keyed by `key` (the install key: `base.keyed_ids`), as a
    collector reading the same transcript keys them, so the two still meet."""
    if agent not in HOOK_AGENTS:
        raise ValidationError("agent", f"must be one of {', '.join(HOOK_AGENTS)}, got {agent!r}")
    from urchin.collectors.ids import keyed_ids

    module = importlib.import_module(f"urchin.collectors.{agent}")
    with keyed_ids(key):
        if agent == "copilot":
            return module.from_hook(payload, event)
        return module.from_hook(payload)
