"""New event ids: UUIDv7 (48 bits of Unix milliseconds, then randomness), so ids sort by creation time.

A leaf of the standard library alone (no `uuid`, no `re`): `urchin.event` re-exports `new_id`, and an
agent hook's fast path (`urchin.hook_fast`) sets its event's id with it before sending.
"""

from __future__ import annotations

import os
import time

__all__ = ["new_id"]


def new_id(now_ms: int | None = None) -> str:
    """A UUIDv7: 48 bits of Unix milliseconds, then randomness, so ids sort by creation time."""
    ms = int(time.time() * 1000) if now_ms is None else now_ms
    rand = int.from_bytes(os.urandom(10), "big")
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | (rand >> 68 & 0xFFF) << 64
    value |= 0b10 << 62 | rand & ((1 << 62) - 1)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
