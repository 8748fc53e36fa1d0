"""Scoped API tokens of the daemon: `ingest` (write only), `read` (query only), `hook` (an agent hook's:
write and `recall`, nothing else), `admin` (everything).

A token may be limited to workspaces and may expire. Only a hash is kept: `$URCHIN_HOME/tokens.json`
(0600, replaced atomically under a lock) holds id, sha256 of the token, scope, workspaces, times. A
token reads `urchin_<id>_<secret>`; the id names it in `urchin token list|revoke`. The single token of
`URCHIN_INTAKE_TOKEN` / `$URCHIN_HOME/token` keeps working as an admin token (daemon/security.py).
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import os
import re
import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

import orjson

from urchin.errors import ConfigError, NotFoundError, ValidationError
from urchin.fileio import ensure_private_dir, write_private
from urchin.hook_fast import HOOK_TOKEN_FILE

__all__ = ["Grant", "TokenStore", "TokenFields", "TokenRecord", "NewToken", "SCOPES", "ADMIN_GRANT", "parse_expires",
           "ensure_hook_token", "HOOK_TOKEN_FILE"]

SCOPES = ("ingest", "read", "hook", "admin")
HOOK_TOKEN_NAME = "hooks"
_TOKEN = re.compile(r"^urchin_([0-9a-f]{12})_[A-Za-z0-9_-]{43}$")
_EXPIRES = re.compile(r"^(\d{1,6})([hdw])$")
_UNIT_S = {"h": 3600, "d": 86400, "w": 7 * 86400}
_WORKSPACE = re.compile(r"^[^\x00-\x1f]{1,256}$")


@dataclass(frozen=True, slots=True)
class Grant:
    """What one request's token allows: its scope, and the workspaces it is limited to (empty: all)."""

    scope: str
    workspaces: tuple[str, ...] = ()
    token_id: str = "default"

    def allows(self, need: str) -> bool:
        """`need` is ingest, read, recall or admin; admin holds all; recall is read's and hook's; hook
        also ingests; each other scope holds only itself."""
        if self.scope == "admin" or self.scope == need:
            return True
        return (need == "recall" and self.scope in ("read", "hook")) or (need == "ingest" and self.scope == "hook")


ADMIN_GRANT = Grant("admin")


def parse_expires(value: str | None) -> int | None:
    """`30d`, `12h`, `2w` -> seconds; None or `never` -> no expiry."""
    if value is None or value == "never":
        return None
    match = _EXPIRES.match(value.strip()) if isinstance(value, str) else None
    if not match or int(match.group(1)) == 0:
        raise ValidationError("expires", f"must be a duration like 12h, 30d or 2w (or never), got {value!r}")
    return int(match.group(1)) * _UNIT_S[match.group(2)]


def _hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class TokenFields(TypedDict):
    """A token's record as shown (never its hash)."""

    id: str
    scope: str
    workspaces: list[str]
    created: float
    expires: float | None         # epoch seconds; None: never
    name: str | None


class TokenRecord(TypedDict):
    """`urchin token list`: a record as the file holds it (a hand-edited one may lack a field: None), and
    whether it has expired."""

    id: str
    scope: str | None
    workspaces: list[str] | None
    created: float | None
    expires: float | None
    name: str | None
    expired: bool


class NewToken(TokenFields):
    """`urchin token create`: the token itself (shown once, only its hash is kept) and its record."""

    token: str


