"""The feeder: follows the journal from a cursor kept in the database, one transaction per batch.

Rows and the cursor move together, upserts are idempotent, and a database outage is retried with
backoff from the last committed cursor, so nothing is lost or duplicated. Several devices may feed
one database; each has its own cursor per journal. Forgotten events are never fed; `sync_forgotten`
deletes their rows and carries the cursor across a compaction (the forget log maps old offsets).
"""

from __future__ import annotations

import logging
import threading
import time
import zlib
from bisect import bisect_right
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

from urchin.collectors.origin import origin_of
from urchin.errors import DatabaseError, EmbedderError
from urchin.event import Event
from urchin.hybrid.base import UNIT_ROWS, ChunkRow, Embedder, GaveWay, split_key
from urchin.hybrid.sparse import doc_columns
from urchin.journal import Journal
from urchin.search.vectors import BACKGROUND_CHUNK, CacheBusy, VectorCache, embed_events
from urchin.tombstones import ForgetLog, forget_hash

__all__ = ["Feeder", "FeedReport", "event_row", "BATCH_BYTES", "BULK_BYTES", "GIVE_WAY_BATCH_BYTES",
           "GIVE_WAY_PIECE_BYTES", "ASKED_S"]

log = logging.getLogger("urchin.hybrid.feeder")
BATCH_BYTES = 2 * 1024 * 1024
# A feed that gives way to queries (the daemon's) writes smaller batches while they come (one answered
# in the last ASKED_S): each batch's INSERT is one statement of the server's that a query arriving
# meanwhile cannot make wait (~500 rows, tens of ms). Otherwise it writes BATCH_BYTES: the small ones all
# the way cost a first feed at 1M ~30% of its rate (4,924 against 7,154 events/s, quiet; a commit each).
GIVE_WAY_BATCH_BYTES = 256 * 1024
# ... and writes each in pieces of GIVE_WAY_PIECE_BYTES of journal (~130 rows), a transaction each: the
# INSERT of a piece is the longest stretch of the server's work nothing pauses (~500 rows of 256 KiB took
# 50-100 ms of a core beside the queries; the bench's 2-3 ms cells fit inside one, 11 calls and all).
GIVE_WAY_PIECE_BYTES = 64 * 1024
ASKED_S = 5.0
HEAD_BYTES = 64 * 1024      # the journal's first line (up to this) fingerprints it (see _check_replaced)
EMBED_BATCH = 64
# A feed with at least this much journal to go is a backfill: the backend may drop its GIN indexes and
# build them once at the end (PgWriter.begin_bulk), when more rows are coming than it holds
# (rows estimated at AVG_EVENT_BYTES of journal each).
BULK_BYTES = 32 * 1024 * 1024
AVG_EVENT_BYTES = 512
Progress = Callable[[int, int], None]      # (bytes done, bytes total)
OnSkip = Callable[[str, str], None]        # (event id, why the database refused its row)
MAX_SKIP_NOTES = 10


@dataclass(slots=True)
class FeedReport:
    events: int = 0          # events read from the journal in this run
    inserted: int = 0        # rows that were new to the index
    offset: int = 0          # the cursor after the run
    retries: int = 0
    embedded: int = 0        # rows given a vector for the embedder's model
    reused: int = 0          # ... of which events whose vector the vector cache already held (no request)
    skipped: int = 0         # rows the database refused: skipped, counted, never retried forever
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"events": self.events, "inserted": self.inserted, "offset": self.offset, "retries": self.retries,
                "embedded": self.embedded, "reused": self.reused, "skipped": self.skipped, "notes": self.notes}


def _clean(text: str | None) -> str | None:
    # PostgreSQL text cannot hold NUL; the journal (JSON) can.
    return text.replace("\x00", "\ufffd") if text and "\x00" in text else text


def _occurred_at(event: Event) -> datetime:
    # From the canonical text, exactly: milliseconds through a float are off by microseconds in late years.
    try:
        return datetime.fromisoformat(event.timestamp[:-1] + "+00:00")
    except ValueError:
        return datetime.fromtimestamp(event.ts_ms / 1000, UTC)


