"""The token-cosine index on disk: a derived view saved atomically, loaded memory-mapped.

Layout under `<index_dir>/cosine/`: `manifest.json` (format, journal identity, the offset covered,
file sizes and checksums) names one generation directory `gen-*` of `.npy` arrays; a save writes
a new generation in a temporary directory, fsyncs it, renames it, then swaps the manifest.

A build writes each frozen segment as soon as it fills (`spill`: the bytes a save writes, in a
`tmp-gen-spill-*` directory no manifest names) and keeps only a read-only map of it, so it never holds
the whole index's postings in memory; the next save hard-links those files into its generation, and
removes the spill directory with the other leftovers (a killed build's included).
"""

from __future__ import annotations

import contextlib
import fcntl
import itertools
import os
import shutil
import time
import weakref
import zlib
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import orjson

from urchin.fileio import (
    drop_cached,
    ensure_private_dir,
    fsync_dir,
    link_if_possible,
    open_append,
    rename_into_place,
    write_all,
    write_private,
    write_synced,
)
from urchin.journal import Journal, JournalMark
from urchin.search.assoc import path_beside
from urchin.search.cosine import IndexState
from urchin.search.cosine_state import NARROW
from urchin.search.postings import Mapping, code_type, map_with_room
from urchin.search.vocab import Vocabulary

__all__ = ["FORMAT", "MANIFEST", "Reuse", "RowFiles", "Saved", "StoreError", "convert", "covered", "covers", "discard",
           "install_beside", "load", "release", "save", "saved_offset", "spill",
           "uncache"]

FORMAT = 3   # 2: the journal is marked by urchin.journal.JournalMark, the one mark every view uses;
             # 3: label codes in the narrowest type they need (`postings.CodeColumn`: int8 mostly)
_READS = (2, 3)   # a format-2 save loads (its int32 label codes narrowed in memory; the next save is 3);
                  # a format-3 save is refused by the code before it (an int8 code it grew would wrap)
_MANIFEST = "manifest.json"
MANIFEST = _MANIFEST     # the commit point of a save (a reader keys what it learned from it on its stat)
_LOCK = ".lock"
_MMAP_PREFIXES = ("seg", "ids", "id_end", "offsets")  # never written in place: mapped read-only; the rest copy-on-write
_CHECKSUMMED = ("vocab.bin", "labels.json")
_MMAP_MIN = 1 << 16
_GROWN = ("ts.", "ts_max.", "norm.", "prev.", "next.", "label_")   # loaded with room to grow (`map_with_room`)
_ROOM_MIN = 1 << 20   # values of room at least
_SPILL = "tmp-gen-spill"   # a tmp-gen-* name: a save removes it (after linking what it needs from it)
_spilled = itertools.count()   # file names within this process's spill directory (named once per process:
_SPILL_DIR = f"{_SPILL}-{os.getpid()}-{time.time_ns():x}"   # a file there may be linked into a generation)


# id(array) -> (a weak reference to it, a saved file holding it): segments are immutable, so a later
# save hard-links the file instead of writing it again. The weak reference guards against a reused id.
Reuse = dict[int, tuple["weakref.ref[np.ndarray]", Path]]


class StoreError(Exception):
    """The saved index is missing, stale or damaged; the message says which (callers rebuild)."""


@dataclass(slots=True)
class Saved:
    """What a load returns: the index's state, its rows' journal offsets, and the mark it covers."""

    state: IndexState
    offsets: np.ndarray
    mark: JournalMark
    reuse: Reuse


@contextmanager
def _locked(directory: Path, mode: int) -> Iterator[None]:
    ensure_private_dir(directory)
    fd = os.open(directory / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)


