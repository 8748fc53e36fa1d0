"""Literal, case-insensitive (Unicode casefold) search over event content, newest first by timestamp.

Candidate blocks come from the block index (`blockindex.py`: trigram bitmaps AND zone maps);
they are visited newest first and the scan stops once `limit` hits are older-proof. Each line is
checked on its parsed content, so the index can only make a query faster, never change its
answer. Without a usable index (read-only folder) it falls back to scanning the whole journal.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson

from urchin.errors import JournalError
from urchin.event import Event
from urchin.fileio import line_chunks
from urchin.journal import Journal
from urchin.search.blockbuild import FAR
from urchin.search.blockindex import BlockIndex, CatchUp, query_hashes
from urchin.search.blockview import BlockSnapshot
from urchin.search.foldcache import FoldCache, fold_block
from urchin.search.query import Filters
from urchin.tombstones import ForgetLog, forget_hash

__all__ = ["SubstringSearcher"]

_CHUNK = 8 << 20
_OLDER_BLOCKS = 4   # blocks `older_match` may read: a few 64 KiB reads, within what an empty search costs
# characters a JSON writer may escape: a query holding one cannot be prefiltered on raw bytes
_ESCAPABLE = frozenset('"\\/') | frozenset(chr(c) for c in range(32)) | {"\u2028", "\u2029", "\x7f"}
# what `Event.from_record` fills in when a field is missing: such a filter value need not be in the raw line
_DEFAULTS = {"source": "unknown", "kind": "note"}

_Best = list[tuple[int, str, Event]]   # ts, id, the event as it may be served
_Serve = Callable[[bytes | str, Event], Event]
_ANY = Filters()
_REMEMBERED = 64           # `newest` answers kept (three per workspace a session-start digest reads)
_REMEMBERED_BYTES = 24 << 20   # and their content at most (250 tool outputs of 64 KiB are 16 MiB)
_TAIL_BYTES = 8 << 20      # what `newest` reads past a kept answer; more (an import) asks the index again


class _Kept:
    """A `newest` answer as computed: the journal file and the end it read to, the forgotten ids it
    hid, its window's start, and its (ts, id, event) items."""

    __slots__ = ("owner", "end", "hidden", "since_ms", "best", "size")

    def __init__(self, owner: tuple[int, int, int], end: int, hidden: frozenset[bytes], since_ms: int,
                 best: _Best) -> None:
        self.owner, self.end, self.hidden, self.since_ms, self.best = owner, end, hidden, since_ms, best
        self.size = sum(len(event.content) + 256 for _, _, event in best)   # what it holds, roughly


