"""`POST /ingest`, the route agents call per event, answered without Starlette's stack: `Intake` (an ASGI
wrapper in front of the app) and `DirectIngest` (from the HTTP parser's callbacks, daemon/uvicorn_protocol.py),
with the error bodies every route of the daemon answers (`error_body`, `crash_body`).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import orjson

from urchin.api_tokens import Grant
from urchin.contract.access import hold
from urchin.daemon.reload import reload_config
from urchin.daemon.security import AUTHORISED, GRANT, Admitted, ASGIApp, Guard, Message, Receive, Refused, Scope, Send
from urchin.errors import QueryError, UrchinError, ValidationError
from urchin.event import Event
from urchin.ingest import IngestResult
from urchin.redact import redact_message
from urchin.requests_first import Serving

if TYPE_CHECKING:
    from urchin.daemon.app import DaemonState

__all__ = ["DirectIngest", "Intake", "Respond", "crash_body", "error_body", "ingest_one", "reader"]

log = logging.getLogger("urchin.daemon.app")


def error_body(exc: UrchinError) -> dict[str, Any]:
    body: dict[str, Any] = {"error": redact_message(exc.message)}  # it may quote the input: never a secret
    if isinstance(exc, ValidationError) and exc.field:
        body["field"] = redact_message(exc.field)
    return body


def crash_body(exc: BaseException) -> dict[str, Any]:
    return {"error": redact_message(f"internal error: {type(exc).__name__}: {exc}")}


def reader(scope: Scope) -> bool:
    """Whether the caller may read every event, and so learn from a write that its id was held or
    forgotten; anyone else (an ingest-only or workspace-limited token) gets `IngestResult.for_writer`."""
    return bool(scope.get(AUTHORISED))


async def ingest_one(state: DaemonState, body: bytes, scope: Scope) -> dict[str, Any]:
    event = _prepared(state, body, scope.get(GRANT))
    return _answer_of((await state.writer.append([event]))[0], reader(scope))


def _prepared(state: DaemonState, body: bytes, grant: Grant | None) -> Event:
    """The one event a `POST /ingest` body holds, validated and redacted (`Memory.prepare`)."""
    try:
        item = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise QueryError("body", f"not valid JSON: {exc}") from None
    if grant is not None and grant.workspaces and isinstance(item, dict):   # a workspace-bound token's own
        item = hold(grant, item, "POST /ingest")
    return state.memory.prepare(item)  # a non-object is rejected here too, naming `event`


def _answer_of(result: IngestResult, reader: bool) -> dict[str, Any]:
    return (result if reader else result.for_writer()).to_dict()


def _failure(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """A failed `POST /ingest` as every route answers it: the error's status, or a 500, logged."""
    if isinstance(exc, UrchinError):
        return exc.status, error_body(exc)
    answer = crash_body(exc)
    log.error("POST /ingest failed: %s", answer["error"])   # redacted: the message may quote the event
    return 500, answer


def _json_headers(payload: bytes) -> tuple[tuple[bytes, bytes], ...]:
    return (b"content-length", str(len(payload)).encode()), (b"content-type", b"application/json")


class Intake:
    """`POST /ingest`, the one route agents call per event, answered without Starlette's stack.

    Behind the Guard (Host, Origin, token, scope, Content-Type and size already checked, the body
    buffered), one event costs a JSON parse, `Memory.prepare` and the group writer's fsync; the
    router, middleware and Request/Response objects around it cost as much again at thousands of
    requests a second. Errors have the shape and status `_error` and `_crash` give every other route.
    (Most `POST /ingest` requests do not even come here: `DirectIngest` answers them from the HTTP
    protocol; this serves the rest, e.g. chunked bodies, `Expect: 100-continue`, pipelined requests.)
    """

    def __init__(self, app: ASGIApp, state: DaemonState) -> None:
        self.app = app
        self.state = state

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Requests first: background loops in this process wait while a request is answered, until
        # its response starts (an event stream's open body does not hold them back).
        mark = Serving()

        async def started(message: Message) -> None:
            if message["type"] == "http.response.start":
                mark.done()
            await send(message)

        try:
            await self._answer(scope, receive, started)
        finally:
            mark.done()

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        reload_config(self.state.memory)   # [redact] and [recall] apply from this request on
        if scope["path"] != "/ingest" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        body = await _body(receive)
        status = 200
        try:
            answer = await ingest_one(self.state, body, scope)
        except Exception as exc:  # noqa: BLE001 - a 500 in the shape of every other error, and logged
            status, answer = _failure(exc)
        payload = orjson.dumps(answer)
        await send({"type": "http.response.start", "status": status, "headers": list(_json_headers(payload))})
        await send({"type": "http.response.body", "body": payload})


