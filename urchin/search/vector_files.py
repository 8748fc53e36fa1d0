"""The files of a vector cache (urchin/search/vectors.py): their format, and the helpers that read and
create them.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

import numpy as np

from urchin.errors import EmbedderError
from urchin.fileio import pread_into

__all__ = ["DTYPE", "FORMAT", "ROW", "copy_rows", "nth_newline_end", "read_rows", "touch_private"]

FORMAT = 1
# float32, not float16: numpy has no fast half-precision matrix product, and converting 1M x 384
# halves costs ~0.8 s a query here, against ~0.11 s for the float32 product itself.
DTYPE = np.dtype("<f4")
# One record per row beside the matrix: the event time (window selection) and a 64-bit hash of
# the id (membership without holding a million Python strings).
ROW = np.dtype([("ts", "<i8"), ("key", "<u8")])
DROP_PIECE = 4 << 20    # bytes of the matrix a drop reads and writes at a time (`copy_rows`)


def nth_newline_end(data: bytes, n: int) -> int:
    pos = 0
    for _ in range(n):
        pos = data.index(b"\n", pos) + 1
    return pos


def touch_private(path: Path) -> None:
    os.close(os.open(path, os.O_WRONLY | os.O_CREAT, 0o600))
    os.chmod(path, 0o600)


def read_rows(fd: int, rows: np.ndarray, dim: int) -> np.ndarray | None:
    """Rows `rows` of the matrix open as `fd`, read with `pread` (`fileio.pread_into`) into a new array,
    one read a run of consecutive rows; None when the file ends before one of them. Not through a map:
    a row read through one makes its page the reader's, a just-written file's whole 2 MB folio (1,024
    rows sampled over a 300k-row matrix: 21 -> 402 MB of RSS); a `pread` copies the bytes it asked for."""
    rows = np.asarray(rows, dtype=np.int64)
    out = np.empty((len(rows), dim), DTYPE)
    row_bytes = dim * DTYPE.itemsize
    flat = out.reshape(-1).view(np.uint8).data
    breaks = np.flatnonzero(np.diff(rows) != 1) + 1
    for start, stop in zip([0, *breaks.tolist()], [*breaks.tolist(), len(rows)], strict=True):
        if start == stop:
            continue
        piece = flat[start * row_bytes:stop * row_bytes]
        if pread_into(fd, piece, int(rows[start]) * row_bytes) < len(piece):
            return None
    return out


def copy_rows(path: Path, keep: np.ndarray, dim: int, out: BinaryIO) -> None:
    """The `keep` rows (ascending) of the matrix at `path` to `out`, read with `pread` DROP_PIECE bytes
    at a time: a drop of forgotten rows never holds the whole matrix, nor maps it (see `read_rows`)."""
    step = max(1, DROP_PIECE // (dim * DTYPE.itemsize))
    with open(path, "rb", buffering=0) as f:
        for start in range(0, len(keep), step):
            piece = read_rows(f.fileno(), keep[start:start + step], dim)
            if piece is None:
                raise EmbedderError(f"vector cache {path}: matrix.f32 ends before row {int(keep[-1])}")
            out.write(piece.data)