class SubstringSearcher:
    """Long-lived is best (the daemon): the index view stays mapped between queries."""

    def __init__(self, journal: Journal, index_dir: Path | None = None) -> None:
        self.journal = journal
        self.index = BlockIndex(journal, index_dir)
        self.forgotten = ForgetLog(journal)
        self.folds = FoldCache()  # casefolded blocks, reused by the next queries (the daemon's)
        self._kept: OrderedDict[tuple[Filters, int], _Kept] = OrderedDict()   # `newest`'s answers
        self._kept_lock = threading.Lock()

    def search(self, query: str | None, *, since_ms: int, limit: int, filters: Filters = _ANY,
               until_ms: int | None = None, oldest_first: bool = False) -> list[Event]:
        """The `limit` newest events in the window whose content contains `query` (None: any)."""
        folded = query.casefold() if query is not None else None
        if not self.journal.path.exists():
            return []
        best: _Best = []
        hidden = self.forgotten.hashes()
        try:
            with self.index.snapshot() as view:
                self._search_view(view, folded, since_ms, until_ms, limit, filters, best, hidden)
        except OSError as exc:  # no usable index (read-only folder, disk full): scan instead
            import logging

            logging.getLogger("urchin.search").warning("substring index unusable (%s): scanning %s", exc,
                                                       self.journal.path)
            best = []
            _keep_best(self._scan(folded), folded, since_ms, until_ms, limit, filters, best, hidden, self._serve)
        best.sort(key=lambda item: (item[0], item[1]), reverse=not oldest_first)
        return [event for _, _, event in best]

    def newest(self, filters: Filters, *, since_ms: int, limit: int) -> list[Event]:
        """`search(None, ...)`'s answer, kept per (filters, limit) and brought up to date from what the
        journal gained since: the session-start digest asks the same few each time (a workspace's
        newest 250 events, decisions, commits), and reading them from the blocks again was most of its
        cost (bench/RESULTS.md, round fifteen).

        The same answer as `search`: the journal only grows at its end, so the newest `limit` of
        everything are the newest of (the kept `limit`, within the window) and (the lines added, which
        may be back-dated); a window that starts later keeps a prefix of them. A kept answer is not used
        when the journal file changed (a forget's compaction), an id was forgotten since, the window
        starts earlier, or an item came from a line the write path did not prove (its served form
        follows the `[redact]` settings, which may change)."""
        hidden = self.forgotten.hashes()
        key = (filters, limit)
        with self._kept_lock:
            kept = self._kept.get(key)
        if kept is not None and kept.hidden == hidden and since_ms >= kept.since_ms:
            found = self._from_kept(key, kept, since_ms)
            if found is not None:
                return found
        try:
            with self.index.snapshot() as view, _journal_fd(self.journal.path) as fd:
                proven = [True]
                best: _Best = []
                self._search_view(view, None, since_ms, None, limit, filters, best, hidden, self._noting(proven))
                if proven[0]:
                    self._keep(key, _Kept(self._owner(fd), view.end, hidden, since_ms, list(best)))
        except OSError:   # no usable index: `search` scans (and says so)
            return self.search(None, since_ms=since_ms, limit=limit, filters=filters)
        return _newest_first(best)

    def _from_kept(self, key: tuple[Filters, int], kept: _Kept, since_ms: int) -> list[Event] | None:
        """A kept answer brought up to date from the journal's tail (read directly: the block index
        need not catch up, nor sync its files, for a few lines); None when it cannot be used."""
        filters, limit = key
        try:
            with _journal_fd(self.journal.path) as fd:
                size = os.fstat(fd).st_size
                if self._owner(fd) != kept.owner or not 0 <= size - kept.end <= _TAIL_BYTES:
                    return None
                tail = os.pread(fd, size - kept.end, kept.end)
        except (OSError, JournalError):
            return None
        whole = tail.rfind(b"\n") + 1         # a line still being written is left for the next call
        best = [item for item in kept.best if item[0] >= since_ms]
        heapq.heapify(best)
        proven = [True]
        lines = _Prefilter(None, filters).lines(tail[:whole - 1]) if whole else []   # as `_search_view` reads
        _keep_best(((line, Event.from_json(line)) for line in reversed(lines)), None, since_ms, None, limit,
                   filters, best, kept.hidden, self._noting(proven))
        if proven[0]:
            self._keep(key, _Kept(kept.owner, kept.end + whole, kept.hidden, since_ms, list(best)))
        return _newest_first(best)

    def _owner(self, fd: int) -> tuple[int, int, int]:
        """The journal file open at `fd`, and the compactions so far (a rewrite may reuse an inode)."""
        stat = os.fstat(fd)
        return stat.st_dev, stat.st_ino, self.forgotten.generation()

    def _keep(self, key: tuple[Filters, int], kept: _Kept) -> None:
        """Remember `kept`, dropping the least recently used answers beyond the count or the bytes."""
        with self._kept_lock:
            self._kept[key] = kept
            self._kept.move_to_end(key)
            total = sum(k.size for k in self._kept.values())
            while self._kept and (len(self._kept) > _REMEMBERED or total > _REMEMBERED_BYTES):
                total -= self._kept.popitem(last=False)[1].size

    def _noting(self, proven: list[bool]) -> _Serve:
        """`_serve`, noting in `proven[0]` when a line served was not proven by the write path."""
        check = self.journal.proof.proven

        def serve(line: bytes | str, event: Event) -> Event:
            raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogateescape")
            if check(raw):
                return event
            proven[0] = False
            return self.journal.proof.served(raw, event)

        return serve

    def older_match(self, query: str, before_ms: int, filters: Filters = _ANY) -> int | None:
        """The timestamp (ms) of a match older than `before_ms`, as far as the block index answers
        cheaply: its trigram bitmaps pick the candidate blocks, and at most `_OLDER_BLOCKS` of them
        are read to confirm a real match (redaction, forgetting and filters applied as in `search`).
        None: no match found that way (there may still be one; nothing more is read to find out)."""
        folded = query.casefold()
        if not self.journal.path.exists():
            return None
        best: _Best = []
        hidden = self.forgotten.hashes()
        try:
            with self.index.snapshot() as view:
                hashes = query_hashes(folded.encode("utf-8", "surrogatepass"))
                blocks = itertools.islice(view.candidates(hashes, -FAR, before_ms - 1), _OLDER_BLOCKS)
                with _journal_fd(self.journal.path) as fd:
                    for block in blocks:
                        if best and view.maxs[block] + 1 < best[0][0]:
                            break   # newest-max first: no later block holds a newer match
                        start, end = view.block_range(block)
                        lines = os.pread(fd, end - start, start).split(b"\n")
                        _keep_best(((line, Event.from_json(line)) for line in reversed(lines)), folded, -FAR,
                                   before_ms - 1, 1, filters, best, hidden, self._serve)
        except OSError:   # no usable index: the answer would cost a scan of the journal
            return None
        return best[0][0] if best else None

    def _serve(self, line: bytes | str, event: Event) -> Event:
        """A raw hit as it may be served: a line the write path did not prove is redacted (the scan
        matched its raw bytes); `_keep_best` then matches the query and filters again on the result."""
        raw = line if isinstance(line, bytes) else line.encode("utf-8", "surrogateescape")
        return self.journal.proof.served(raw, event)

    def catch_up(self, on_progress: Callable[[int], None] | None = None) -> CatchUp:
        """Bring the index up to the journal's end now (after a bulk import, at daemon start)."""
        if not self.journal.path.exists():
            return CatchUp(0, 0, 0, False, 0.0)
        return self.index.catch_up(on_progress)

    def index_state(self) -> dict[str, Any]:
        """`{path, blocks, indexedBytes, lagBytes, sizeBytes}` of the block index (for status)."""
        return self.index.state()

    def close(self) -> None:
        self.index.close()

    # ---- indexed path -------------------------------------------------------------------------
    def _search_view(self, view: BlockSnapshot, folded: str | None, since_ms: int, until_ms: int | None, limit: int,
                     filters: Filters, best: _Best, hidden: frozenset[bytes], serve: _Serve | None = None) -> None:
        hashes = query_hashes(folded.encode("utf-8", "surrogatepass")) if folded else set()
        blocks = view.candidates(hashes, since_ms, until_ms)
        prefilter = _Prefilter(folded, filters)
        maxs = view.maxs
        with _journal_fd(self.journal.path) as fd:
            stat = os.fstat(fd)
            owner = (stat.st_dev, stat.st_ino)
            for block in blocks:
                # blocks come newest-max first: once the oldest kept hit beats this block, it beats the rest
                if len(best) >= limit and maxs[block] + 1 < best[0][0]:
                    break
                start, end = view.block_range(block)
                if prefilter.utf8 is not None:
                    lines = prefilter.folded_lines(fd, start, end, self.folds, owner, view.block_key(block))
                else:
                    lines = prefilter.lines(os.pread(fd, end - start, start))
                # a block's lines newest last, so read backwards: once `best` is full, few later
                # lines beat its oldest, and only those pay for the proof check
                _keep_best(((line, Event.from_json(line)) for line in reversed(lines)), folded, since_ms,
                           until_ms, limit, filters, best, hidden, serve or self._serve)

    # ---- fallback: scan everything ------------------------------------------------------------
    def _scan(self, folded: str | None) -> Iterator[tuple[str, Event | None]]:
        for chunk in self._chunks():
            text = chunk.decode("utf-8", "surrogateescape")
            if folded is not None and folded not in text.casefold() and "\\u" not in text:
                continue
            for line in reversed(text.split("\n")):   # newest last: see `_search_view`
                yield line, Event.from_json(line)

    def _chunks(self) -> Iterator[bytes]:
        """The journal in large pieces that end on a line boundary; a partial tail is left out."""
        try:
            handle = self.journal.path.open("rb")
        except FileNotFoundError:
            return
        except OSError as exc:
            raise JournalError(f"{self.journal.path}: cannot read the journal: {exc.strerror}") from None
        with handle:
            for _, piece in line_chunks(handle, 0, _CHUNK):
                yield piece