# status, headers, body: the HTTP protocol writes the response (daemon/uvicorn_protocol.py)
Respond = Callable[[int, Sequence[tuple[bytes, bytes]], bytes], None]


class DirectIngest:
    """`POST /ingest` answered from the HTTP parser's callbacks (daemon/uvicorn_protocol.py), without the ASGI cycle.

    uvicorn's request cycle, its task and event, the scope and the ASGI messages, the Guard's and
    `Intake`'s wrappers cost about a third of a one-event request's instructions (bench/RESULTS.md,
    round nineteen). Here the protocol hands over the headers and then the whole body, and gets the
    response to write: the Guard's own checks (`Guard.admit` before the body, `Guard.hold` after it:
    one code for both paths), then what `Intake` does (requests first, the config reload, the parse,
    `Memory.prepare`, the group writer's fsync) and the same answers and errors.

    The requests whose bodies completed in one step of the event loop are prepared together just after
    it, with one look at config.toml for all of them: each arrived before that look, so a change saved
    before a request was sent applies to it, as with a look per request (one `stat` and, with no
    config.toml, one raised FileNotFoundError each, at thousands of requests a second).
    """

    def __init__(self, guard: Guard, state: DaemonState) -> None:
        self.guard = guard
        self.state = state
        self.admitted = 0       # requests taken here (tests tell the two paths apart by it)
        self._steps: dict[asyncio.AbstractEventLoop, list[tuple[Admitted, bytes, Respond, Serving]]] = {}

    def admit(self, server: tuple[str, int | None] | None, headers: Mapping[str, str]) -> Refused | Admitted:
        """The Guard's checks before the body (`headers`: lower-case names, the last value of each)."""
        self.admitted += 1
        return self.guard.admit("POST", "/ingest", server, headers)

    def answer(self, admitted: Admitted, body: bytes, respond: Respond, loop: asyncio.AbstractEventLoop) -> None:
        """Answer the request (a refusal now; else just after this loop step, once its event is fsync'd,
        or its error) through `respond`. Called on `loop`."""
        held = self.guard.hold(admitted, "POST", "/ingest", b"", body)
        if isinstance(held, Refused):
            respond(held.status, held.headers, held.body)
            return
        step = self._steps.get(loop)
        if step is None:
            step = self._steps[loop] = []
            loop.call_soon(self._prepare_step, loop)
        step.append((admitted, body, respond, Serving()))

    def _prepare_step(self, loop: asyncio.AbstractEventLoop) -> None:
        """The step's requests, in the order they came: one config reload, then each event to the writer."""
        step = self._steps.pop(loop, [])
        try:
            reload_config(self.state.memory)   # [redact] and [recall] apply from these requests on
        except Exception as exc:  # noqa: BLE001 - every request of the step answered (a 500), none left hanging
            for _, _, respond, mark in step:
                _send(respond, mark, *_failure(exc))
            return
        for admitted, body, respond, mark in step:
            try:
                future = self.state.writer.stage([_prepared(self.state, body, admitted.grant)], loop)
            except Exception as exc:  # noqa: BLE001 - a 500 in the shape of every other error, and logged
                _send(respond, mark, *_failure(exc))
                continue
            future.add_done_callback(functools.partial(_written, respond, mark, admitted.authorised))


def _written(respond: Respond, mark: Serving, reader: bool, future: asyncio.Future[list[IngestResult]]) -> None:
    exc = future.exception()
    if exc is not None:
        _send(respond, mark, *_failure(exc))
    else:
        _send(respond, mark, 200, _answer_of(future.result()[0], reader))


def _send(respond: Respond, mark: Serving, status: int, answer: dict[str, Any]) -> None:
    mark.done()
    payload = orjson.dumps(answer)
    respond(status, _json_headers(payload), payload)


async def _body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(parts)
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(parts)