# ---- saving -------------------------------------------------------------------------------------
def save(directory: Path, state: IndexState, offsets: np.ndarray, mark: JournalMark,
         reuse: Reuse | None = None) -> Reuse:
    """Write a new generation and point the manifest at it; returns where each segment array went
    (pass it as `reuse` to the next save: frozen segments are then hard-linked, written once)."""
    ensure_private_dir(directory.parent)
    with _locked(directory, fcntl.LOCK_EX):
        name = f"gen-{time.time_ns():x}-{os.getpid()}"
        tmp = directory / f"tmp-{name}"
        ensure_private_dir(tmp)
        files: dict[str, list[Any]] = {}
        written: dict[int, tuple[np.ndarray, str]] = {}

        def put(fname: str, array: np.ndarray) -> None:
            known = (reuse or {}).get(id(array))
            grown = _GROWN_FILES.get(id(array))
            if grown is not None and grown[0]() is array:    # a build's per-row file: copied, never read here
                files[fname] = [write_synced(tmp / fname, _npy_from(array, grown[1])), None]
            elif known is not None and known[0]() is array and link_if_possible(known[1], tmp / fname):
                files[fname] = [(tmp / fname).stat().st_size, None]
            else:
                files[fname] = [write_synced(tmp / fname, _npy(array)), None]
            if fname.startswith("seg"):
                written[id(array)] = (array, fname)

        def put_bytes(fname: str, data: bytes) -> None:
            files[fname] = [write_synced(tmp / fname, data), zlib.crc32(data)]

        vocab = state.vocab
        put_bytes("vocab.bin", vocab.to_bytes() if isinstance(vocab, Vocabulary) else "\n".join(vocab).encode("utf-8"))
        put_bytes("labels.json", orjson.dumps(state.labels))
        for key, array in state.arrays.items():
            put(f"{key}.npy", array)
        put("offsets.npy", offsets)
        for i, parts in enumerate(state.segments):
            for part, array in zip(("indptr", "rows", "tf"), parts, strict=True):
                put(f"seg{i:02d}.{part}.npy", array)
        fsync_dir(tmp)
        final = directory / name
        rename_into_place(tmp, final)
        manifest = {"format": FORMAT, "generation": name, "journal": mark.to_dict(), "meta": state.meta,
                    "segments": len(state.segments), "files": files}
        # the manifest is the commit point; the folder's fsync makes it and the generation's rename durable
        write_private(directory / _MANIFEST, orjson.dumps(manifest, option=orjson.OPT_INDENT_2), sync_dir=True)
        uncache(final, files)
        for old in directory.iterdir():  # older generations and tmp dirs of crashed saves
            if old.is_dir() and old.name != name and old.name.startswith(("gen-", "tmp-gen-")):
                shutil.rmtree(old, ignore_errors=True)
        return {key: (weakref.ref(array), final / fname) for key, (array, fname) in written.items()}


def convert(directory: Path) -> bool:
    """Bring a format-2 save to this format: its label codes of few values (int32 there) rewritten in
    their narrowest type (`postings.code_type`), every other file hard-linked, as a new generation the
    manifest then names. The manifest is the commit point: a crash before it leaves the format-2 save,
    which loads as it is (its codes narrowed in memory) and converts at the next try. True: the saved
    index is this format now; False: nothing saved, or not convertible (a load then says why)."""
    if not (directory / _MANIFEST).is_file():
        return False
    with _locked(directory, fcntl.LOCK_EX):
        try:
            manifest = orjson.loads((directory / _MANIFEST).read_bytes())
            if manifest.get("format") != 2:
                return bool(manifest.get("format") == FORMAT)
            gen, name = directory / str(manifest["generation"]), f"gen-{time.time_ns():x}-{os.getpid()}"
            labels, files = orjson.loads((gen / "labels.json").read_bytes()), dict(manifest["files"])
            tmp = directory / f"tmp-{name}"
            ensure_private_dir(tmp)
            for fname in files:
                if Path(fname).name != fname:
                    return False
                field = fname[len("label_"): -len(".npy")]
                if fname.startswith("label_") and field in NARROW:
                    codes = np.load(gen / fname, allow_pickle=False)
                    if len(codes) and not (codes.dtype.kind == "i" and -1 <= int(codes.min())
                                           and int(codes.max()) < len(labels[field])):
                        return False     # damaged: the load refuses it, and the view is rebuilt
                    narrow = codes.astype(code_type(len(labels[field]) - 1))
                    files[fname] = [write_synced(tmp / fname, _npy(narrow)), None]
                elif not link_if_possible(gen / fname, tmp / fname):
                    shutil.copyfile(gen / fname, tmp / fname)
            fsync_dir(tmp)
            rename_into_place(tmp, directory / name)
            manifest.update(format=FORMAT, generation=name, files=files)
            write_private(directory / _MANIFEST, orjson.dumps(manifest, option=orjson.OPT_INDENT_2), sync_dir=True)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, orjson.JSONDecodeError):
            return False
        for old in directory.iterdir():  # the format-2 generation, and tmp dirs of crashed saves
            if old.is_dir() and old.name != name and old.name.startswith(("gen-", "tmp-gen-")):
                shutil.rmtree(old, ignore_errors=True)
    return True