def _newest_first(best: _Best) -> list[Event]:
    best.sort(key=lambda item: (item[0], item[1]), reverse=True)
    return [event for _, _, event in best]


@contextmanager
def _journal_fd(path: Path) -> Iterator[int]:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as exc:
        raise JournalError(f"{path}: cannot read the journal: {exc.strerror}") from None
    try:
        yield fd
    finally:
        os.close(fd)


def _keep_best(events: Iterable[tuple[bytes | str, Event | None]], folded: str | None, since_ms: int,
               until_ms: int | None, limit: int, filters: Filters, best: _Best,
               hidden: frozenset[bytes], serve: _Serve) -> None:
    """Push matching events into the min-heap `best` of the `limit` newest (ts, id); forgotten ones never.

    The scan matches raw lines; a hit that would enter the heap is then `serve`d (a line the write
    path did not prove comes back redacted) and must match again as served. So an unproven line
    takes a place among the `limit` only if the query matches what may be shown of it, and the scan
    goes on to fill the limit otherwise: the answer does not depend on what redaction removed.
    Only such hits pay for the proof check (one HMAC), not every line scanned."""
    for line, event in events:
        if event is None:
            continue
        if event.ts_ms < since_ms or (until_ms is not None and event.ts_ms > until_ms):
            continue
        if not filters.match(event):
            continue
        if folded is not None and folded not in event.content.casefold():
            continue
        if hidden and forget_hash(event.id) in hidden:   # the raw id: what a forget hashes and compaction drops
            continue
        if len(best) >= limit and (event.ts_ms, event.id) <= best[0][:2]:
            continue
        served = serve(line, event)
        if served is not event and (not filters.match(served) or (
                folded is not None and folded not in served.content.casefold())):
            continue
        event = served
        item = (event.ts_ms, event.id, event)
        if len(best) < limit:
            heapq.heappush(best, item)
        elif item[:2] > best[0][:2]:
            heapq.heapreplace(best, item)


