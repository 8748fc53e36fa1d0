"""`urchin hook <agent>`'s full path: one hook payload -> one event, the agent's context, and never a broken agent.

Beside a running daemon the hook usually never gets here: `urchin.hook_fast` hands the whole call to
the daemon (`POST /hook/<agent>`, which runs `plan` and `recall_args` below) and runs `run_hook` only
when that fails. Whatever happens (empty stdin, malformed JSON, an unwritable home, a full disk, a
held lock, a slow recall), `run_hook` returns 0, prints on stdout only the agent's documented JSON for a context event
(`urchin.hook_recall`) and writes failures to `$URCHIN_HOME/hooks.log` (0600), or to stderr when
even that cannot be written. With a daemon running it hands the event to the daemon over HTTP, and
asks it for `recall`, with the hooks' token (scope `hook`: ingest and recall only;
`$URCHIN_HOME/hooks.token`, made by `urchin install-hooks`); else it writes through `Ingestor` (the
single write path) and recalls in-process within NO_DAEMON_DEADLINE_S, or prints nothing. Either way
it imports only what that needs; see bench/bench_hook_recall.py.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, BinaryIO

from urchin.hook_fast import HOOK_HTTP_TIMEOUT_S, MAX_PAYLOAD_BYTES

if TYPE_CHECKING:
    from urchin.config import Settings
    from urchin.hook_recall import RecallAsk
    from urchin.redact import Redactor

__all__ = ["run_hook", "log_failure", "HOOK_TIMEOUT_S", "prepare_item", "plan", "recall_args", "CONTEXT_ONLY"]

HOOK_TIMEOUT_S = 10
HOOK_RECALL_TIMEOUT_S = 2.0  # the daemon's recall; then in-process, within NO_DAEMON_DEADLINE_S, or nothing
NO_DAEMON_DEADLINE_S = 0.25  # from the hook's entry: recall in-process by then or print nothing
CONTEXT_ONLY = ("codex",)    # agents whose hooks only take context (the Codex collector captures)
_LOG_LIMIT = 1024 * 1024


class _TimedOut(Exception):
    pass


def _on_alarm(signum: int, frame: FrameType | None) -> None:
    raise _TimedOut()


def _log(home: Path | None, agent: str, message: str) -> None:
    from urchin.fileio import append_synced
    from urchin.redact import redact_message
    from urchin.timestamps import format_timestamp

    stamp = format_timestamp(ms=False)
    line = f"{stamp} {agent}: {redact_message(message)}\n".encode("utf-8", "replace")  # a file: no secret
    if home is not None:
        try:
            home.mkdir(parents=True, exist_ok=True, mode=0o700)
            path = home / "hooks.log"
            try:
                if path.stat().st_size > _LOG_LIMIT:
                    os.replace(path, home / "hooks.log.1")
            except FileNotFoundError:
                pass
            append_synced(path, line, sync=False)   # a diagnostic log: not worth an fsync in the agent's wait
            return
        except OSError:
            pass
    try:
        sys.stderr.write(line.decode("utf-8", "replace"))
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _payload(agent: str, raw: bytes, fields: Mapping[str, Any]) -> dict[str, Any]:
    import orjson

    if agent == "shell" and not raw.lstrip().startswith(b"{"):
        # contrib/shell sends the command as plain text and the rest as options.
        return {**fields, "command": raw.decode("utf-8", "replace")}
    try:
        payload = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"payload is not valid JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise ValueError("payload must be a JSON object")
    return {**fields, **payload}


def prepare_item(item: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """Drop unset fields, redact and cap the content as collectors do, so a big tool output is kept."""
    from urchin.collectors.text import cap_content, fit_names

    def redactor() -> Redactor:  # built only for content over the soft cap
        from urchin.redact import Redactor
        from urchin.redact._idkey import IdKey

        return Redactor.from_config(settings.section("redact"), IdKey(settings.home))

    item = {k: v for k, v in item.items() if v is not None}
    item["content"] = str(item.get("content") or "")
    item["meta"] = {k: v for k, v in (item.get("meta") or {}).items() if v is not None}
    item = cap_content(item, settings.soft_cap_bytes, redactor)
    item["meta"] = item["meta"] or None
    return fit_names({k: v for k, v in item.items() if v is not None})


def run_hook(agent: str, raw: bytes, *, home: str | None = None, event: str | None = None,
             fields: Mapping[str, Any] | None = None, out: BinaryIO | None = None, event_id: str | None = None,
             use_daemon: bool = True, started: float | None = None) -> int:
    """Record one hook payload and, for the events that take context, print what `recall` gives in
    the agent's documented JSON on `out` (stdout). Always returns 0; failures go to hooks.log and
    print nothing. `event_id`: the id the event takes unless its adapter derives one (the fast path
    sent it with that id already); `use_daemon` False: the daemon did not answer, do not wait on it
    again; `started`: `time.monotonic()` at the hook's entry, which the no-daemon deadline counts from."""
    started = time.monotonic() if started is None else started
    home_path: Path | None = None
    previous = signal.signal(signal.SIGALRM, _on_alarm)
    # HOOK_TIMEOUT_S from the hook's entry: a fast path that waited on the daemon has used some of it
    signal.setitimer(signal.ITIMER_REAL, max(1.0, HOOK_TIMEOUT_S - (time.monotonic() - started)))
    try:
        from urchin.config import Settings

        settings = Settings.resolve(home)
        home_path = settings.home
        if not raw.strip():
            _log(home_path, agent, "empty payload on stdin; nothing recorded")
            return 0
        if len(raw) > MAX_PAYLOAD_BYTES:
            _log(home_path, agent, f"payload of {len(raw)} bytes is over {MAX_PAYLOAD_BYTES}; nothing recorded")
            return 0
        payload = _payload(agent, raw, fields or {})
        from urchin.hook_recall import agent_output, context_ask

        ask = context_ask(agent, payload)
        capture = agent not in CONTEXT_ONLY
        daemon = _daemon(settings.home, agent) if use_daemon and (capture or ask is not None) else None   # once
        if capture:
            _capture(agent, payload, event, settings, daemon, event_id)
        if ask is not None:
            reply = agent_output(ask, _recall(settings, agent, ask, started, daemon))
            if reply:
                stream = out if out is not None else sys.stdout.buffer
                stream.write(reply + b"\n")
                stream.flush()
    except _TimedOut:
        _log(home_path, agent, f"timed out after {HOOK_TIMEOUT_S}s, or recall over its deadline; nothing printed")
    except Exception as exc:  # noqa: BLE001 - a hook must never fail the agent that runs it
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        _log(home_path or _home_or_none(home), agent, f"{type(exc).__name__}: {message}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    return 0


def log_failure(home: str | None, agent: str, message: str) -> None:
    """A line in hooks.log (redacted), for a failure outside `run_hook` (the fast path's)."""
    _log(_home_or_none(home), agent, message)


def plan(agent: str, raw: bytes, event: str | None, fields: Mapping[str, Any], settings: Settings,
         event_id: str | None = None) -> tuple[dict[str, Any] | None, RecallAsk | None]:
    """One hook call's event (adapted, capped, redacted over the soft cap; None: nothing to keep) and
    what it asks recall for (None: its event takes no context). The daemon's `POST /hook` runs this.
    Raises on a payload that is not a JSON object, or an agent with no adapter."""
    from urchin.hook_recall import context_ask

    payload = _payload(agent, raw, fields)
    item = _event_item(agent, payload, event, settings, event_id) if agent not in CONTEXT_ONLY else None
    return item, context_ask(agent, payload)


def _event_item(agent: str, payload: dict[str, Any], event: str | None, settings: Settings,
                event_id: str | None) -> dict[str, Any] | None:
    from urchin.collectors import adapt_hook

    item = adapt_hook(agent, payload, event, key=_id_key(settings.home))
    if item is None:
        return None
    item = prepare_item(item, settings)
    if event_id:
        item.setdefault("id", event_id)
    return item


def recall_args(ask: RecallAsk) -> dict[str, Any]:
    """`recall`'s parameters for a hook's ask: the workspace its cwd maps to (as capture maps it)."""
    from urchin.collectors.text import workspace_for

    return {k: v for k, v in (("workspace", workspace_for(ask.cwd)), ("session", ask.session),
                              ("prompt", ask.prompt)) if v is not None}


def _capture(agent: str, payload: dict[str, Any], event: str | None, settings: Settings,
             daemon: tuple[str, str] | None, event_id: str | None) -> None:
    """The payload as one event, to the daemon or the journal; a failure is logged, recall still runs."""
    try:
        item = _event_item(agent, payload, event, settings, event_id)
        if item is None:
            return
        if daemon is not None and _send(settings.home, agent, item, daemon):
            return
        from urchin.ingest import Ingestor

        result = Ingestor(settings).ingest([item])[0]
        if result.status == "rejected":
            _log(settings.home, agent, f"event rejected: {result.reason}")
    except _TimedOut:
        raise
    except Exception as exc:  # noqa: BLE001 - logged; the agent is never failed
        message = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        _log(settings.home, agent, f"{type(exc).__name__}: {message}")


def _recall(settings: Settings, agent: str, ask: Any, started: float, daemon: tuple[str, str] | None) -> str:
    """The block for this hook event: from the daemon (hook token), else in-process within
    NO_DAEMON_DEADLINE_S of the hook's start, else nothing."""
    body = recall_args(ask)
    answer = None if daemon is None else _recall_from_daemon(settings.home, agent, body, daemon)
    if answer is not None:
        return answer
    left = _deadline_s(settings) - (time.monotonic() - started)
    if left <= 0:
        return ""                        # no daemon and no time left: nothing, by design (not a failure)
    signal.setitimer(signal.ITIMER_REAL, left)
    try:
        from dataclasses import replace

        from urchin.recall import recall
        from urchin.recall.reader import local

        reader = local(settings, save=False)
        write = reader.record

        def record(item: Mapping[str, Any]) -> None:   # the audit append is never cut by the deadline
            signal.setitimer(signal.ITIMER_REAL, 0)
            write(item)

        return recall(replace(reader, record=record), workspace=body.get("workspace"), session=body.get("session"),
                      prompt=body.get("prompt")).text
    except _TimedOut:
        return ""                        # over the deadline: nothing, by design
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def _deadline_s(settings: Settings) -> float:
    """`[recall] no_daemon_deadline_ms` (1 to 10000), else NO_DAEMON_DEADLINE_S."""
    value = settings.section("recall").get("no_daemon_deadline_ms")
    if isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 10_000:
        return value / 1000
    return NO_DAEMON_DEADLINE_S


def _recall_from_daemon(home: Path, agent: str, body: dict[str, Any], daemon: tuple[str, str]) -> str | None:
    """The daemon's block (None: it did not answer as the daemon does)."""
    import orjson

    from urchin.daemon_http import DaemonHttpError, request

    address, token = daemon
    try:
        status, _, reply = request(address, token, "POST", "/recall", orjson.dumps(body),
                                   timeout=HOOK_RECALL_TIMEOUT_S)
    except DaemonHttpError as exc:
        _log(home, agent, f"the daemon at {address} did not answer recall ({exc}); recalling in-process")
        return None
    try:
        answer = orjson.loads(reply) if 200 <= status < 300 else None
    except orjson.JSONDecodeError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("text"), str):
        _log(home, agent, f"{address} answered recall with HTTP {status}; recalling in-process")
        return None
    return str(answer["text"])


