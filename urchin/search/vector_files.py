"""The files of a vector cache (urchin/search/vectors.py): their format, and the helpers that read and
create them.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

__all__ = ["DTYPE", "FORMAT", "ROW", "nth_newline_end", "touch_private"]

FORMAT = 1
# float32, not float16: numpy has no fast half-precision matrix product, and converting 1M x 384
# halves costs ~0.8 s a query here, against ~0.11 s for the float32 product itself.
DTYPE = np.dtype("<f4")
# One record per row beside the matrix: the event time (window selection) and a 64-bit hash of
# the id (membership without holding a million Python strings).
ROW = np.dtype([("ts", "<i8"), ("key", "<u8")])


def nth_newline_end(data: bytes, n: int) -> int:
    pos = 0
    for _ in range(n):
        pos = data.index(b"\n", pos) + 1
    return pos


def touch_private(path: Path) -> None:
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    os.chmod(path, 0o600)
