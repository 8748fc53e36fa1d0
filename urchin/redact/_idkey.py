"""The key behind redacted event ids: 32 random bytes in `$URCHIN_HOME/redact-id.key` (0600).

An id that holds a secret is stored as `redacted-<HMAC-SHA256(key, id)>`: the same id always maps
to the same stored id (a retried write still dedupes), two ids never collide, and without the key
nobody holding the journal can confirm a guessed secret against it. Created once, never rotated:
a new key would make retries of old events look new.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import re
import threading
from pathlib import Path

from urchin.errors import ConfigError
from urchin.fileio import write_private

__all__ = ["IdKey", "redacted_id", "ID_PREFIX"]

ID_PREFIX = "redacted-"
_KEY_TEXT = re.compile(r"[0-9a-f]{64}")


def redacted_id(key: bytes, event_id: str) -> str:
    """The stored form of an id that holds a secret: deterministic per key, 128 bits."""
    digest = hmac.new(key, event_id.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
    return ID_PREFIX + digest[:32]


class IdKey:
    """Loads (or first creates) the key on first use; construction does no I/O. Thread-safe."""

    def __init__(self, home: Path) -> None:
        self.path = home / "redact-id.key"
        self._key: bytes | None = None
        self._lock = threading.Lock()

    def __call__(self) -> bytes:
        if self._key is None:
            with self._lock:
                if self._key is None:
                    self._key = self._load() or self._create()
        return self._key

    def stored(self) -> bytes | None:
        """The key if one was ever created here, else None; never creates one (a reader's question)."""
        if self._key is None:
            self._key = self._load()
        return self._key

    def _load(self) -> bytes | None:
        try:
            text = self.path.read_text("ascii").strip()
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{self.path}: cannot read the id redaction key: {exc}") from None
        if not _KEY_TEXT.fullmatch(text):
            raise ConfigError(f"{self.path}: the id redaction key must be 64 hex digits; "
                              "restore it (a new key would stop retried writes from deduplicating)")
        return bytes.fromhex(text)

    def _create(self) -> bytes:
        """Write a complete file under a temporary name, then link it in: a concurrent writer
        either wins (and we read its key) or loses; nobody ever reads a half-written key."""
        write_private(self.path, os.urandom(32).hex().encode("ascii") + b"\n", overwrite=False)
        key = self._load()
        if key is None:
            raise ConfigError(f"{self.path}: the id redaction key vanished while it was created")
        return key
