"""Storage of the token-cosine index: growable columns, frozen CSR posting segments, label codes.

Segments are immutable once built (so they can be memory-mapped from disk and shared by saves).
"""

from __future__ import annotations

import functools
import os
from array import array
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Self

import numpy as np

__all__ = ["Blob", "CodeColumn", "Codes", "Column", "Mapping", "RowOffsets", "Segment", "SplitColumn", "Triples",
           "code_type", "distinct", "map_with_room", "release_clean", "release_pages", "span", "walk"]

_MERGE_CHUNK = 1 << 18  # postings per step when building a segment (bounds the temporaries: ~15 MB)
Triples = tuple[np.ndarray, np.ndarray, np.ndarray]  # (terms, rows, tf), grouped by row


_SLACK = 1 << 16   # rows a large column grows by at least (beyond that, by an eighth of its size)


class Column:
    """A growable 1-D numpy array, so appends stay amortised O(1): its capacity doubles while it is
    small, and grows by an eighth once large (a daemon's columns are loaded at their exact length from
    a saved index, and the first row added copies them: doubling then held twice their bytes)."""

    def __init__(self, dtype: type | np.dtype, fill: float = 0) -> None:
        self.data = np.full(1024, fill, dtype=dtype)
        self.size = 0
        self.fill = fill

    def extend(self, values: np.ndarray | list) -> None:
        values = np.asarray(values, dtype=self.data.dtype)
        need = self.size + len(values)
        if need > len(self.data):
            have = len(self.data)
            grown = np.full(max(need, have + max(min(have, _SLACK), have // 8)), self.fill, dtype=self.data.dtype)
            grown[: self.size] = self.data[: self.size]
            self.data = grown
        self.data[self.size:need] = values
        self.size = need

    def view(self) -> np.ndarray:
        return self.data[: self.size]

    @classmethod
    def of(cls, values: np.ndarray, fill: float = 0, room: np.ndarray | None = None) -> Self:
        """A column over `values` as they are (a copy-on-write map is fine: growing copies it). `room`:
        a longer array that `values` is the start of (`map_with_room`), which rows added go on into
        before anything is copied (its part past `values` is not set to `fill`: extend writes it)."""
        column = cls(values.dtype, fill)
        column.data, column.size = values, len(values)
        if room is not None and room.dtype == values.dtype and len(room) > len(values) and (
                room.__array_interface__["data"][0] == values.__array_interface__["data"][0]):
            column.data = room
        return column


class Mapping:
    """A region mapped by `map_with_room`, the base of the arrays over it: unmapped when they are gone."""

    def __init__(self, address: int, length: int, mapped: int, start: int, dtype: np.dtype, count: int) -> None:
        self.address, self.length, self.mapped = address, length, mapped
        self.__array_interface__ = {"data": (address + start, False), "shape": (count,), "typestr": dtype.str,
                                    "version": 3}

    def release(self) -> None:
        """Drop the file part's resident pages (only before anything wrote to it: a private page
        written would lose its writes)."""
        _libc().madvise(self.address, self.mapped, 4)   # MADV_DONTNEED

    def __del__(self) -> None:
        _libc().munmap(self.address, self.length)


@functools.cache
def _libc() -> Any:
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long)
    libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
    libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    return libc


def map_with_room(path: Path, room: int) -> np.ndarray | None:
    """A 1-D `.npy` file mapped copy-on-write (private, as np.load's mmap_mode "c") at the start of a
    region `room` values longer, whose rest is anonymous memory reserved, not touched: rows a daemon
    adds to a loaded column go there, and the loaded part stays the file's pages (a column grown by
    copying held every loaded row again in anonymous memory). Returns the whole region's array (the
    file's values first), or None where this cannot be done (not Linux, not a plain 1-D array): then
    the caller maps the file as it is."""
    import mmap
    import sys

    if sys.platform != "linux":
        return None
    with open(path, "rb") as handle:
        version = np.lib.format.read_magic(handle)
        if version not in ((1, 0), (2, 0)):
            return None
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read(handle)
        start, size = handle.tell(), os.fstat(handle.fileno()).st_size
        if len(shape) != 1 or dtype.hasobject or not dtype.isnative or start + shape[0] * dtype.itemsize != size:
            return None
        count = shape[0] + room
        length = -(-(start + count * dtype.itemsize) // mmap.PAGESIZE) * mmap.PAGESIZE
        libc = _libc()
        # PROT_READ | PROT_WRITE; MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, then the file MAP_FIXED over its start
        address = libc.mmap(None, length, 3, 0x02 | 0x20 | 0x4000, -1, 0)
        if address is None or address == (1 << 64) - 1:
            return None
        mapped = -(-size // mmap.PAGESIZE) * mmap.PAGESIZE
        if libc.mmap(address, size, 3, 0x02 | 0x10, handle.fileno(), 0) != address:
            libc.munmap(address, length)
            return None
    return np.asarray(Mapping(address, length, mapped, start, dtype, count))


def release_pages(array: np.ndarray) -> bool:
    """Drop the resident pages of a read-only memory-mapped array from this process (MADV_DONTNEED):
    they stay in the page cache, and the next read maps them again (a minor fault per 64 KB). A
    writable array (a private copy-on-write map may hold writes) or one not mapped is left alone."""
    import mmap

    if array.flags.writeable:
        return False
    base = array.base
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None)
    if base is None:
        return False
    try:
        base.madvise(mmap.MADV_DONTNEED)
    except (ValueError, OSError, AttributeError):   # closed, or not Linux
        return False
    return True


_PAGEMAP_PRESENT, _PAGEMAP_FILE = 1 << 63, 1 << 61   # /proc/self/pagemap: a page mapped; of a file (not copied)


def release_clean(array: np.ndarray) -> int:
    """Drop the resident pages of a copy-on-write map's file part (`map_with_room`) that were never
    written (still the file's pages, by /proc/self/pagemap): they stay in the page cache, and a read
    maps them again. Pages written (private copies) are kept. A loaded index's per-row columns, which
    queries read across (a 2160 h question reads the labels, norms and links of every row its terms
    reach: ~30 B a row of a 3M index, resident until now). The caller holds off every writer of the
    array. Returns the bytes released (0: not such a map, or not Linux)."""
    import mmap

    base = array.base
    while base is not None and not isinstance(base, Mapping):
        base = getattr(base, "base", None)
    if base is None:
        return 0
    page = mmap.PAGESIZE
    pages = base.mapped // page
    try:
        fd = os.open("/proc/self/pagemap", os.O_RDONLY | os.O_CLOEXEC)
        try:
            entries = np.frombuffer(os.pread(fd, 8 * pages, base.address // page * 8), dtype=np.uint64)
        finally:
            os.close(fd)
    except OSError:
        return 0
    clean = np.zeros(len(entries) + 2, dtype=np.int8)
    clean[1:-1] = (entries & np.uint64(_PAGEMAP_PRESENT | _PAGEMAP_FILE)) == np.uint64(_PAGEMAP_PRESENT | _PAGEMAP_FILE)
    edges = np.flatnonzero(np.diff(clean))      # runs of clean pages: [start, end) pairs
    libc = _libc()
    for start, end in zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True):
        libc.madvise(base.address + start * page, (end - start) * page, mmap.MADV_DONTNEED)
    return int((edges[1::2] - edges[::2]).sum()) * page


class SplitColumn:
    """A column read a value at a time (each result's id end): a frozen base (a saved index's map,
    never copied, so a daemon's first new row does not copy it) and the rows added since, apart."""

    def __init__(self, base: np.ndarray, fill: float = 0) -> None:
        self.base = base
        self.tail = Column(base.dtype, fill)

    @property
    def size(self) -> int:
        return len(self.base) + self.tail.size

    @property
    def nbytes(self) -> int:
        return self.base.nbytes + self.tail.data.nbytes

    def extend(self, values: np.ndarray | list) -> None:
        self.tail.extend(values)

    def at(self, row: int) -> int:
        frozen = len(self.base)
        return int(self.base[row] if row < frozen else self.tail.data[row - frozen])

    def view(self) -> np.ndarray:
        """Every value as one array (a copy once rows were added)."""
        return np.concatenate([self.base, self.tail.view()]) if self.tail.size else self.base


class Blob:
    """Append-only bytes over a frozen base (a saved index's map, never copied): the ids of an index's
    rows, read a few at a time (a query's results), so the base stays on disk but for the pages read."""

    def __init__(self, base: np.ndarray | None = None) -> None:
        self.base = np.empty(0, dtype=np.uint8) if base is None else base
        self.tail = bytearray()

    def __len__(self) -> int:
        return len(self.base) + len(self.tail)

    def __iadd__(self, more: bytes) -> Blob:
        try:
            self.tail += more
        except BufferError:   # a view of it (`array(copy=False)`) outlived its save: grow a copy
            self.tail = self.tail + more
        return self

    def __getitem__(self, part: slice) -> bytes:
        start, stop, _ = part.indices(len(self))
        frozen = len(self.base)
        if stop <= frozen:
            return self.base[start:stop].tobytes()
        if start >= frozen:
            return bytes(self.tail[start - frozen:stop - frozen])
        return self.base[start:].tobytes() + bytes(self.tail[:stop - frozen])

    def array(self, copy: bool = True) -> np.ndarray:
        """All of it as one uint8 array (a copy when anything was appended; `copy` False: a view of the
        appended bytes when there is no base, for a caller that appends nothing while it holds it)."""
        if not self.tail:
            return self.base
        if not copy and not len(self.base):
            return np.frombuffer(self.tail, dtype=np.uint8)
        return np.concatenate([self.base, np.frombuffer(self.tail, dtype=np.uint8)])


class RowOffsets:
    """The journal offset of each row, read one at a time (a query's results): a frozen base (a saved
    index's read-only map, never copied, so it costs no anonymous memory and only the pages results
    read) and the rows added since, apart (8 bytes each)."""

    __slots__ = ("base", "tail")

    def __init__(self, base: np.ndarray | None = None) -> None:
        self.base = np.empty(0, dtype=np.int64) if base is None else base
        self.tail = array("q")

    def __len__(self) -> int:
        return len(self.base) + len(self.tail)

    def __getitem__(self, row: int) -> int:
        frozen = len(self.base)
        return int(self.base[row]) if row < frozen else self.tail[row - frozen]

    def frombytes(self, data: bytes) -> None:
        """Append rows' offsets given as native int64 bytes (a batch's `offsets.tobytes()`)."""
        try:
            self.tail.frombytes(data)
        except BufferError:   # a view of it (`array(copy=False)`) outlived its save: grow a copy
            self.tail = array("q", self.tail)
            self.tail.frombytes(data)

    def array(self, copy: bool = True) -> np.ndarray:
        """Every offset as one int64 array, a copy (a save writes it while rows are added); `copy`
        False: a view of the rows added when there is no base (a build saving what it owns)."""
        if not self.tail:
            return self.base      # never written to: no copy needed
        if not copy and not len(self.base):
            return np.frombuffer(self.tail, dtype=np.int64)
        return np.concatenate([self.base, np.frombuffer(self.tail, dtype=np.int64)])


class Segment:
    """Frozen postings in CSR form: term t's rows are rows[indptr[t]:indptr[t+1]], ascending."""

    __slots__ = ("_span", "indptr", "rows", "tf")

    def __init__(self, indptr: np.ndarray, rows: np.ndarray, tf: np.ndarray) -> None:
        self.indptr, self.rows, self.tf = indptr, rows, tf
        self._span: tuple[int, int] | None = None

    @property
    def span(self) -> tuple[int, int]:
        """Its lowest and highest row ((0, -1): none), from each term's first and last (O(terms), once).
        That reads a page of the rows per term, nearly all of them: a saved segment's mapped pages then
        leave the process (a windowed query's first look at a 3M index held every segment's rows and
        indptr, ~260 MB, until the idle release); they stay in the page cache."""
        if self._span is None:
            starts, ends = self.indptr[:-1], self.indptr[1:]
            held = ends > starts
            self._span = (int(self.rows[starts[held]].min()), int(self.rows[ends[held] - 1].max())) \
                if held.any() else (0, -1)
            release_pages(self.indptr)
            release_pages(self.rows)
        return self._span

    @classmethod
    def build(cls, parts: list[Segment | Triples], n_terms: int) -> Segment:
        """Merge segments and (terms, rows, tf) triples, given in row order, into one segment.

        A counting sort done in chunks: the output is allocated once and filled part by part, so the
        temporaries stay at a few chunks whatever the size (a global argsort would need 8 bytes more
        per posting)."""
        counts = np.zeros(n_terms, dtype=np.int64)
        for part in parts:
            if isinstance(part, Segment):
                counts[: len(part.indptr) - 1] += np.diff(part.indptr)
            else:
                counts += np.bincount(part[0], minlength=n_terms)
        indptr = np.zeros(n_terms + 1, dtype=np.int64)
        np.cumsum(counts, out=indptr[1:])
        rows_out = np.empty(int(indptr[-1]), dtype=np.int32)
        tf_out = np.empty(int(indptr[-1]), dtype=np.uint8)
        cursor = indptr[:-1].copy()  # where each term's next posting goes
        for part in parts:
            if isinstance(part, Segment):
                width = len(part.indptr) - 1
                base = cursor[:width] - part.indptr[:-1]  # destination minus source position, per term
                # Whole terms at a time, about _MERGE_CHUNK postings per step.
                cuts = np.searchsorted(part.indptr, np.arange(0, part.nnz, _MERGE_CHUNK), side="right") - 1
                for t0, t1 in zip(cuts.tolist(), [*cuts[1:].tolist(), width], strict=True):
                    a, b = int(part.indptr[t0]), int(part.indptr[t1])
                    if a == b:
                        continue
                    dest = np.repeat(base[t0:t1], np.diff(part.indptr[t0:t1 + 1])) + np.arange(a, b)
                    rows_out[dest] = part.rows[a:b]
                    tf_out[dest] = part.tf[a:b]
                cursor[:width] += np.diff(part.indptr)
                continue
            terms_in, rows_in, tf_in = part
            for a in range(0, len(terms_in), _MERGE_CHUNK):
                terms = terms_in[a:a + _MERGE_CHUNK]
                # A stable order by term (rows stay ascending within a term): one sort of (term, position)
                # packed in an int64, half the CPU of a stable argsort; a posting's rank among its term's
                # is its place in the sorted run minus where the term's run starts.
                order = np.sort(terms.astype(np.int64) << 32 | np.arange(len(terms), dtype=np.int64))
                sorted_terms = order >> 32
                order &= 0xFFFFFFFF
                counts = np.bincount(terms, minlength=n_terms)
                shift = cursor - (np.cumsum(counts) - counts)   # destination minus place in the sorted chunk
                dest = shift[sorted_terms] + np.arange(len(order))
                rows_out[dest] = rows_in[a:a + _MERGE_CHUNK][order]
                tf_out[dest] = tf_in[a:a + _MERGE_CHUNK][order]
                cursor += counts
        return cls(indptr, rows_out, tf_out)

    def postings(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        if term + 1 >= len(self.indptr):
            return self.rows[:0], self.tf[:0]
        a, b = self.indptr[term], self.indptr[term + 1]
        return self.rows[a:b], self.tf[a:b]

    def postings_in(self, term: int, lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        """`postings(term)` in rows lo..hi-1 (`span`)."""
        rows, tf = self.postings(term)
        a, b = span(rows, lo, hi)
        return rows[a:b], tf[a:b]

    @property
    def nnz(self) -> int:
        return len(self.rows)


def walk(segments: list[Segment], pending: Triples | None, chunk: int = 1 << 21,
         since: int = 0) -> Iterator[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """Every posting as (rows, tf, terms) chunks, segment by segment, then the `pending` (terms, rows,
    tf): each mapped segment's pages leave the process once read. `since`: segments whose rows all
    lie before that row are skipped (unread: a segment holds rows added one after another)."""
    for seg in segments:
        if since and seg.span[1] < since:     # its span read a page per term: they leave too
            release_pages(seg.indptr)
            release_pages(seg.rows)
            continue
        for a in range(0, seg.nnz, chunk):
            b = min(a + chunk, seg.nnz)
            # each posting's term: the terms whose runs meet a..b-1, each repeated for its postings there
            t0, t1 = (int(t) for t in np.searchsorted(seg.indptr, [a, b - 1], side="right") - 1)
            runs = np.diff(np.clip(seg.indptr[t0:t1 + 2], a, b))
            yield seg.rows[a:b], seg.tf[a:b], np.repeat(np.arange(t0, t1 + 1), runs)
        for part in (seg.indptr, seg.rows, seg.tf):   # a mapped segment read whole: its pages leave
            release_pages(part)                        # this process (a build's spilled ones, ~all)
    if pending is not None and len(pending[0]):
        terms, rows, tf = pending
        yield rows, tf, terms


_CODE_TYPES = (np.dtype(np.int8), np.dtype(np.int16), np.dtype(np.int32))


def code_type(top: int) -> np.dtype:
    """The narrowest code type holding every code up to `top` and `top + 1` (readers count codes
    shifted by one, in the codes' own type)."""
    return next((t for t in _CODE_TYPES if top < np.iinfo(t).max), np.dtype(np.int64))


class CodeColumn(Column):
    """A label field's code per row in the narrowest type its codes need (`code_type`): a field of a
    few values (kind, source, workspace) takes a byte a row, not four; widened, by a copy of the rows,
    when a new code needs it (once per type at most)."""

    def extend(self, values: np.ndarray | list) -> None:
        values = np.asarray(values)
        if len(values) and values.dtype != self.data.dtype:
            top = int(values.max())
            if top >= np.iinfo(self.data.dtype).max:
                self.widen(code_type(top))
        super().extend(values)

    def widen(self, dtype: np.dtype) -> None:
        grown = np.empty(max(self.size + self.size // 8, 1024), dtype=dtype)
        grown[: self.size] = self.data[: self.size]
        self.data = grown


class Codes(dict[str | None, int]):
    """Interns the values of one label field (source, workspace, ...) as small ints; None is -1.
    Misses assign the next code, so batches map through `map(codes.__getitem__, values)` in C.
    `narrow`: the codes per row take the narrowest type they need (`CodeColumn`), from a byte; else
    int32 (session codes: many, and counted with int32 arithmetic by the rankings)."""

    def __init__(self, values: Iterable[str] = (), column: np.ndarray | None = None,
                 room: np.ndarray | None = None, narrow: bool = False) -> None:
        super().__init__({None: -1})
        self.update((v, i) for i, v in enumerate(values))
        if column is None:
            self.column = CodeColumn(_CODE_TYPES[0] if narrow else np.int32, -1)
            return
        need = code_type(len(self) - 2) if narrow else np.dtype(np.int32)
        if column.dtype.itemsize > need.itemsize:   # a view saved before codes were narrow: converted
            column, room = column.astype(need), None
        self.column = CodeColumn.of(column, -1, room)

    def __missing__(self, value: str | None) -> int:
        code = self[value] = len(self) - 1
        return code

    def values_in_order(self) -> list[str]:
        return [v for v in self if v is not None]  # insertion order is code order


def span(rows: np.ndarray, lo: int, hi: int) -> tuple[int, int]:
    """Where rows lo..hi-1 start and end in `rows` (ascending). The edges are looked up as the rows' own
    type: keys of another (a tuple of ints is int64, the rows int32) make searchsorted cast every row
    first, O(rows) a call, not O(log): at 3M rows most of a week's query's look-ups."""
    a, b = rows.searchsorted(np.array((lo, hi), dtype=rows.dtype))
    return int(a), int(b)


def distinct(values: np.ndarray, runs: bool = False) -> np.ndarray:
    """`np.unique(values)` by a sort: numpy 2's `unique` of integers goes through a hash table and then
    sorts, ~20x slower on the tens of thousands of rows a query reaches. `runs`: the values are ascending
    runs one after another, merged by a stable sort (~1.4x faster than sorting them as unordered)."""
    out = np.sort(values, kind="stable" if runs else None)
    if len(out) > 1:
        keep = np.empty(len(out), dtype=bool)
        keep[0] = True
        np.not_equal(out[1:], out[:-1], out=keep[1:])
        out = out[keep]
    return out
