"""Browser sign-in for the viewer: one-time login codes, cookie sessions, CSRF tokens, page headers.

`urchin open` asks the daemon (with the bearer token) for a code and opens `/login?code=...`; the
code lives `CODE_TTL_S` and works once, and is exchanged for a random session id in an HttpOnly,
SameSite=Strict cookie named after the daemon's port (so two daemons on one host never share one).
The token never reaches the browser. A session authorises the API like the token does, but a
state-changing call must also carry the session's CSRF token in `X-Urchin-CSRF` and a same-origin
`Origin`. Everything lives in the daemon's memory: a restart signs every browser out.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

__all__ = ["BrowserSessions", "BrowserSession", "CSRF_HEADER", "SECURITY_HEADERS", "cookie_name",
           "CODE_TTL_S", "SESSION_TTL_S"]

CODE_TTL_S = 60.0
SESSION_TTL_S = 12 * 3600.0
MAX_CODES = 32
MAX_SESSIONS = 64
CSRF_HEADER = "x-urchin-csrf"

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
# On every response, API and page alike: nothing may frame, sniff or inline-script its way in.
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
)


def cookie_name(port: int | None) -> str:
    return f"urchin_session_{port or 0}"


def _key(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()


@dataclass(frozen=True, slots=True)
class BrowserSession:
    csrf: str
    expires: float


class BrowserSessions:
    """Codes and sessions, kept by the hash of their secret (a dict lookup leaks no prefix timing)."""

    def __init__(self) -> None:
        self._codes: OrderedDict[bytes, float] = OrderedDict()
        self._sessions: OrderedDict[bytes, BrowserSession] = OrderedDict()
        self._lock = threading.Lock()

    def new_code(self) -> tuple[str, float]:
        """A fresh one-time code and its lifetime in seconds."""
        code = secrets.token_urlsafe(32)
        with self._lock:
            self._expire(time.monotonic())
            self._codes[_key(code)] = time.monotonic() + CODE_TTL_S
            while len(self._codes) > MAX_CODES:
                self._codes.popitem(last=False)
        return code, CODE_TTL_S

    def exchange(self, code: str) -> tuple[str, BrowserSession] | None:
        """A new session for a live, unused code (which dies now); None for anything else."""
        if not isinstance(code, str) or not 20 <= len(code) <= 100:
            return None
        now = time.monotonic()
        with self._lock:
            self._expire(now)
            if self._codes.pop(_key(code), None) is None:
                return None
            session_id = secrets.token_urlsafe(32)
            session = BrowserSession(secrets.token_urlsafe(32), now + SESSION_TTL_S)
            self._sessions[_key(session_id)] = session
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return session_id, session

    def session(self, session_id: str | None) -> BrowserSession | None:
        if not session_id or len(session_id) > 100:
            return None
        with self._lock:
            self._expire(time.monotonic())
            return self._sessions.get(_key(session_id))

    def end(self, session_id: str | None) -> None:
        if session_id:
            with self._lock:
                self._sessions.pop(_key(session_id), None)

    @staticmethod
    def csrf_ok(session: BrowserSession, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(session.csrf.encode(), (given or "").encode("utf-8", "replace"))

    def _expire(self, now: float) -> None:
        for store in (self._codes, self._sessions):
            dead = [k for k, v in store.items() if (v if isinstance(v, float) else v.expires) <= now]
            for k in dead:
                del store[k]
