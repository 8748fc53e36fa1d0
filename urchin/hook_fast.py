"""`urchin hook AGENT` beside a running daemon: one request, the answer printed, in as little Python as it takes.

The hook finds its home (`urchin.home`), the live daemon and the hooks' token with the standard library
alone, and sends the agent's payload as it came, with the command line's fields and an event id set
here, to `POST /hook/<agent>` (urchin/daemon/hook_route.py). The daemon adapts, caps, redacts, stores
and recalls, and answers exactly the bytes to print: the agent's documented JSON, or nothing. Anything
else (no daemon or token, a refusal, an answer not the daemon's) hands the call to the full path
(`urchin.hooks.run_hook`) with the same id, so an event the daemon took before its answer was lost is
still stored once. Nothing here imports pathlib, json, socket, re, typing, dataclasses or orjson:
their imports alone cost a hook more than its request (bench/bench_hook_recall.py).
"""

from __future__ import annotations

import os
import sys
import time

from urchin.daemon_http import DaemonHttpError, daemon_address, is_local, request
from urchin.home import home_dir
from urchin.uuid7 import new_id

TYPE_CHECKING = False    # not `typing`'s (see above)
if TYPE_CHECKING:
    from typing import BinaryIO

__all__ = ["HookCall", "parse", "forward", "FULL", "DIRECT", "ANSWER_HEADER", "MAX_PAYLOAD_BYTES",
           "HOOK_HTTP_TIMEOUT_S", "HOOK_TOKEN_FILE", "FIELDS"]

HOOK_HTTP_TIMEOUT_S = 5          # then the full path writes the journal itself, within the hook's 10 s
MAX_PAYLOAD_BYTES = 8 * 1024 * 1024
HOOK_TOKEN_FILE = "hooks.token"  # urchin.api_tokens makes it (`urchin install-hooks`)
ANSWER_HEADER = b"x-urchin-hook"  # on the daemon's 200: the body is the hook's whole stdout
FULL = "full"                    # run the full path (it finds the daemon again, or writes the journal)
DIRECT = "direct"                # run it without the daemon: it did not answer (do not wait on it twice)

# `urchin hook AGENT --event E --shell S ...`: option -> field (the same as the click command's)
_OPTIONS = {"--event": "event", "--shell": "shell", "--exit-code": "exit_code", "--cwd": "cwd",
            "--started": "started", "--duration-ms": "duration_ms", "--session": "session", "--home": "home"}
FIELDS = ("shell", "exit_code", "cwd", "started", "duration_ms", "session")   # merged under the payload's own
_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPES = {**{i: f"\\u{i:04x}" for i in range(32)}, ord('"'): '\\"', ord("\\"): "\\\\"}


class HookCall:
    """One hook call as the command line and stdin gave it, and the id its event will carry."""

    __slots__ = ("agent", "raw", "home", "event", "fields", "event_id", "started", "note")

    def __init__(self, agent: str, raw: bytes, home: str | None, event: str | None,
                 fields: dict[str, str]) -> None:
        self.agent, self.raw, self.home, self.event, self.fields = agent, raw, home, event, fields
        self.event_id = new_id()
        self.started = time.monotonic()   # the no-daemon deadline counts from here (the interpreter's own
        # start-up, 20-80 ms, cannot be read reliably: /proc/self/stat's start time is off in sandboxes)
        self.note = ""                    # why the daemon was not used, for hooks.log


def parse(argv: list[str], stdin: BinaryIO | None = None) -> HookCall:
    """`AGENT [--event E] [--shell S --exit-code N --cwd D --started T --duration-ms M --session P]
    [--home H]` and the payload on stdin, without click (see urchin/__main__.py)."""
    values: dict[str, str] = {}
    agent = ""
    args = iter(argv)
    for arg in args:
        name, eq, inline = arg.partition("=")
        if name in _OPTIONS:
            values[_OPTIONS[name]] = inline if eq else next(args, "")
        elif not agent and not arg.startswith("-"):
            agent = arg
    try:
        raw = (stdin if stdin is not None else sys.stdin.buffer).read()
    except (OSError, ValueError, AttributeError):
        raw = b""
    home = values.pop("home", None) or None
    event = values.pop("event", None) or None
    fields = {k: v for k, v in values.items() if v != ""}
    return HookCall(agent or "unknown", raw if isinstance(raw, bytes) else b"", home, event, fields)


def forward(call: HookCall) -> bytes | str:
    """The daemon's answer (the bytes to print, maybe none), or FULL / DIRECT: what to fall back on."""
    try:
        body = _body(call)
        if body is None:
            return FULL
        home = home_dir(call.home)
        given = os.environ.get("URCHIN_HOOK_URL")
        if given and not is_local(given):
            return FULL               # the full path says why (an event is never sent across a network)
        address = given or daemon_address(home)
        if not address:
            return FULL
        token = os.environ.get("URCHIN_HOOK_TOKEN", "").strip() or _read(os.path.join(home, HOOK_TOKEN_FILE))
        if not token:
            return FULL
        status, headers, reply = request(address, token, "POST", _target(call), body, timeout=HOOK_HTTP_TIMEOUT_S)
    except DaemonHttpError as exc:
        call.note = f"the daemon did not answer POST /hook ({exc}); written to the journal directly"
        return DIRECT
    except Exception:  # noqa: BLE001 - the full path runs, and logs what fails there
        return FULL
    return reply if status == 200 and headers.get(ANSWER_HEADER) == b"1" else FULL


def _body(call: HookCall) -> bytes | None:
    """The payload as a JSON object's text: as it came, or a shell's plain command wrapped as
    `{"command": ...}` (what the full path makes of it); None where only the full path can say why not."""
    raw = call.raw
    if not raw.strip() or len(raw) > MAX_PAYLOAD_BYTES:
        return None
    if call.agent == "shell" and not raw.lstrip().startswith(b"{"):
        text = raw.decode("utf-8", "replace").translate(_ESCAPES)
        return b'{"command":"' + text.encode("utf-8") + b'"}'
    return raw


def _target(call: HookCall) -> str:
    pairs = [("id", call.event_id)] + ([("event", call.event)] if call.event else []) + \
            [(k, v) for k, v in call.fields.items() if k in FIELDS]
    return f"/hook/{_quote(call.agent)}?" + "&".join(f"{k}={_quote(v)}" for k, v in pairs)


def _quote(text: str) -> str:
    """Percent-encoding of every byte but the unreserved ones (what `urllib.parse.quote(safe="")` gives)."""
    data = text.encode("utf-8", "surrogateescape")
    return "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in data)


def _read(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""