def event_row(event: Event, offset: int) -> ChunkRow:
    """An event's row; a collected one keeps its upstream citation in the columns a file chunk uses
    for its own (path, start_line, end_line, content_hash), which are empty for events otherwise."""
    content = _clean(event.content) or ""
    title = _clean(event.title)
    terms, tvec = doc_columns(f"{title or ''}\n{content}\n{event.source}")
    actor = event.actor or {}
    origin = origin_of(event.meta)
    return ChunkRow(
        chunk_id=event.id, doc_id=event.id, source=event.source, kind=event.kind, content=content,
        occurred_at=_occurred_at(event), workspace=_clean(event.workspace),
        session=_clean(event.session), title=title, tags=[t for t in (_clean(t) for t in event.tags) if t],
        account=_clean(str(actor["account"])) if actor.get("account") else None,
        device=_clean(str(actor["device"])) if actor.get("device") else None,
        journal_offset=offset, terms=terms, tvec=tvec,
        path=origin.path if origin else None, start_line=origin.first if origin else None,
        end_line=origin.last if origin else None, content_hash=origin.hash if origin else None,
    )


class Feeder:
    def __init__(self, backend: Any, journal: Journal, device: str, *, embedder: Embedder | None = None,
                 batch_bytes: int = BATCH_BYTES, retry_for: float | None = 60.0,
                 sleep: Callable[[float], None] = time.sleep, on_skip: OnSkip | None = None,
                 bulk_bytes: int | None = BULK_BYTES, wait: bool = True, vectors_home: Path | None = None,
                 give_way: Callable[[], object] | None = None, asked: Callable[[float], bool] | None = None) -> None:
        """`wait=False`: a query's inline catch-up, which never waits for another feeder's locks (the
        backend raises IndexBusyError) and never takes the backfill path. `vectors_home`: the home whose
        vector cache (`urchin semantic`'s, filled by the daemon's embedder loop too) holds the events'
        vectors for the embedder's model: an event is embedded once, for both."""
        self.backend = backend
        self.journal = journal
        self.device = device
        self.key = str(journal.path)
        self.embedder = embedder
        self.batch_bytes = batch_bytes
        self.bulk_bytes = bulk_bytes if wait else None     # None: never the backfill path
        self.wait = wait
        self.retry_for = retry_for           # None: retry outages forever (the daemon)
        self._sleep = sleep
        self._on_skip = on_skip
        self.forgotten = ForgetLog(journal)
        self.vectors_home = vectors_home
        self._vectors: VectorCache | None = None
        self.give_way = give_way
        self.asked = asked      # whether a query was answered in the last so many seconds: smaller batches
        self._mark: int | None = None   # the forget generation mark this run's offsets refer to (run_once)

    def sync_forgotten(self, report: FeedReport | None = None) -> int:
        """Delete rows of events forgotten since the last sync, and move the cursor onto a compacted
        journal (mapped through the forget log). Cheap when nothing was forgotten: one `stat`."""
        log = self.forgotten
        if not log.path.exists() or not hasattr(self.backend, "marks"):
            return 0
        report = report or FeedReport()
        cursor, generation, applied = self._retry(lambda: self.backend.marks(self.device, self.key), report)
        current, count = log.generation(), log.forget_count()
        if generation >= current and applied >= count:
            return 0
        hashes = set(log.hashes_after(applied))
        moves = None
        if generation < current:
            target = cursor
            for done in log.compactions_since(generation):
                rewound = [old for old, _, new_len in done.edits if new_len]
                target = done.map_offset(target)
                if rewound:  # rewritten lines (redaction): drop their rows, feed them again
                    hashes |= done.replaced
                    target = min(target, done.map_offset(rewound[0]))
            moves = (cursor, target)
        return int(self._retry(lambda: self.backend.apply_forget(self.device, self.key, sorted(hashes), moves,
                                                                 current, count), report))

    def run_once(self, on_progress: Progress | None = None, stop: threading.Event | None = None) -> FeedReport:
        """Feed everything the journal holds now; return when caught up.

        The next batch is read and turned into rows on a worker thread while the database writes the
        current one (the driver waits without the GIL), so Python and PostgreSQL work side by side.
        """
        report = FeedReport()
        forgets = self.forgotten.forget_count()
        self.sync_forgotten(report)
        generation = self.forgotten.generation()
        offset = self._cursor(report)
        total = self.journal.size()
        offset = self._check_replaced(offset, total, generation, report)
        bulk = self._begin_bulk(total - offset, report)
        try:
            with ThreadPoolExecutor(1, thread_name_prefix="urchin-feed") as pool:
                pending = pool.submit(self._prepare, offset)
                while not (stop and stop.is_set()):
                    start, end, rows = pending.result()
                    if end == start or self.forgotten.generation() != generation:
                        break  # caught up, or the journal was compacted under us: the next run maps the cursor
                    pending = pool.submit(self._prepare, end)
                    try:
                        inserted = self._write_pieces(rows, start, end, report)
                    except DatabaseError as exc:
                        if "moved by another feeder" not in exc.message:
                            raise
                        pending.result()
                        offset = self._cursor(report)
                        pending = pool.submit(self._prepare, offset)
                        continue
                    report.events += len(rows)
                    report.inserted += inserted
                    offset = end
                    if on_progress:
                        on_progress(offset, max(total, offset))
        finally:
            if bulk and not (stop and stop.is_set()):     # stopping (daemon exit): the next feed builds them
                self._end_bulk(report)
        report.offset = offset
        if self.forgotten.forget_count() != forgets:
            # forgotten while this run fed: a batch read before the tombstone may hold them
            late = sorted(self.forgotten.hashes_after(forgets))
            self._retry(lambda: self.backend.apply_forget(self.device, self.key, late, None, 0, 0), report)
            self.sync_forgotten(report)
        if self.embedder is not None:
            try:
                report.embedded = self.embed_pending(report, stop)
            except EmbedderError as exc:       # rows stay pending; the next run embeds them
                report.notes.append(f"embedding skipped: {exc.message}")
        return report

    def _begin_bulk(self, pending: int, report: FeedReport) -> bool:
        """Before a feed: build GIN indexes a dead backfill left dropped; for a backfill, let the backend
        drop them (it decides whether that pays and is safe). Returns whether this feed is a backfill.
        Never on a query's inline catch-up (`wait` False): the GIN builds and the backfill's end VACUUM
        (ANALYZE) of every row are a feed's work, not to be done before an answer."""
        if not hasattr(self.backend, "begin_bulk") or not self.wait:
            return False
        self._retry(self.backend.restore_indexes, report)
        if self.bulk_bytes is None or pending < self.bulk_bytes:
            return False
        bulk = bool(self._retry(partial(self.backend.begin_bulk, pending // AVG_EVENT_BYTES), report))
        if bulk:
            log.info("index feed: backfill of %d journal bytes, GIN indexes built at its end", pending)
        return bulk

    def _end_bulk(self, report: FeedReport) -> None:
        started = time.monotonic()
        try:
            built = self._retry(self.backend.restore_indexes, report)
        except DatabaseError as exc:     # the next feed (or the next owner's) builds them
            log.warning("index feed: GIN indexes not rebuilt after the backfill (%s)", exc.message)
            return
        log.info("index feed: built %s in %.1f s", ", ".join(built) or "nothing", time.monotonic() - started)

    def _cursor(self, report: FeedReport) -> int:
        """The cursor, and the forget generation mark its offsets refer to (`_mark`, see write_batch)."""
        if not hasattr(self.backend, "marks"):
            return int(self._retry(lambda: self.backend.cursor(self.device, self.key), report))
        cursor, self._mark, _ = self._retry(lambda: self.backend.marks(self.device, self.key), report)
        return int(cursor)

    def _write_pieces(self, rows: list[ChunkRow], start: int, end: int, report: FeedReport) -> int:
        """A batch written while requests come goes in pieces of GIVE_WAY_PIECE_BYTES of journal, a
        transaction each with the cursor at the piece's end: the INSERT of a batch's rows is one stretch
        of the server's work a query cannot make wait (a large batch read before the first query came
        holds ~4,000 rows: seconds on a loaded machine). A large batch begun while none came is given up
        when one comes while it is copied (rolled back: nothing committed) and written in pieces too.
        Returns how many rows were new."""
        inserted = 0
        while True:
            large = end - start > GIVE_WAY_PIECE_BYTES
            if large and self._giving_way():
                # the piece's rows end where the next one's line starts, within GIVE_WAY_PIECE_BYTES (one row at least)
                cut = max(bisect_right(rows, start + GIVE_WAY_PIECE_BYTES, key=_offset) - 1, 1)
                if cut >= len(rows):      # one row longer than a piece: as it is (giving it up would repeat)
                    return inserted + self._write(rows, start, end, report)
                piece_end = _offset(rows[cut])          # (the lines between its rows held no row to write)
                inserted += self._write(rows[:cut], start, piece_end, report)
                rows, start = rows[cut:], piece_end
                continue
            try:
                return inserted + self._write(rows, start, end, report, large)
            except GaveWay:
                continue

    def _giving_way(self) -> bool:
        """This feed gives way to a daemon's requests and one came lately (ASKED_S): small batches."""
        return self.give_way is not None and (self.asked is None or self.asked(ASKED_S))

    def _between_large(self) -> None:
        """Between the units of a large batch begun while no request came: one came, give it up."""
        assert self.give_way is not None
        self.give_way()
        if self._giving_way():
            raise GaveWay

    def _requested(self) -> bool:
        """A request of the daemon's is being answered now (or ended within the last millisecond)."""
        return self.asked is not None and self.asked(0.001)

    def _write(self, rows: list[ChunkRow], start: int, end: int, report: FeedReport, large: bool = False) -> int:
        """One batch in one transaction; when the database refuses it (not an outage: a value it
        cannot hold), each row on its own, skipping and counting the refused ones, so one row can
        never stop the feed. `large`: given up (GaveWay) if requests come while it is copied or inserted."""
        refused = self.backend.refused_errors
        large = large and self.give_way is not None
        try:
            return int(self._retry(partial(self.backend.write_batch, rows, self.device, self.key, start, end,
                                           self.wait, self._between_large if large else self.give_way, self._mark,
                                           self._requested if large else None), report))
        except refused:
            if not rows:
                raise
        inserted = 0
        for row in rows:
            try:
                inserted += self._retry(partial(self.backend.write_batch, [row], self.device, self.key, start, start,
                                                self.wait, None, self._mark), report)
            except refused as exc:
                self._skip(row, exc, report)
        return inserted + int(self._retry(partial(self.backend.write_batch, [], self.device, self.key, start, end,
                                                  self.wait, None, self._mark), report))

    def _skip(self, row: ChunkRow, exc: BaseException, report: FeedReport) -> None:
        text = str(exc).strip()
        reason = text.splitlines()[0][:200] if text else type(exc).__name__
        report.skipped += 1
        log.warning("index feed: event %r skipped, the database refused it: %s", row.chunk_id[:80], reason)
        if len(report.notes) < MAX_SKIP_NOTES:
            report.notes.append(f"event {row.chunk_id[:80]!r} skipped: the database refused it ({reason})")
        if self._on_skip is not None:
            self._on_skip(row.chunk_id, reason)

    def _check_replaced(self, offset: int, total: int, generation: int, report: FeedReport) -> int:
        """The cursor to feed from: 0 when the journal was replaced (or truncated) under the cursor.

        A journal shorter than the cursor, or whose first line changed while no compaction (forget)
        happened since the head was recorded, is another file: it is fed again from 0. Upserts are
        idempotent (keyed by event id), so rows already stored are not duplicated.
        """
        if not hasattr(self.backend, "journal_head"):
            return offset
        head = self._head()
        seen = self._retry(lambda: self.backend.journal_head(self.device, self.key), report)
        replaced = offset > total or (seen is not None and seen[0] not in (0, head) and seen[1] == generation
                                      and offset > 0)
        if replaced:
            report.notes.append(f"journal {self.key} was replaced or truncated (cursor {offset}, size {total}): "
                                "fed again from the start")
            try:
                self._retry(partial(self.backend.write_batch, [], self.device, self.key, offset, 0), report)
                offset = 0
            except DatabaseError as exc:     # another process of this device moved it first (to 0, or on)
                if "moved by another feeder" not in exc.message:
                    raise
                offset = self._retry(lambda: self.backend.cursor(self.device, self.key), report)
        if seen != (head, generation):
            self._retry(partial(self.backend.set_journal_head, self.device, self.key, head, generation), report)
        return offset

    def _head(self) -> int:
        """A fingerprint of the journal's first line (crc32), or 0 while it is empty."""
        first = self.journal.read_from(0, HEAD_BYTES)
        return zlib.crc32(first.lines[0][1]) if first.lines else 0

    def _prepare(self, offset: int) -> tuple[int, int, list[ChunkRow]]:
        size = min(self.batch_bytes, GIVE_WAY_BATCH_BYTES) if self._giving_way() else self.batch_bytes
        result = self.journal.read_from(offset, size)
        return offset, result.next_offset, _rows(result.lines, self.forgotten.hashes(), self.device, self.journal.event,
                                                 self.give_way)

    def follow(self, stop: threading.Event, poll_s: float = 0.5, on_progress: Progress | None = None) -> None:
        """Feed until `stop` is set (the daemon's loop)."""
        while not stop.is_set():
            self.run_once(on_progress, stop)
            stop.wait(poll_s)

    def embed_pending(self, report: FeedReport, stop: threading.Event | None = None) -> int:
        """Embed the rows that have no vector for the current model (new rows, or all after a switch)."""
        assert self.embedder is not None
        model, done = self.embedder.fingerprint, 0
        self._retry(lambda: self.backend.ensure_model(model, self.embedder.dim), report)  # type: ignore[union-attr]
        while not (stop and stop.is_set()):
            generation = self.forgotten.generation()     # the rows' text is this journal generation's
            todo = self._retry(lambda: self.backend.pending_embeddings(model, EMBED_BATCH, self.device), report)
            if not todo:
                break
            items = self._vectors_for(todo, report, generation)
            self._retry(partial(self.backend.write_embeddings, model, items), report)
            done += len(items)
        return done

    def _vectors_for(self, todo: Sequence[tuple[str, str, bool, datetime]], report: FeedReport,
                     generation: int) -> list[tuple[str, Any]]:
        """A vector for each pending row. An event's comes from the vector cache, embedded into it first
        when missing (under the cache's writers' lock, so the daemon's embedder loop does not embed it
        again); a file chunk's from the embedder. Rows read before a compaction of forget `generation`
        are embedded for the index only, never into the cache: their text may be a redacted line's old
        one (the rows are deleted and fed again)."""
        assert self.embedder is not None
        cache = self._vector_cache()
        # `todo` is keyed by chunk key (device and id); this device's events are in the cache by id
        ids = {key: split_key(key)[1] for key, _, is_event, _ in todo if is_event}
        events = [_Embeddable(ids[key], text, _ms(at)) for key, text, is_event, at in todo if is_event]
        found: dict[str, Any] = {}
        if cache is not None and events:     # (an empty cache is falsy: it has a length)
            found = cache.vectors_of(e.id for e in events)
            # One small request per hold of the cache's writers' lock (a compaction's drop and the
            # embedder loop wait for it), `keep` asked under it: a vector added here is dropped with the
            # others, or never added. (A row forgotten during this run is embedded for the index as
            # before and deleted with its row.) A query's inline feed (`wait=False`) does not wait for
            # another writer: CacheBusy is an EmbedderError, so the rows stay pending.
            added = embed_events(self.embedder, cache, [e for e in events if e.id not in found],
                                 chunk=BACKGROUND_CHUNK, wait=self.wait,
                                 keep=self.forgotten.keep_current(generation))
            found.update(cache.vectors_of(e.id for e in events if e.id not in found))
            report.reused += len(found) - added
        by_key = {key: found[ids[key]] for key in ids if ids[key] in found}
        rest = [(key, text) for key, text, _, _ in todo if key not in by_key]
        vectors = [vector for i in range(0, len(rest), BACKGROUND_CHUNK)
                   for vector in self.embedder.embed([text for _, text in rest[i:i + BACKGROUND_CHUNK]])]
        by_key.update({key: vec for (key, _), vec in zip(rest, vectors, strict=True)})
        return [(key, by_key[key]) for key, _, _, _ in todo]

    def _vector_cache(self) -> VectorCache | None:
        if self.vectors_home is None or self.embedder is None:
            return None
        if self._vectors is None:
            try:
                cache = VectorCache(self.vectors_home, self.embedder.fingerprint, self.embedder.dim)
                self._vectors = cache.open(self.wait)
            except CacheBusy:          # being created by another writer: this run's rows stay pending
                raise
            except (OSError, EmbedderError) as exc:   # a read-only home, a damaged meta.json: the index
                reason = exc.message if isinstance(exc, EmbedderError) else str(exc)   # still gets its vectors
                log.warning("vector cache under %s not usable (%s); the feed embeds on its own", self.vectors_home,
                            reason)
                self.vectors_home = None
                return None
        return self._vectors

    def _retry(self, call: Callable[[], Any], report: FeedReport) -> Any:
        """Run `call`; on a database outage reconnect with backoff (0.1 s doubling to 5 s)."""
        delay, deadline = 0.1, None if self.retry_for is None else time.monotonic() + self.retry_for
        while True:
            try:
                return call()
            except self.backend.outage_errors as exc:
                if isinstance(exc, self.backend.refused_errors):
                    raise            # a value the database cannot hold is not an outage: retrying cannot help
                self.backend.reset()
                if deadline is not None and time.monotonic() + delay > deadline:
                    reason = str(exc).strip() or type(exc).__name__
                    raise DatabaseError(f"the index database is unreachable ({reason}); "
                                        f"gave up after {self.retry_for:g} s") from None
                report.retries += 1
                self._sleep(delay)
                delay = min(delay * 2, 5.0)


@dataclass(frozen=True, slots=True)
class _Embeddable:
    """A pending event row as the vector cache embeds one: its text is already title, then content."""
    id: str
    content: str
    ts_ms: int
    title: None = None


def _offset(row: ChunkRow) -> int:
    """Where an event row's line starts in the journal (every row a feed reads has one)."""
    assert row.journal_offset is not None
    return row.journal_offset


def _ms(moment: datetime) -> int:
    return int(moment.timestamp() * 1000)


def _rows(lines: Sequence[tuple[int, bytes]], hidden: frozenset[bytes], device: str | None,
          read: Callable[[bytes], Event | None], give_way: Callable[[], object] | None = None) -> list[ChunkRow]:
    """Rows of a batch; `device` (the feeding machine, whose journal holds the event) is each row's
    device: row-level security lets a feeder role write only its own device's rows. `read` is the
    journal's `event`: a line the write path did not prove is redacted before it is fed. `give_way` is
    called before each UNIT_ROWS lines."""
    rows: dict[str, ChunkRow] = {}
    for i, (offset, line) in enumerate(lines):
        if give_way is not None and not i % UNIT_ROWS:
            give_way()
        event = read(line)
        if event is not None and event.id not in rows and not (hidden and forget_hash(event.id) in hidden):
            row = event_row(event, offset)
            if device:
                row.device = device
            rows[event.id] = row
    return list(rows.values())