def _daemon(home: Path, agent: str) -> tuple[str, str] | None:
    """The daemon to talk to and the hooks' token (see `_send`), or None."""
    from urchin.daemon_http import daemon_address, is_local
    from urchin.hook_fast import HOOK_TOKEN_FILE

    address = os.environ.get("URCHIN_HOOK_URL") or daemon_address(str(home))
    if address and not is_local(address):
        _log(home, agent, "URCHIN_HOOK_URL must be unix:/path or http://127.0.0.1:PORT (the daemon listens on "
                          "loopback only; an event is never sent across a network); written to the journal")
        return None
    token = os.environ.get("URCHIN_HOOK_TOKEN", "").strip()
    if not token:
        try:
            token = (home / HOOK_TOKEN_FILE).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return None
    if not address or not token:
        return None
    return address, token


def _send(home: Path, agent: str, item: dict[str, Any], daemon: tuple[str, str]) -> bool:
    """Give the event to the daemon with the hooks' ingest-only token; False: write it here instead.

    The daemon is `URCHIN_HOOK_URL` (a hook in a container or sandbox that cannot write the journal)
    or the live daemon of this home; the token is `URCHIN_HOOK_TOKEN` or `$URCHIN_HOME/hooks.token`,
    which `urchin install-hooks` creates. A hook thus never needs the admin token. No daemon, no
    token, an unreachable one or any answer but 2xx: the caller writes the journal itself; the
    event's id is set first, so an event the daemon took whose answer was lost is stored once.
    """
    address, token = daemon
    import orjson

    from urchin.daemon_http import DaemonHttpError, request
    from urchin.event import new_id

    item.setdefault("id", new_id())
    try:
        status, _, body = request(address, token, "POST", "/ingest", orjson.dumps(item), timeout=HOOK_HTTP_TIMEOUT_S)
    except DaemonHttpError as exc:
        _log(home, agent, f"the daemon at {address} did not answer ({exc}); written to the journal directly")
        return False
    if 200 <= status < 300:
        try:
            answer = orjson.loads(body)
        except orjson.JSONDecodeError:
            answer = None
        outcome = answer.get("status") if isinstance(answer, dict) else None
        if outcome not in ("appended", "duplicate", "suppressed", "rejected"):
            _log(home, agent, f"{address} answered {status}, not as the daemon does; written to the journal directly")
            return False
        if outcome == "rejected":
            _log(home, agent, f"event rejected: {answer.get('reason')}")
        return True
    if status in (401, 403):
        _log(home, agent, f"the daemon refused the hooks' token (HTTP {status}; run `urchin install-hooks` "
                          "again); written to the journal directly")
    return False


def _id_key(home: Path) -> bytes:
    """The install key that derived ids are keyed by; in a home that cannot hold it (a read-only
    sandbox) a one-off key: the event's id is then unique and confirms nothing, it only no longer
    meets the same prompt read back from the transcript."""
    from urchin.errors import ConfigError
    from urchin.redact._idkey import IdKey

    try:
        return IdKey(home)()
    except (ConfigError, OSError):
        return os.urandom(32)


def _home_or_none(home: str | None) -> Path | None:
    """The home to log in when the settings themselves failed (a broken config.toml, say)."""
    try:
        from urchin.config import resolve_home

        return resolve_home(home)
    except Exception:  # noqa: BLE001
        return None