def uncache(folder: Path, names: Iterable[str]) -> None:
    """Drop the page cache's copy of a generation's read-only mapped files (postings, ids, id ends,
    offsets), fsynced so clean (`fileio.drop_cached`: just written, a query's read of one posting mapped
    its whole 2 MB folio; 3M: rows 191 vs 37 MB after a restart, bench/RESULTS.md)."""
    for name in names:
        if name.startswith(_MMAP_PREFIXES):
            drop_cached(folder / name)


def spill(directory: Path, arrays: tuple[np.ndarray, ...], reuse: Reuse) -> tuple[np.ndarray, ...]:
    """Write a frozen segment's arrays now, as a save would (the same bytes, fsynced), and return read-
    only maps of them, recorded in `reuse` so the next save links the files instead of writing them.
    Raises OSError (the caller keeps the arrays it has)."""
    with _locked(directory, fcntl.LOCK_SH):    # a save's clean-up (exclusive) never removes it mid-write
        folder = directory / _SPILL_DIR
        ensure_private_dir(folder)
        maps = []
        for array in arrays:
            path = folder / f"{next(_spilled)}.npy"
            write_synced(path, _npy(array), uncached=True)   # mapped: see `uncache`
            mapped = np.load(path, mmap_mode="r", allow_pickle=False).view(np.ndarray)
            reuse[id(mapped)] = (weakref.ref(mapped), path)
            maps.append(mapped)
        return tuple(maps)


def _npy(array: np.ndarray) -> Callable[[BinaryIO], None]:
    """Writes `array` as a `.npy` file to a handle (`write_synced`'s filler)."""
    return lambda handle: np.save(handle, array, allow_pickle=False)


# id(map) -> (a weak reference to it, the descriptor of the file it maps the start of): `RowFiles`' maps
_GROWN_FILES: dict[int, tuple[weakref.ref[np.ndarray], int]] = {}
_COPY_BYTES = 1 << 20


def _npy_from(array: np.ndarray, fd: int) -> Callable[[BinaryIO], None]:
    """Writes `array`, a map of the start of the file `fd`, as `np.save` does (the same bytes): its
    header, then the file's bytes read a piece at a time, so its pages never become this process's."""
    def fill(handle: BinaryIO) -> None:
        fmt = np.lib.format
        fmt.write_array_header_1_0(handle, fmt.header_data_from_array_1_0(array))
        done, size = 0, array.nbytes
        while done < size:
            piece = os.pread(fd, min(_COPY_BYTES, size - done), done)
            if not piece:
                raise OSError(f"a build's per-row file ends at {done} bytes, short of {size}")
            handle.write(piece)
            done += len(piece)
    return fill


