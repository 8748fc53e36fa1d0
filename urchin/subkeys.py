"""Keys for each use of the install key (`$URCHIN_HOME/redact-id.key`), none derivable from another.

The install key names redacted ids directly (`redacted-<HMAC(key, id)>`), and any caller who may
write can have an id of their choosing named so (a rejected or duplicate id is answered with its
stored form): HMAC under the bare key is a public oracle. Every other use (line proofs, derived ids)
therefore MACs under `subkey(key, purpose)`: HMAC of 0xFF + purpose, a message that no id can be,
since ids are hashed as UTF-8 and no UTF-8 text holds the byte 0xFF. A leaf: standard library only.
"""

from __future__ import annotations

import hashlib
import hmac

__all__ = ["subkey", "Hmac", "LINE_PROOF", "DERIVED_ID"]

LINE_PROOF = b"line-proof-v2"     # `urchin.proof`: a journal line came out of the write path
DERIVED_ID = b"derived-id-v2"     # `collectors.ids`: ids made from content (prompts, commands)
_NOT_UTF8 = b"\xff"                # the byte no id's UTF-8 can hold: subkeys are outside the oracle


def subkey(key: bytes, purpose: bytes) -> bytes:
    """The key for `purpose`, from the install key: 32 bytes, one per purpose, stable."""
    return hmac.digest(key, _NOT_UTF8 + purpose, "sha256")


class Hmac:
    """HMAC-SHA256 under one key, byte for byte `hmac.digest(key, message, "sha256")`, for a key
    used on every line: the key's inner and outer SHA-256 states are made once and copied per
    message. `hmac.digest` pads the key and looks SHA-256 up in OpenSSL 3 on every call (~7 us);
    two copies and two updates cost ~2 us. Thread-safe (copying a hash object takes its lock)."""

    __slots__ = ("_inner", "_outer")

    def __init__(self, key: bytes) -> None:
        block = hashlib.sha256().block_size
        if len(key) > block:
            key = hashlib.sha256(key).digest()   # RFC 2104: a long key is hashed first
        key = key.ljust(block, b"\0")
        self._inner = hashlib.sha256(bytes(b ^ 0x36 for b in key))
        self._outer = hashlib.sha256(bytes(b ^ 0x5C for b in key))

    def digest(self, message: bytes) -> bytes:
        inner = self._inner.copy()
        inner.update(message)
        outer = self._outer.copy()
        outer.update(inner.digest())
        return outer.digest()
