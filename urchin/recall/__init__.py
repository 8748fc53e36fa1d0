"""`recall`: what an agent is told without asking, at session start and at each prompt.

No model: the digest is read from the workspace's journal events, the prompt's items are ranked by
`prompt.rank` and kept over `prompt.THRESHOLD`. Every block is framed as quoted data
(`frame.py`), passes the redactor again on the way out, and is recorded as an audit event
(source `urchin`, kind `recall`: the cited ids and reasons, never the text) when it is given to a
session. Only one workspace is ever read: the one named, or the one the cwd maps to.
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, NotRequired, TypedDict

from urchin.errors import QueryError
from urchin.event import Event
from urchin.recall.digest import DECISION_DAYS, DECISIONS, SCAN_LIMIT, WINDOW_DAYS, WORK, digest_lines
from urchin.recall.frame import Line, pack, tokens_of
from urchin.recall.policy import Policy
from urchin.recall.prompt import prompt_lines
from urchin.recall.reader import Reader
from urchin.search.query import AUDIT, Filters

if TYPE_CHECKING:
    from urchin.jsontypes import JSONObject

__all__ = ["RecallResult", "RecallDict", "recall", "NO_WORKSPACE", "AUDIT_SOURCE", "AUDIT_KIND", "PROMPT_DAYS"]

AUDIT_SOURCE, AUDIT_KIND = AUDIT
PROMPT_DAYS = 365           # how far back a prompt's items may come from
NO_WORKSPACE = ("Urchin: this folder maps to no workspace, so no past records were recalled "
                "(Urchin recalls only the workspace an agent runs in).")
_DAY_MS = 86_400_000
INJECTED_DAYS = 2           # how far back a session's own audit records are read (see `_Injected`)


class RecallDict(TypedDict):
    """`RecallResult.to_dict()`: the block, each record cited in it, and how it was chosen."""

    text: str
    items: list[JSONObject]
    tokens: int
    mode: str
    workspace: str | None
    note: NotRequired[str]


@dataclass(frozen=True)
class RecallResult:
    """The block exactly as the agent receives it, and the items it cites in the order they appear."""

    text: str
    items: list[Line] = field(default_factory=list)
    workspace: str | None = None
    mode: str = "session"
    note: str | None = None

    def to_dict(self) -> RecallDict:
        out: RecallDict = {"text": self.text, "items": [line.to_dict() for line in self.items],
                           "tokens": tokens_of(self.text), "mode": self.mode, "workspace": self.workspace}
        if self.note:
            out["note"] = self.note
        return out


def _workspace(workspace: str | None, cwd: str | None) -> str | None:
    """The one workspace read: named, or mapped from `cwd` as capture maps it; both must agree."""
    if cwd is None:
        return workspace or None
    from urchin.collectors.text import workspace_for

    mapped = workspace_for(cwd)
    if workspace and mapped != workspace:
        raise QueryError("cwd", f"is in workspace {mapped!r}, not {workspace!r}")
    return workspace or mapped


def recall(reader: Reader, *, workspace: str | None = None, cwd: str | None = None, session: str | None = None,
           prompt: str | None = None, budget: int | None = None, now: datetime | None = None) -> RecallResult:
    """The block for one workspace; the values are checked at the edge (`urchin/params/recall.py`), or are the
    hook's own (a hook's ask never has a blank prompt)."""
    mode = "session" if prompt is None else "prompt"
    workspace = _workspace(workspace, cwd)
    if workspace is None:
        text = NO_WORKSPACE if mode == "session" else ""
        return RecallResult(text, [], None, mode, "no workspace")
    policy = Policy.of(reader.config, workspace)
    if not policy.enabled:
        return RecallResult("", [], workspace, mode, "recall is off ([recall] enabled = false)")
    if reader.ephemeral():
        return RecallResult("", [], workspace, mode, "ephemeral mode is on: nothing is recalled")
    now_ms = int((now or datetime.now(UTC)).timestamp() * 1000)
    excluded = policy.exclude_sources
    lines: Iterable[Line]
    if mode == "session":
        latest = reader.recent(Filters(workspace=workspace), now_ms - WINDOW_DAYS * _DAY_MS, SCAN_LIMIT)

        def mine(events: list[Event]) -> list[Event]:
            return [e for e in events
                    if e.source not in excluded and e.source != AUDIT_SOURCE and e.workspace == workspace]

        lines = digest_lines(mine(latest), session, reader.memories(), workspace, now_ms,
                             mine(_newest(reader, workspace, latest, "decision", now_ms - DECISION_DAYS * _DAY_MS,
                                          DECISIONS)),
                             mine(_newest(reader, workspace, latest, "commit", now_ms - WINDOW_DAYS * _DAY_MS, WORK)))
        budget = budget or policy.session_budget
    else:
        assert prompt is not None
        lines = prompt_lines(reader, prompt, workspace, now_ms - PROMPT_DAYS * _DAY_MS, current=session,
                             injected=_injected(reader, workspace, session, now_ms), excluded=excluded)
        budget = budget or policy.prompt_budget
    text, kept = pack(lines, budget, reader.redact)
    if kept and session:
        _record(reader, workspace, session, mode, kept)
    return RecallResult(text, kept, workspace, mode)


def _newest(reader: Reader, workspace: str, latest: list[Event], kind: str, since_ms: int, limit: int) -> list[Event]:
    """The workspace's newest `limit` events of `kind` from `since_ms` on (newest first). `latest` is its
    newest SCAN_LIMIT events of a window reaching back at least as far: when they hold `limit` such
    events, or are the whole window, those are the answer (every event they leave out is older than
    their last), and the journal is not read again."""
    found = [e for e in latest if e.kind == kind and e.ts_ms >= since_ms][:limit]
    if len(found) >= limit or len(latest) < SCAN_LIMIT:
        return found
    return reader.recent(Filters(workspace=workspace, kind=kind), since_ms, limit)


def _injected(reader: Reader, workspace: str, session: str | None, now_ms: int) -> Container[str]:
    """Ids already given to this session (its audit events say which), read only when a hit first asks."""
    return _Injected(reader, workspace, session, now_ms) if session else frozenset()


class _Injected:
    """The session's given ids, looked up on the first `in` (most prompts rank nothing over the
    threshold and never ask). Its audit records are read from the last INJECTED_DAYS only (the
    reader walks the session's own rows back in time, so the read costs what the session holds in
    that window); a session that outlives it may be given again what it was given days ago."""

    def __init__(self, reader: Reader, workspace: str, session: str, now_ms: int) -> None:
        self.args = (reader, workspace, session, now_ms)
        self.ids: set[str] | None = None

    def __contains__(self, item: object) -> bool:
        if self.ids is None:
            reader, workspace, session, now_ms = self.args
            audits = reader.recent(Filters(source=AUDIT_SOURCE, kind=AUDIT_KIND, workspace=workspace, session=session),
                                   now_ms - INJECTED_DAYS * _DAY_MS, 500)
            self.ids = {i for e in audits for i in (e.meta or {}).get("ids", []) if isinstance(i, str)}
        return item in self.ids


def _record(reader: Reader, workspace: str, session: str, mode: str, kept: list[Line]) -> None:
    """The audit event: which records were given to the session, and why (reason, score, what each
    id names, so the viewer can open it); never their text."""
    ids = [i for line in kept for i in (line.ids or (line.id,))]
    reader.record({"source": AUDIT_SOURCE, "kind": AUDIT_KIND, "workspace": workspace, "session": session,
                   "content": f"Urchin recall ({mode}): {len(kept)} records given to the session",
                   "meta": {"mode": mode, "ids": ids, "cited": [line.id for line in kept],
                            "reasons": [line.reason for line in kept], "what": [line.what for line in kept],
                            "scores": [round(line.score, 3) for line in kept]}})