class RowFiles:
    """A build's per-row arrays that only grow (its ids, their ends, the journal offsets): each written
    to a file of this process's spill directory as rows come, and read back as a read-only map of the
    whole file, whose pages are not this process's (nothing reads them during a build): at 3M events
    ~150 MB less in a build child. `save` copies such a map's file without reading it into memory. The
    files are held open: a save's clean-up removes the spill directory."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._fds: dict[str, int] = {}

    def append(self, name: str, data: np.ndarray, dtype: np.dtype) -> np.ndarray:
        """Append `data` to the file `name`; returns a read-only map of all of it. Raises OSError."""
        fd = self._fds.get(name)
        if fd is None:
            with _locked(self.directory, fcntl.LOCK_SH):   # a save's clean-up never removes it mid-open
                folder = self.directory / _SPILL_DIR
                ensure_private_dir(folder)
                # a name of this process's, never reused; nothing to sync: no manifest names the file
                fd = open_append(folder / f"{next(_spilled)}.{name}", sync_new=False)
            self._fds[name] = fd
        write_all(fd, data.tobytes())      # a build's rows since the last append: ~1 MB
        size = os.fstat(fd).st_size
        if not size:
            return np.empty(0, dtype=dtype)
        import mmap

        mapped = np.frombuffer(mmap.mmap(fd, size, prot=mmap.PROT_READ), dtype=dtype)
        for key in [k for k, (ref, _) in _GROWN_FILES.items() if ref() is None]:
            del _GROWN_FILES[key]
        _GROWN_FILES[id(mapped)] = (weakref.ref(mapped), fd)
        return mapped

    def close(self) -> None:
        """The files' descriptors (their maps hold their own; a later save writes them as any array)."""
        fds, self._fds = set(self._fds.values()), {}
        for key in [k for k, (_, fd) in _GROWN_FILES.items() if fd in fds]:
            del _GROWN_FILES[key]
        for fd in fds:
            os.close(fd)


def discard(directory: Path) -> bool:
    """Delete the saved index and the associations learned from it (after a compaction they may hold
    forgotten events); False if none."""
    if not directory.is_dir():
        return False
    with _locked(directory, fcntl.LOCK_EX):
        (directory / _MANIFEST).unlink(missing_ok=True)
        path_beside(directory).unlink(missing_ok=True)
        for old in directory.iterdir():
            if old.is_dir() and old.name.startswith(("gen-", "tmp-gen-")):
                shutil.rmtree(old, ignore_errors=True)
    return True


def install_beside(directory: Path, journal: Journal, model: Path) -> bool:
    """Move the associations at `model` (built from this index elsewhere) beside the index saved in
    `directory`, if one is still saved there for `journal` as it is now; False, `model` left, if not.
    Checked and moved under the store's lock, so a `discard` (a compaction) cannot fall in between."""
    if not directory.is_dir():
        return False
    with _locked(directory, fcntl.LOCK_EX):
        if not covers(directory, journal):
            return False
        rename_into_place(model, path_beside(directory))
    return True


# ---- loading ------------------------------------------------------------------------------------
def covers(directory: Path, journal: Journal) -> bool:
    """Whether an index is saved in `directory` for `journal` as the file is now (same file, the part
    it covered unchanged): a manifest read and the journal's ends, not the index."""
    return covered(directory, journal) is not None


def covered(directory: Path, journal: Journal) -> int | None:
    """`covers`, saying how much: the journal offset the index saved in `directory` covers, or None."""
    try:
        manifest = orjson.loads((directory / _MANIFEST).read_bytes())
        mark = JournalMark.from_dict(manifest["journal"]) if isinstance(manifest, dict) else None
    except (OSError, orjson.JSONDecodeError, KeyError):
        return None
    if mark is None or manifest.get("format") not in _READS or journal.replaced(mark):
        return None
    return mark.offset


def release(saved: Saved) -> None:
    """Right after a load: the pages its checks read (every row of most columns) leave the process's
    resident set, copy-on-write maps included (nothing has written to them yet); queries map back
    what they read. They stay in the page cache."""
    import mmap

    for array in [*saved.state.arrays.values(), saved.offsets, *(a for parts in saved.state.segments for a in parts)]:
        base = array.base
        while base is not None and not isinstance(base, mmap.mmap | Mapping):
            base = getattr(base, "base", None)
        if isinstance(base, Mapping):
            base.release()
        elif base is not None:
            with contextlib.suppress(ValueError, OSError):
                base.madvise(mmap.MADV_DONTNEED)


