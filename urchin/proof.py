"""Proof that a journal line came out of the write path, so it need not be redacted again on read.

The write path (`Ingestor`) ends each line it writes with `"proof":"<mac>"`: 96 bits of
HMAC-SHA256, under the install key's line-proof subkey (`subkeys.py`: no oracle that names ids can
make it), of the line without that field. Nobody without the key can make one, and a proof copied
from another line fails, since it is bound to the rest of the line's bytes. A line without a valid
proof (a reference Urchin's journal, a line appended by hand, an event written before proofs) is
redacted before it is served or indexed (`LineProof.served`). Checking is a suffix compare and one
HMAC of the line, done only for lines a reader is about to serve or index: literal search still
scans raw bytes.
"""

from __future__ import annotations

import binascii
import hmac
import threading
from typing import TYPE_CHECKING

from urchin.config import Settings
from urchin.event import PROOF_FIELD, Event
from urchin.subkeys import LINE_PROOF, Hmac, subkey

if TYPE_CHECKING:
    from urchin.redact import Redactor
    from urchin.redact._idkey import IdKey

__all__ = ["LineProof"]

_HEAD = b',"' + PROOF_FIELD.encode() + b'":"'
_MAC_CHARS = 16                          # 12 bytes of MAC, base64url
_SUFFIX = len(_HEAD) + _MAC_CHARS + 2    # ,"proof":"<16>"}
_URLSAFE = bytes.maketrans(b"+/", b"-_")   # base64 -> base64url (12 bytes make 16 characters, no padding)
# A process that signs lines and then reads them back (the daemon: its writer signs, its follower
# reads each new line to feed its views) keeps the last lines it signed, up to this many bytes, and
# takes a line equal to one of them as proven without a second HMAC (the MAC of equal bytes under
# the same key is equal): a dict lookup instead of ~3-5 us an event. Only once this process has read
# a line (a worker that only signs keeps nothing).
KEEP_SIGNED_BYTES = 4 << 20


class LineProof:
    """Signs lines the write path makes; tells whether a line read back carries a valid proof.
    Construction does no I/O; the key is read (writers: made) on first use."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._key: IdKey | None = None
        self._read: bytes | None = None   # the key as `_stored_key` read it (b"": unreadable)
        self._subkey: tuple[bytes, Hmac] | None = None   # (install key, HMAC under its line-proof subkey)
        self._signing: bytes | None = None   # the install key, once a write needed it
        self._redactor: Redactor | None = None
        self._lock = threading.Lock()
        self._reading = False                  # `proven` was called: signed lines are kept from then on
        self._signed: dict[bytes, None] = {}   # lines signed under `_signing`, oldest first
        self._signed_bytes = 0

    @property
    def _ids(self) -> IdKey:
        if self._key is None:
            # imported here: importing `urchin.redact` compiles its rules, which a reader of proven lines never needs
            from urchin.redact._idkey import IdKey

            self._key = IdKey(self._settings.home)
        return self._key

    def sign(self, body: bytes) -> bytes:
        """`body` (one serialised event, `{...}`) with its proof as the last field."""
        key = self._signing or self._signing_key()
        made = self._subkey
        if made is None or made[0] != key:
            line = body[:-1] + _HEAD + self._mac(key, body) + b'"}'
        else:
            # `_mac` inlined for the install key (every line written goes through here)
            mac = binascii.b2a_base64(made[1].digest(body)[:_MAC_CHARS * 3 // 4], newline=False).translate(_URLSAFE)
            line = b"".join((body[:-1], _HEAD, mac, b'"}'))
        if self._reading:
            self._keep(line)
        return line

    def _keep(self, line: bytes) -> None:
        with self._lock:
            signed = self._signed
            if line in signed or len(line) > KEEP_SIGNED_BYTES // 4:
                return
            signed[line] = None
            self._signed_bytes += len(line)
            while self._signed_bytes > KEEP_SIGNED_BYTES:
                oldest = next(iter(signed))
                del signed[oldest]
                self._signed_bytes -= len(oldest)

    def _signing_key(self) -> bytes:
        self._signing = self._ids()
        return self._signing

    def proven(self, line: bytes) -> bool:
        self._reading = True
        if len(line) <= _SUFFIX or line[-2:] != b'"}' or line[-_SUFFIX:-_MAC_CHARS - 2] != _HEAD:
            return False
        key = self._stored_key()
        if key is None:
            return False
        if line in self._signed and key == self._signing:   # this process signed these bytes under this key
            return True
        body = line[:-_SUFFIX] + b"}"
        return hmac.compare_digest(self._mac(key, body), line[-_MAC_CHARS - 2:-2])

    def _stored_key(self) -> bytes | None:
        """The install key if there is one; read without `IdKey`, whose import compiles every
        redaction rule (~15 ms): a reader whose lines are all proven never needs them."""
        if self._key is not None:
            return self._key.stored()
        if self._read is None:
            try:
                text = (self._settings.home / "redact-id.key").read_text("ascii").strip()
                self._read = bytes.fromhex(text) if len(text) == 64 else b""
            except (OSError, ValueError):
                return None            # not there yet: asked again next time (a writer may make it)
        return self._read or None

    def served(self, line: bytes, event: Event) -> Event:
        """`event` (read from `line`) as it may be served or indexed: itself when the line is proven,
        else through the redactor (a no-op on text the write path already redacted)."""
        if self.proven(line):
            return event
        return self.redactor().redact_event(event)

    def use(self, settings: Settings) -> None:
        """Redact unproven lines with the `[redact]` rules of `settings` from now on (a config reload)."""
        with self._lock:
            self._settings, self._redactor = settings, None

    def redactor(self) -> Redactor:
        if self._redactor is None:
            from urchin.redact import Redactor

            with self._lock:
                if self._redactor is None:
                    self._redactor = Redactor.from_config(self._settings.section("redact"), self._ids)
        return self._redactor

    def _mac(self, key: bytes, body: bytes) -> bytes:
        made = self._subkey
        if made is None or made[0] != key:   # one key per install: made once (bytes compare is by identity first)
            made = self._subkey = (key, Hmac(subkey(key, LINE_PROOF)))
        return binascii.b2a_base64(made[1].digest(body)[:_MAC_CHARS * 3 // 4], newline=False).translate(_URLSAFE)
