"""On-disk cache of event embeddings for one model: `<root>/vectors/<fingerprint>/`.

Rows are appended as events arrive (each event embedded once, ever), memory-mapped on load, and
searched with one matrix product over a time window plus an `argpartition` top-k.

Two processes may write one model's cache (the daemon's embedder loop and its index process, which
takes an event's vector from here instead of embedding it again): appends, drops and repairs hold an
exclusive `flock` on `lock`, and load what the other appended first. Readers take no lock: appends
write the matrix, then the rows, then the ids, so every complete line of `ids.txt` has its row, and a
reader loads that prefix, never repairing what a writer may still be appending.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np
import orjson

from urchin.errors import EmbedderError
from urchin.fileio import append_synced, fsync_dir, rename_into_place, write_private, write_synced
from urchin.search.vector_feed import BACKGROUND_CHUNK, embed_events, event_text
from urchin.search.vector_files import DTYPE, FORMAT, ROW, copy_rows, nth_newline_end, read_rows, touch_private
from urchin.search.vector_keys import KeyIndex, key_of
from urchin.search.vector_lock import CacheBusy, WritersLock
from urchin.search.vector_math import BACKGROUND_ROWS, background, background_rows, normalise

__all__ = ["VectorCache", "CacheBusy", "embed_events", "event_text", "background", "BACKGROUND_CHUNK",
           "BACKGROUND_ROWS"]

class VectorCache:
    """Vectors of one model. Files: matrix.f32, rows.bin (ts, key), ids.txt, meta.json.

    Append order is matrix, rows, then ids: `ids.txt` is the commit record, so a torn append
    (crash mid-write) leaves extra matrix or row bytes that `open()` trims.
    """

    def __init__(self, root_dir: str | os.PathLike[str], fingerprint: str, dim: int,
                 *, fsync: bool = True) -> None:
        if not fingerprint or "/" in fingerprint or fingerprint.startswith("."):
            raise EmbedderError(f"vector cache fingerprint: not a folder name: {fingerprint!r}")
        if dim <= 0:
            raise EmbedderError(f"vector cache dim: must be positive, got {dim}")
        self.path = Path(root_dir) / "vectors" / fingerprint
        self.fingerprint = fingerprint
        self.dim = dim
        self.fsync = fsync
        self._lock = threading.RLock()     # this object's state; never held while waiting for `exclusive`
        self._writers = WritersLock(self.path)
        self._n = 0
        self._matrix: np.ndarray = np.zeros((0, dim), DTYPE)
        self._ts = np.zeros(0, np.int64)
        self._keys = KeyIndex()                     # key -> row
        self._ids = bytearray()
        self._offsets: list[int] = [0]  # start of each id in _ids, plus the end
        self._ts_sorted = True
        self._opened = False
        self._gen: tuple[int, ...] = ()   # the three files' inodes when loaded (a drop replaces them)
        self._loads = 0                   # full loads of the files: rows below _n stay as they are between
        self._sample: tuple[tuple[int, int], np.ndarray | None] = ((0, -1), None)   # background's, of (n, loads)

    # -- opening and repair ----------------------------------------------------------------

    @contextlib.contextmanager
    def exclusive(self, wait: bool = True) -> Iterator[None]:
        """The writers' lock, across processes (`flock`) and threads; re-entrant in one thread. Hold it
        from "which ids are missing" to "added" so two writers never embed the same event. `wait=False`
        (a query's inline catch-up) raises `CacheBusy` instead of waiting for another writer: the index
        process holds it while its embedding request runs, at the lowest CPU priority."""
        with self._writers.hold(wait):
            yield

    def open(self, wait: bool = True) -> VectorCache:
        """Open (creating) the cache, finishing a drop and trimming a torn append under the writers'
        lock. While another writer holds that lock (it is alive: a dead one's `flock` is released), a
        cache that exists is opened as a reader opens it, without waiting; one being created or mid-way
        through a drop's swap of its files is waited for, or with `wait=False` is `CacheBusy`."""
        try:
            with self.exclusive(wait=False), self._lock:
                self._open_files(repair=True)
                return self
        except CacheBusy:
            present = all((self.path / name).exists() for name in ("meta.json", "ids.txt", "matrix.f32", "rows.bin"))
            if not present:      # being created
                if not wait:
                    raise
                with self.exclusive(), self._lock:
                    self._open_files(repair=True)
                    return self
        with self._lock:
            self._open_files(repair=False)
        return self

    def _open_files(self, repair: bool) -> None:
        meta_path = self.path / "meta.json"
        if meta_path.exists():
            try:
                found = orjson.loads(meta_path.read_bytes())
            except orjson.JSONDecodeError as exc:
                raise EmbedderError(f"vector cache {self.path}: meta.json is not valid JSON ({exc}); remove the "
                                    "folder to embed its events again") from None
            if not isinstance(found, dict):
                raise EmbedderError(f"vector cache {self.path}: meta.json must hold a JSON object; remove the "
                                    "folder to embed its events again")
            if found.get("dim") != self.dim or found.get("dtype") != DTYPE.str:
                raise EmbedderError(
                    f"vector cache {self.path}: holds {found.get('dim')}-dim "
                    f"{found.get('dtype')} vectors, asked for {self.dim}-dim {DTYPE.str}"
                )
        else:
            meta = {"format": FORMAT, "fingerprint": self.fingerprint, "dim": self.dim, "dtype": DTYPE.str}
            write_private(meta_path, orjson.dumps(meta))
        if repair:
            self._finish_drop()
            for name in ("matrix.f32", "rows.bin", "ids.txt"):
                touch_private(self.path / name)
            self._repair_and_load(True)
        else:
            self._read_stable(full=True)
        self._opened = True

    def _repair_and_load(self, repair: bool = True) -> None:
        """Load the files; `repair` (only under `exclusive`) also trims a torn append, which only a
        writer that died mid-append leaves, as no writer runs while the lock is held. A reader calls
        it through `_read_stable`, which checks that no drop swapped the files meanwhile."""
        self._gen = self._generation()[:3]
        self._loads += 1
        ids = (self.path / "ids.txt").read_bytes()
        complete = ids.rfind(b"\n") + 1  # a partial last line is a torn append
        n_ids = ids.count(b"\n", 0, complete)
        row_bytes = self.dim * DTYPE.itemsize
        n = min(n_ids, os.path.getsize(self.path / "matrix.f32") // row_bytes,
                os.path.getsize(self.path / "rows.bin") // ROW.itemsize)
        if n < n_ids:  # only if the file system reordered writes; keep the first n
            complete = nth_newline_end(ids, n)
        if repair:
            os.truncate(self.path / "ids.txt", complete)
            os.truncate(self.path / "matrix.f32", n * row_bytes)
            os.truncate(self.path / "rows.bin", n * ROW.itemsize)
        rows = np.fromfile(self.path / "rows.bin", dtype=ROW, count=n)
        self._ts = rows["ts"].astype(np.int64)
        self._keys = KeyIndex(rows["key"])
        self._ids = bytearray(ids[:complete])
        ends = np.flatnonzero(np.frombuffer(bytes(self._ids), dtype=np.uint8) == 10) + 1
        self._offsets = [0, *ends.tolist()]
        self._ts_sorted = bool(n < 2 or np.all(self._ts[1:] >= self._ts[:-1]))
        self._n = n
        self._remap()

    # -- forgetting ------------------------------------------------------------------------

    def drop(self, should_drop: Callable[[str], bool]) -> int:
        """Remove the rows of every id `should_drop` accepts (forgotten events); returns how many.

        The three files are written anew beside the old ones and fsync'd; a `drop.commit` marker
        (written, then the folder fsync'd: the marker and the new names are durable together) then
        makes the swap roll forward (`open` finishes it after a crash), so the files never disagree
        about which row is which.
        """
        self._require_open()
        with self.exclusive(), self._lock:
            self._follow()
            gone = [row for row in range(self._n) if should_drop(self.id_at(row))]
            if not gone:
                return 0
            keep = np.setdiff1d(np.arange(self._n), np.asarray(gone))
            rows = np.fromfile(self.path / "rows.bin", dtype=ROW, count=self._n)[keep]
            ids = b"".join(self.id_at(int(r)).encode() + b"\n" for r in keep)
            matrix = self.path / "matrix.f32"      # the kept rows, a piece at a time (`copy_rows`)
            write_synced(self.path / "matrix.f32.new", lambda out: copy_rows(matrix, keep, self.dim, out))
            for name, data in (("rows.bin", rows.tobytes()), ("ids.txt", ids)):
                write_synced(self.path / (name + ".new"), data)
            write_synced(self.path / "drop.commit", b"1")
            fsync_dir(self.path)
            self._matrix = np.zeros((0, self.dim), DTYPE)  # unmap before the files are replaced
            self._finish_drop()
            self._repair_and_load()
        return len(gone)

    def _finish_drop(self) -> None:
        marker = self.path / "drop.commit"
        committed = marker.exists()
        for name in ("matrix.f32", "rows.bin", "ids.txt"):
            new = self.path / (name + ".new")
            if new.exists():
                if committed:
                    rename_into_place(new, self.path / name)
                else:
                    new.unlink()  # a drop that never committed: the old files stand
        if committed:
            fsync_dir(self.path)
            marker.unlink()

    def _remap(self) -> None:
        if self._n == 0:
            self._matrix = np.zeros((0, self.dim), DTYPE)
        else:
            self._matrix = np.memmap(self.path / "matrix.f32", dtype=DTYPE, mode="r",
                                     shape=(self._n, self.dim))

    def close(self) -> None:
        with self._lock:
            self._matrix = np.zeros((0, self.dim), DTYPE)
            self._sample = ((0, -1), None)
            self._opened = False

    def __enter__(self) -> VectorCache:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __len__(self) -> int:
        return self._n

    # -- membership ------------------------------------------------------------------------

    def __contains__(self, event_id: object) -> bool:
        return isinstance(event_id, str) and self._has_key(key_of(event_id))

    def _has_key(self, key: int) -> bool:
        return self._row_of(key) is not None

    def _row_of(self, key: int) -> int | None:
        return self._keys.row_of(key)

    def vectors_of(self, ids: Iterable[str]) -> dict[str, np.ndarray]:
        """The cached (unit-length) vectors of those of `ids` the cache holds, another process's too."""
        self._require_open()
        with self._lock:
            found = {}
            for event_id in ids:
                row = self._row_of(key_of(event_id))
                if row is not None:
                    found[event_id] = row
            matrix, inode = self._matrix, self._gen[0]
        vectors = self._read(matrix, inode, np.fromiter(found.values(), np.int64, len(found)))
        return {event_id: vectors[i] for i, event_id in enumerate(found)}

    def missing(self, ids: Iterable[str]) -> list[str]:
        """The ids not cached yet, in order, each once: what still needs an embedding request."""
        seen: set[str] = set()
        out = []
        self.refresh()
        with self._lock:
            for event_id in ids:
                if event_id not in seen and not self._has_key(key_of(event_id)):
                    seen.add(event_id)
                    out.append(event_id)
        return out

    # -- appending -------------------------------------------------------------------------

    def add(self, ids: Sequence[str], timestamps_ms: Sequence[int], vectors: np.ndarray) -> int:
        """Append rows for ids not cached yet (others are skipped); returns how many were added."""
        self._require_open()
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape != (len(ids), self.dim):
            raise EmbedderError(f"vector cache add: expected shape ({len(ids)}, {self.dim}), "
                                f"got {vectors.shape}")
        if len(timestamps_ms) != len(ids):
            raise EmbedderError("vector cache add: one timestamp per id is required")
        for event_id in ids:
            if not event_id or "\n" in event_id:
                raise EmbedderError(f"vector cache add: id must be one non-empty line: {event_id!r}")
        with self.exclusive(), self._lock:
            self._follow()       # rows another process appended: not added twice
            keep, keys = [], []
            batch_keys: set[int] = set()
            for i, event_id in enumerate(ids):
                key = key_of(event_id)
                if key not in batch_keys and not self._has_key(key):
                    batch_keys.add(key)
                    keep.append(i)
                    keys.append(key)
            if not keep:
                return 0
            # Cosine search is then a plain dot product.
            block = normalise(vectors[keep]).astype(DTYPE)
            rows = np.zeros(len(keep), dtype=ROW)
            rows["ts"] = np.asarray(timestamps_ms, dtype=np.int64)[keep]
            rows["key"] = np.asarray(keys, dtype=np.uint64)
            id_bytes = b"".join(ids[i].encode() + b"\n" for i in keep)
            append_synced(self.path / "matrix.f32", block.tobytes(), sync=self.fsync)   # stays cached: see `_read`
            append_synced(self.path / "rows.bin", rows.tobytes(), sync=self.fsync)
            append_synced(self.path / "ids.txt", id_bytes, sync=False)
            self._commit(rows, id_bytes, keys)
        return len(keep)

    def _commit(self, rows: np.ndarray, id_bytes: bytes, keys: list[int]) -> None:
        new_ts = rows["ts"]
        if self._ts_sorted and len(new_ts):
            last = self._ts[-1] if self._n else np.iinfo(np.int64).min
            self._ts_sorted = bool(new_ts[0] >= last and np.all(new_ts[1:] >= new_ts[:-1]))
        self._ts = np.concatenate([self._ts, new_ts])
        base = len(self._ids)
        self._ids += id_bytes
        ends = np.flatnonzero(np.frombuffer(id_bytes, dtype=np.uint8) == 10) + 1 + base
        self._offsets.extend(ends.tolist())
        self._keys.add(keys, self._n)
        self._n += len(rows)
        self._remap()

    # -- reading ---------------------------------------------------------------------------

    def id_at(self, row: int) -> str:
        return bytes(self._ids[self._offsets[row]:self._offsets[row + 1] - 1]).decode()

    def rows_since(self, since_ms: int | None, until_ms: int | None = None) -> slice | np.ndarray:
        """Rows in the window: a slice when rows arrived in time order (no copy), else indices."""
        n = self._n
        ts = self._ts[:n]
        if self._ts_sorted:
            start = 0 if since_ms is None else int(np.searchsorted(ts, since_ms, "left"))
            stop = n if until_ms is None else int(np.searchsorted(ts, until_ms, "right"))
            return slice(start, max(start, stop))
        keep = np.ones(n, dtype=bool)
        if since_ms is not None:
            keep &= ts >= since_ms
        if until_ms is not None:
            keep &= ts <= until_ms
        return np.flatnonzero(keep)

    def search(self, query: np.ndarray, *, since_ms: int | None = None,
               until_ms: int | None = None, mask: np.ndarray | None = None,
               accept: Callable[[str], bool] | None = None,
               limit: int = 10) -> list[tuple[str, float]]:
        """Best `limit` (id, cosine) pairs in the window; ties: newer first, then id.

        `mask` (bool per row) narrows the window before scoring; `accept(id)` filters after it
        (source, workspace... known only to the caller), widening the candidates 4x at a time
        until `limit` pass or the window is exhausted: still one matrix product.
        """
        self._require_open()
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise EmbedderError(f"vector cache search: query has {q.shape[0]} dims, "
                                f"cache holds {self.dim}")
        if limit <= 0:
            return []
        with self._lock:
            matrix, ts, n = self._matrix, self._ts, self._n
            window = self.rows_since(since_ms, until_ms)
        if mask is not None:
            mask = np.asarray(mask, dtype=bool)
            if mask.shape != (n,):
                raise EmbedderError(f"vector cache search: mask must have {n} entries")
            idx = np.arange(n)[window]
            window = idx[mask[idx]]
        q = normalise(q[None, :])[0]
        if isinstance(window, slice):
            scores = matrix[window] @ q
            rows = np.arange(window.start, window.start + len(scores))
        else:
            rows = window
            scores = matrix[rows] @ q if len(rows) else np.zeros(0, np.float32)
        k = limit if accept is None else limit * 4
        while True:
            ranked = self._ranked(scores, rows, ts, k)
            if accept is not None:
                ranked = [(row, score) for row, score in ranked if accept(self.id_at(row))]
            if len(ranked) >= limit or k >= len(scores):
                return [(self.id_at(row), score) for row, score in ranked[:limit]]
            k *= 4

    def background(self, query: np.ndarray) -> tuple[float, float]:
        """The query's cosines to a fixed sample of the cache (`background`): their mean and spread."""
        self._require_open()
        with self._lock:
            matrix, n, inode, of = self._matrix, self._n, self._gen[0], (self._n, self._loads)
            sample = self._sample[1] if self._sample[0] == of else None
        if sample is None:     # read once per load and length (those rows alone: the same answer)
            sample = self._read(matrix, inode, background_rows(n))
            with self._lock:
                self._sample = (of, sample)
        return background(sample, normalise(np.asarray(query, np.float32).reshape(1, -1))[0])

    def _read(self, matrix: np.ndarray, inode: int, rows: np.ndarray) -> np.ndarray:
        """`rows` of `matrix` (the map as loaded, of the file `inode`), read with `pread` (`read_rows`:
        no page of the file becomes this process's); through the map if a drop replaced the file since."""
        got = None
        if len(rows):
            with contextlib.suppress(FileNotFoundError), open(self.path / "matrix.f32", "rb", buffering=0) as f:
                got = read_rows(f.fileno(), rows, self.dim) if os.fstat(f.fileno()).st_ino == inode else None
        return np.array(matrix[rows]) if got is None else got

    def _ranked(self, scores: np.ndarray, rows: np.ndarray, ts: np.ndarray,
                k: int) -> list[tuple[int, float]]:
        if not len(scores):
            return []
        k = min(k, len(scores))
        top = np.argpartition(-scores, k - 1)[:k] if k < len(scores) else np.arange(len(scores))
        picked = [(int(rows[i]), float(scores[i])) for i in top]
        # Scores are rounded for ordering only: BLAS may give identical rows (duplicate content)
        # scores that differ in the last bit, and those must still tie.
        picked.sort(key=lambda rs: (-round(rs[1], 6), -int(ts[rs[0]]), self.id_at(rs[0])))
        return picked

    def _require_open(self) -> None:
        if not self._opened:
            raise EmbedderError(f"vector cache {self.path}: not open")
        self._refresh()

    def _refresh(self) -> None:
        """Before reading: load the rows another process appended, or after its drop of forgotten
        rows its new files, without the writers' lock (a query never waits for an embedding request)."""
        with self._lock:
            if self._writers.held_here():    # this thread is the writer: the files are its own
                self._follow()
            else:
                self._read_stable(full=False)

    def refresh(self) -> None:
        """Load what other processes appended or dropped since (membership tests do not look)."""
        if self._opened:
            self._refresh()

    def stamp(self) -> tuple[int, ...]:
        """Changes when a drop replaces the files (appends leave it): a writer that checked ids before
        can tell, under the writers' lock, whether a drop came between."""
        return self._generation()[:3]

    def _generation(self) -> tuple[int, ...]:
        """The inodes of the three files (a drop replaces each), and 1 while a drop's swap is under way."""
        out = []
        for name in ("matrix.f32", "rows.bin", "ids.txt"):
            try:
                out.append(os.stat(self.path / name).st_ino)
            except FileNotFoundError:
                out.append(-1)
        return (*out, int((self.path / "drop.commit").exists()))

    def _read_stable(self, full: bool) -> None:
        """A reader's load, without the writers' lock: the rows appended since (or everything, when
        `full` or the files were replaced), checked against a drop swapping the files meanwhile. A read
        that a swap tore is read again in full; a swap under way is waited out (it is three renames);
        a drop that a dead writer left half-swapped is finished under the lock, as `open` would."""
        for _ in range(400):    # 2 s
            before = self._generation()
            if before[3]:
                try:
                    with self.exclusive(wait=False):
                        self._follow()    # no live writer: a dead one's drop, finished here
                        return
                except CacheBusy:
                    time.sleep(0.005)
                    continue
            if full or before[:3] != self._gen:
                self._matrix = np.zeros((0, self.dim), DTYPE)
                self._repair_and_load(repair=False)
            elif os.path.getsize(self.path / "ids.txt") != len(self._ids):
                self._load_appended()
            if self._generation() == before:
                self._gen = before[:3]
                return
            full = True              # torn by a swap: what was read may mix two generations
        raise CacheBusy(f"vector cache {self.path}: a drop of forgotten rows is under way")

    def _follow(self) -> None:
        """Under `exclusive`: load what another process changed (its appended rows, or its files
        after a drop) and trim what a writer that died mid-append left."""
        if self._generation()[:3] != self._gen or (self.path / "drop.commit").exists():
            self._matrix = np.zeros((0, self.dim), DTYPE)
            self._finish_drop()
            self._repair_and_load(True)
            return
        if os.path.getsize(self.path / "ids.txt") != len(self._ids):
            self._load_appended()
        if not self._files_agree():   # a writer died mid-append: trim it, as open does
            self._matrix = np.zeros((0, self.dim), DTYPE)
            self._repair_and_load(True)

    def _files_agree(self) -> bool:
        return (os.path.getsize(self.path / "ids.txt") == len(self._ids)
                and os.path.getsize(self.path / "matrix.f32") == self._n * self.dim * DTYPE.itemsize
                and os.path.getsize(self.path / "rows.bin") == self._n * ROW.itemsize)

    def _load_appended(self) -> None:
        with (self.path / "ids.txt").open("rb") as f:
            f.seek(len(self._ids))
            tail = f.read()
        complete = tail.rfind(b"\n") + 1
        k = tail.count(b"\n", 0, complete)
        n, row_bytes = self._n, self.dim * DTYPE.itemsize
        have = min(os.path.getsize(self.path / "matrix.f32") // row_bytes,
                   os.path.getsize(self.path / "rows.bin") // ROW.itemsize) - n
        if have < k:        # not expected (the ids are written last): load the rows both files have
            k = max(0, have)
            complete = nth_newline_end(tail, k)
        if k:
            rows = np.fromfile(self.path / "rows.bin", dtype=ROW, count=k, offset=n * ROW.itemsize)
            self._commit(rows, tail[:complete], [int(key) for key in rows["key"]])