def saved_offset(directory: Path) -> int:
    """The journal offset the saved index covers, from its manifest alone (0: none readable)."""
    try:
        manifest = orjson.loads((directory / _MANIFEST).read_bytes())
        return int(manifest["journal"]["offset"]) if isinstance(manifest, dict) else 0
    except (OSError, orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        return 0


def load(directory: Path, journal: Path) -> Saved:
    """The saved index for `journal`; raises StoreError saying why there is none usable."""
    if not (directory / _MANIFEST).is_file():
        raise StoreError("no saved index")
    with _locked(directory, fcntl.LOCK_SH):
        try:
            return _load(directory, journal)
        except StoreError:
            raise
        except (OSError, ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError) as exc:
            raise StoreError(f"damaged ({type(exc).__name__}: {exc})") from None


def _load(directory: Path, journal: Path) -> Saved:
    manifest = orjson.loads((directory / _MANIFEST).read_bytes())
    if not isinstance(manifest, dict) or manifest.get("format") not in _READS:
        raise StoreError(f"format {manifest.get('format') if isinstance(manifest, dict) else '?'} is not {FORMAT}")
    mark = JournalMark.from_dict(manifest["journal"])
    if mark is None:
        raise StoreError("the journal mark is damaged")
    reason = Journal(journal).replaced(mark)
    if reason:
        raise StoreError(reason)
    gen = directory / str(manifest["generation"])
    files: dict[str, list[Any]] = manifest["files"]
    for fname, (size, _crc) in files.items():
        if Path(fname).name != fname or (gen / fname).stat().st_size != size:
            raise StoreError(f"{fname}: size differs from the manifest")
    blobs = {}
    for fname in _CHECKSUMMED:
        data = (gen / fname).read_bytes()
        if zlib.crc32(data) != files[fname][1]:
            raise StoreError(f"{fname}: checksum differs from the manifest")
        blobs[fname] = data

    def array(fname: str) -> np.ndarray:
        if fname not in files:
            raise StoreError(f"{fname}: missing from the manifest")
        if files[fname][0] < _MMAP_MIN:  # small (and empty) arrays: read, mapping gains nothing
            return np.load(gen / fname, allow_pickle=False)
        # plain ndarray views of the maps: np.memmap's Python-level indexing costs more than a
        # query's own work on a rare word (each slice and gather goes through memmap.__getitem__)
        if fname.startswith(_MMAP_PREFIXES):
            return np.load(gen / fname, mmap_mode="r", allow_pickle=False).view(np.ndarray)
        if fname.startswith(_GROWN):   # per-row columns: with room for the rows a daemon adds (not copied then)
            spare = max(int(meta["rows"]), _ROOM_MIN)   # virtual: pages exist once a row is written there
            whole = map_with_room(gen / fname, spare)
            if whole is not None:
                room[fname[: -len(".npy")]] = whole
                return whole[: len(whole) - spare]
        return np.load(gen / fname, mmap_mode="c", allow_pickle=False).view(np.ndarray)

    meta = manifest["meta"]
    room: dict[str, np.ndarray] = {}
    blobs["vocab.bin"].decode("utf-8")       # valid UTF-8 (a term is sliced out of it, then decoded)
    vocab = Vocabulary.of(blobs["vocab.bin"])   # no str per term: ~12 MB at 405k terms, not ~52 MB
    arrays = {f[: -len(".npy")]: array(f) for f in files
              if f.endswith(".npy") and not f.startswith(("seg", "offsets"))}
    segments = [tuple(array(f"seg{i:02d}.{p}.npy") for p in ("indptr", "rows", "tf"))
                for i in range(int(manifest["segments"]))]
    offsets = array("offsets.npy")
    if len(offsets) != int(meta["rows"]) or (len(offsets) and (
            int(offsets[-1]) >= mark.offset or not bool((np.diff(offsets) > 0).all()))):
        raise StoreError("offsets: inconsistent with the journal mark")
    state = IndexState(meta, vocab, orjson.loads(blobs["labels.json"]), arrays, segments,  # type: ignore[arg-type]
                       room)
    reuse: Reuse = {id(a): (weakref.ref(a), gen / f"seg{i:02d}.{p}.npy")
                    for i, parts in enumerate(segments) for p, a in zip(("indptr", "rows", "tf"), parts, strict=True)}
    return Saved(state, offsets, mark, reuse)