class TokenStore:
    """The token file of one home; reloads it when it changes (revocation takes effect at once)."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.path = home / "tokens.json"
        self._cache: tuple[Any, dict[str, dict[str, Any]]] | None = None

    # ---- reading ------------------------------------------------------------------------------
    def _records(self) -> dict[str, dict[str, Any]]:
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return {}
        key = (stat.st_mtime_ns, stat.st_size, stat.st_ino)
        if self._cache is None or self._cache[0] != key:
            try:
                data = orjson.loads(self.path.read_bytes())
            except (OSError, orjson.JSONDecodeError) as exc:
                raise ConfigError(f"{self.path}: cannot read the tokens: {exc}") from None
            records = {r["id"]: r for r in data.get("tokens", []) if isinstance(r, dict) and "id" in r}
            self._cache = (key, records)
        return self._cache[1]

    def verify(self, token: str, now: float | None = None) -> Grant | None:
        """The grant of `token`, or None (unknown, revoked, expired, malformed). Constant-time compare."""
        match = _TOKEN.match(token)
        if not match:
            return None
        record = self._records().get(match.group(1))
        if record is None or not hmac.compare_digest(str(record.get("sha256", "")), _hash(token)):
            return None
        expires = record.get("expires")
        if expires is not None and (now if now is not None else time.time()) >= float(expires):
            return None
        return Grant(str(record["scope"]), tuple(record.get("workspaces") or ()), str(record["id"]))

    def entries(self, now: float | None = None) -> list[TokenRecord]:
        now = now if now is not None else time.time()
        out: list[TokenRecord] = []
        for record in sorted(self._records().values(), key=lambda r: (r.get("created", 0), r["id"])):
            out.append({"id": record["id"], "scope": record.get("scope"), "workspaces": record.get("workspaces"),
                        "created": record.get("created"), "expires": record.get("expires"), "name": record.get("name"),
                        "expired": record.get("expires") is not None and now >= float(record["expires"])})
        return out

    # ---- writing ------------------------------------------------------------------------------
    def create(self, scope: str, workspaces: Sequence[str] = (), expires: str | None = None,
               name: str | None = None, now: float | None = None) -> tuple[str, TokenFields]:
        """A new token (returned once, never stored) and its record."""
        if scope not in SCOPES:
            raise ValidationError("scope", f"must be one of {', '.join(SCOPES)}, got {scope!r}")
        for i, ws in enumerate(workspaces):
            if not isinstance(ws, str) or not _WORKSPACE.match(ws):
                raise ValidationError(f"workspace[{i}]", "must be 1-256 characters without control characters")
        ttl = parse_expires(expires)
        now = now if now is not None else time.time()
        token_id = secrets.token_hex(6)
        token = f"urchin_{token_id}_{secrets.token_urlsafe(32)}"
        record: dict[str, Any] = {"id": token_id, "sha256": _hash(token), "scope": scope,
                                  "workspaces": sorted(set(workspaces)), "created": round(now, 3),
                                  "expires": None if ttl is None else round(now + ttl, 3), "name": name}
        with self._locked() as records:
            records.append(record)
        return token, {"id": token_id, "scope": scope, "workspaces": record["workspaces"], "created": record["created"],
                       "expires": record["expires"], "name": name}

    def revoke(self, token_id: str) -> None:
        with self._locked() as records:
            kept = [r for r in records if r.get("id") != token_id]
            if len(kept) == len(records):
                raise NotFoundError(f"no token with id {token_id!r} (see `urchin token list`)")
            records[:] = kept

    @contextmanager
    def _locked(self) -> Iterator[list[dict[str, Any]]]:
        """The records, to change in place; written back 0600 (temp file, fsync, rename) under a lock."""
        ensure_private_dir(self.home)
        fd = os.open(self.home / "tokens.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            self._cache = None
            records = list(self._records().values())
            yield records
            write_private(self.path, orjson.dumps({"tokens": records}, option=orjson.OPT_INDENT_2))
            self._cache = None
        finally:
            os.close(fd)


def ensure_hook_token(home: Path) -> tuple[Path, bool]:
    """The token agent hooks send their events and ask for recall with: `$home/hooks.token` (0600), of
    scope `hook` (ingest and recall only; recall reads only the workspace the hook's cwd maps to).

    Kept while it still verifies as a hook token for every workspace; else (missing, revoked, expired,
    or an ingest-only token of an earlier install) a new one is created (`name: hooks` in `urchin token
    list`) and earlier hook tokens' records are revoked. Returns the file and whether a token was created.
    """
    path = home / HOOK_TOKEN_FILE
    store = TokenStore(home)
    ensure_private_dir(home)
    fd = os.open(home / "hooks.token.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)     # two installs at once: the second keeps the first's token
        try:
            current = path.read_text(encoding="utf-8").strip()
        except (FileNotFoundError, UnicodeDecodeError):
            current = ""
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the hooks' token ({exc.strerror}); remove it and "
                              "run install-hooks again") from None
        grant = store.verify(current) if current else None
        if grant is not None and grant.scope == "hook" and not grant.workspaces:
            return path, False
        token, record = store.create("hook", name=HOOK_TOKEN_NAME)
        try:
            write_private(path, (token + "\n").encode("ascii"))
        except OSError as exc:
            store.revoke(record["id"])
            raise ConfigError(f"{path}: cannot write the hooks' token ({exc.strerror})") from None
        for entry in store.entries():
            if entry.get("name") == HOOK_TOKEN_NAME and entry["id"] != record["id"]:
                store.revoke(entry["id"])
        return path, True
    finally:
        os.close(fd)