class _Prefilter:
    """Cheap, safe rejection of lines before parsing, by finding the query in the raw block.

    A line whose content contains the folded query has the query in its own casefolded raw text,
    unless the query holds a character a writer may escape or the line uses `\\u` escapes (always
    parsed). For an ASCII query the raw bytes are lowered instead of decoded and casefolded,
    and lines with non-ASCII bytes (`ß` folds to `ss`) are always parsed. Filter values are
    looked for as JSON strings the same way. Line numbers agree between bytes, text and folded
    text: none of these steps makes or removes a newline.
    """

    def __init__(self, folded: str | None, filters: Filters) -> None:
        self.query = folded if folded and not (set(folded) & _ESCAPABLE) else None
        self.ascii = self.query.encode("ascii") if self.query is not None and self.query.isascii() else None
        self.utf8 = _utf8(self.query)
        self.needles = [orjson.dumps(value) for name, value in filters.to_dict().items()
                        if value != _DEFAULTS.get(name) and not set(value) & _ESCAPABLE]
        # writers use `\\u` only for non-ASCII and control characters: it cannot hide an ASCII
        # filter value, only content the query may match after decoding and folding
        self.escapes_matter = self.query is not None or any(not n.isascii() for n in self.needles)

    def folded_lines(self, fd: int, start: int, end: int, cache: FoldCache, owner: Any, key: Any) -> list[bytes]:
        """`lines`, finding the query in the block's casefolded copy (cached: foldcache.py)."""
        assert self.utf8 is not None
        data: bytes | None = None
        folded = cache.get(owner, key)
        if folded is None:
            data = os.pread(fd, end - start, start)
            folded = fold_block(data)
            cache.put(owner, key, folded)
        keep = _line_numbers(folded, self.utf8, b"\n")
        if keep and self.needles:
            data = data if data is not None else os.pread(fd, end - start, start)
            escaped = _line_numbers(data, b"\\u", b"\n") if b"\\u" in data else set()
            for needle in self.needles:  # a non-ASCII value may hide behind `\\u` escapes: parse those
                keep &= _line_numbers(data, needle, b"\n") | (escaped if not needle.isascii() else set())
        # no `\\u` rule here: a folded line holds its decoded content too (foldcache.fold_block)
        if not keep:
            return []
        lines = (data if data is not None else os.pread(fd, end - start, start)).split(b"\n")
        return [lines[i] for i in keep if i < len(lines)]

    def lines(self, data: bytes) -> list[bytes]:
        if self.query is None and not self.needles:
            return data.split(b"\n")
        keep: set[int] | None = None
        lines: list[bytes] | None = None
        if self.ascii is not None:
            keep = _line_numbers(data.lower(), self.ascii, b"\n")
            if not data.isascii():
                lines = data.split(b"\n")
                query = self.ascii.decode()
                keep.update(i for i, line in enumerate(lines) if not line.isascii()
                            and query in line.decode("utf-8", "surrogateescape").casefold())
        elif self.query is not None:
            keep = _line_numbers(data.decode("utf-8", "surrogateescape").casefold(), self.query, "\n")
        for needle in self.needles:
            found = _line_numbers(data, needle, b"\n")
            keep = found if keep is None else keep & found
        assert keep is not None
        if self.escapes_matter and b"\\u" in data:
            keep |= _line_numbers(data, b"\\u", b"\n")
        if not keep:
            return []
        if lines is None:
            lines = data.split(b"\n")
        return [lines[i] for i in keep]


def _utf8(query: str | None) -> bytes | None:
    try:
        return query.encode("utf-8") if query else None
    except UnicodeEncodeError:  # a lone surrogate: the per-block path handles it
        return None


def _line_numbers(haystack: Any, needle: Any, newline: Any) -> set[int]:
    """Numbers of the lines of `haystack` (bytes or str) that contain `needle` (no newline in it)."""
    out: set[int] = set()
    pos = haystack.find(needle)
    line = counted = 0
    while pos >= 0:
        line += haystack.count(newline, counted, pos)
        counted = pos
        out.add(line)
        nl = haystack.find(newline, pos)
        if nl < 0:
            break
        pos = haystack.find(needle, nl + 1)
    return out
