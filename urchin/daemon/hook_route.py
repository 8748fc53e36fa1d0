"""`POST /hook/<agent>`: a whole agent hook call in one request, so the hook process does almost nothing.

The body is the hook's stdin as the agent gave it (urchin/hook_fast.py wraps a shell's plain command as
`{"command": ...}`); the query string carries the command line's fields, the hook event (`event`) and
the event's id (`id`, set by the hook so a retry is stored once). The daemon does what the full path
(`urchin.hooks.run_hook`) does: adapt, cap, redact, store through the group writer, recall for the
events that take context (the recall's audit record is queued to be written beside the answer, not
before it: `_Audits`), and answers 200 with `x-urchin-hook: 1` and exactly the bytes the hook
prints (the agent's JSON and a newline, or nothing). Scope: `ingest`, and `recall` when the call asks
for context; a workspace-scoped token is held to its workspaces for the event and the recall alike,
before anything is stored. Anything refused or failed answers 4xx/5xx JSON and stores nothing the
hook's retry (the full path, with the same id) would store twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from urchin.api_tokens import Grant
from urchin.contract import OPERATIONS
from urchin.daemon.scopes import fill_workspace
from urchin.daemon.security import GRANT
from urchin.errors import QueryError, TooLarge, ValidationError
from urchin.event import Event
from urchin.hook_fast import ANSWER_HEADER, FIELDS, MAX_PAYLOAD_BYTES
from urchin.hook_recall import agent_output
from urchin.hooks import plan, recall_args

if TYPE_CHECKING:
    from urchin.facade import Memory
    from urchin.params.recall import RecallParams

__all__ = ["hook_routes"]

_QUERY = frozenset({"id", "event", *FIELDS})
log = logging.getLogger("urchin.daemon.hook")


class _Refused(ValidationError):
    """What the Guard answers a token for a route it may not use (403, the field named)."""

    status = 403


def hook_routes(state_of: Callable[[Request], Any]) -> list[Route]:
    """`state_of(request)` is the daemon's state (its `memory` and group `writer`)."""
    audits = _Audits()

    async def hook(request: Request) -> Response:
        state = state_of(request)
        agent = request.path_params["agent"]
        query = _query(request.scope.get("query_string", b""))
        body = await request.body()
        if len(body) > MAX_PAYLOAD_BYTES:
            raise TooLarge("body", f"a hook payload is at most {MAX_PAYLOAD_BYTES} bytes, got {len(body)}")
        memory = state.memory
        fields = {k: v for k, v in query.items() if k in FIELDS}
        item, ask = await run_in_threadpool(_plan, agent, body, query.get("event"), fields, memory.settings,
                                            query.get("id"))
        grant: Grant = request.scope[GRANT]
        args = recall_args(ask) if ask is not None else None
        _hold(grant, item, args, agent)      # before anything is stored or read
        if item is not None:
            event = await run_in_threadpool(memory.prepare, item)
            result = (await state.writer.append([event]))[0]
            if result.status == "rejected":
                raise ValidationError("event", str(result.reason))
        out = b""
        if ask is not None and args is not None:
            params = OPERATIONS["recall"].build(args, "wire")
            session = params.session
            await audits.written(session)     # what this session was given before is in the journal
            text, records = await run_in_threadpool(_recall, memory, params)
            if records:
                audits.write(session, state.writer.submit(records))
            reply = agent_output(ask, text)
            out = reply + b"\n" if reply else b""
        return Response(out, media_type="application/json", headers={ANSWER_HEADER.decode(): "1"})

    return [Route("/hook/{agent}", hook, methods=["POST"])]


def _recall(memory: Memory, params: RecallParams) -> tuple[str, list[Event]]:
    """The recall's text, and its audit event prepared for the group writer (not yet written)."""
    items: list[Mapping[str, Any]] = []
    text = memory.recall(params, audit=items.append).text
    records: list[Event] = []
    for item in items:
        try:
            records.append(memory.prepare(item))
        except ValidationError as exc:    # as `ingest` would have rejected it: logged, the answer stands
            log.warning("recall's audit record was not written: %s", exc.message)
    return text, records


class _Audits:
    """Recall's audit records, written after the hook's answer (their fsync is not the agent's wait).

    A record is queued to the group writer before the answer is sent, so a stopping daemon still
    writes it; only a crash within the few milliseconds of its write loses it (the agent was told,
    the record of it is gone), which the capture itself, fsync'd before the answer, never is. The
    next recall of the same session waits for it: what was given is never given twice for want of it.
    """

    MAX = 1024      # sessions whose last record is being written; done ones are dropped beyond that

    def __init__(self) -> None:
        self._pending: dict[str, Future[Any]] = {}

    async def written(self, session: str | None) -> None:
        future = self._pending.get(session) if session else None
        if future is not None:
            with contextlib.suppress(Exception):    # a failed write was logged by the writer
                await asyncio.wrap_future(future)

    def write(self, session: str | None, future: Future[Any]) -> None:
        if not session:
            return
        self._pending[session] = future
        if len(self._pending) > self.MAX:
            for name in [name for name, f in self._pending.items() if f.done()]:
                del self._pending[name]


def _query(raw: bytes) -> dict[str, str]:
    """The hook's fields: each known name at most once, in UTF-8."""
    try:
        pairs = parse_qsl(raw.decode("latin-1"), keep_blank_values=True, strict_parsing=bool(raw),
                          encoding="utf-8", errors="strict")
    except (ValueError, UnicodeDecodeError):
        raise QueryError("query", "must be name=value pairs, percent-encoded UTF-8") from None
    out: dict[str, str] = {}
    for name, value in pairs:
        if name not in _QUERY:
            raise QueryError(name, f"unknown field; a hook call takes {', '.join(sorted(_QUERY))}")
        if name in out:
            raise QueryError(name, "given twice")
        out[name] = value
    return out


def _plan(agent: str, body: bytes, event: str | None, fields: dict[str, str], settings: Any,
          event_id: str | None) -> tuple[dict[str, Any] | None, Any]:
    try:
        return plan(agent, body, event, fields, settings, event_id)
    except ValueError as exc:       # the payload is not a JSON object (ValidationError is an UrchinError)
        raise ValidationError("payload", str(exc)) from None


def _hold(grant: Grant, item: dict[str, Any] | None, args: dict[str, Any] | None, agent: str) -> None:
    """Refuse (403) a call its token may not make: recall without the scope, or another workspace."""
    what = f"POST /hook/{agent}"
    if args is not None and not grant.allows("recall"):
        raise _Refused("authorization", "", message=f"scope: this token's scope is {grant.scope}; {what} asks "
                                                    "for recall, which needs recall")
    for data, part in ((item, "event"), (args, "recall")):
        refusal = fill_workspace(grant, data, f"{what} {part}") if data is not None else None
        if refusal is not None:
            raise _Refused(refusal.field, "", message=refusal.message)
