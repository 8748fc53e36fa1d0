"""Ranked search by a remote embedder's vectors, cached on disk per model and following the journal
by byte offset (`EmbeddingView`), and the calibrated score shown for an embedder's cosine.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from urchin.event import Event
from urchin.fileio import write_private
from urchin.journal import Journal
from urchin.search.cosine_view import _CATCH_UP_BYTES
from urchin.search.embedder import Embedder
from urchin.search.query import Filters, Hit
from urchin.search.ranked import constraints
from urchin.search.score import EMBEDDER, Z_SPAN, Evidence, z_unit
from urchin.search.vectors import BACKGROUND_CHUNK, CacheBusy, VectorCache, embed_events
from urchin.tombstones import ForgetLog

__all__ = ["EmbeddingView", "embedder_evidence", "embedder_explain", "embedder_score"]

log = logging.getLogger("urchin.search.semantic")   # the name these lines logged under before the split

_PENDING_CHUNK = 64 << 10   # the first read of `EmbeddingView.pending` (a query's): then 4x each time
# Beside the daemon's embedder loop a query embeds at most this many new events itself (one small
# request); a longer backlog is the loop's, which sends BACKGROUND_CHUNK texts per request.
INLINE_BESIDE_LOOP = 16


class EmbeddingView:
    """Vectors from a remote embedder, cached on disk per model and following the journal.

    Each event is embedded once, ever (the cache is keyed by event id). A short-lived process
    embeds at most `sync_limit` missing events before answering and says how many it left for
    `urchin embed` or the daemon; the daemon calls `catch_up()` in the background.
    """

    def __init__(self, journal: Journal, home: Path, embedder: Embedder, locate: Callable[[str], Event | None],
                 sync_limit: int = 2000) -> None:
        self.journal = journal
        self.home = home
        self.embedder = embedder
        self.locate = locate
        self.sync_limit = sync_limit
        # The daemon's embedder loop follows the journal (`SemanticViews.embed_in_background`): queries
        # then leave backlogs to it, and it embeds BACKGROUND_CHUNK texts per request.
        self.background = False
        self._cache: VectorCache | None = None
        self._lock = threading.Lock()
        self._forgotten = ForgetLog(journal)
        self.backlog = 0

    @property
    def mode(self) -> str:
        return f"embedder ({self.embedder.model})"

    def cache(self) -> VectorCache:
        if self._cache is None:
            self._cache = VectorCache(self.home, self.embedder.fingerprint, self.embedder.dim).open()
        return self._cache

    def _offset_file(self) -> Path:
        return self.cache().path / "journal.offset"

    def pending(self, limit: int | None = None) -> tuple[list[Event], int]:
        """Events the cache lacks (oldest first, at most `limit`), and the offset they reach. Lines are
        read in growing chunks and only the ids parsed, but for the events missing: a query asks for a
        few, and a backlog's first ones are near its start."""
        cache = self.cache()
        cache.refresh()      # another process's appends, or its drop (a compaction's)
        start = self._checked_to()
        missing: list[Event] = []
        end, chunk = start, _PENDING_CHUNK
        while True:
            result = self.journal.read_from(end, chunk)
            if result.next_offset == end:
                return missing, end
            for offset, line in result.lines:
                try:
                    record = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                event_id = record.get("id") if isinstance(record, dict) else None
                if isinstance(event_id, str) and event_id in cache:
                    continue
                event = self.journal.event(line)     # what is embedded (and cached) is redacted
                if event is not None and event.id not in cache:
                    missing.append(event)
                    if limit is not None and len(missing) >= limit:
                        return missing, offset + len(line) + 1
            end, chunk = result.next_offset, min(chunk * 4, _CATCH_UP_BYTES)

    def _checked_to(self) -> int:
        """Where `pending` starts: `journal.offset` holds "OFFSET GENERATION", the journal offset up to
        which every event is cached, in the journal its forget generation names. Another generation
        (a compaction rewrote the journal since), a journal shorter than the offset (replaced or
        repaired), or no file: every event is checked again."""
        try:
            offset, _, generation = self._offset_file().read_text("ascii").partition(" ")
            start, seen = int(offset or 0), int(generation or 0)
        except (OSError, ValueError):      # none, not a file, not ASCII digits: check every event
            return 0
        if seen != self._forgotten.generation() or not 0 < start <= self.journal.size():
            return 0
        try:      # the start of a line, or the journal is not the one the record was made in
            with self.journal.path.open("rb") as handle:
                handle.seek(start - 1)
                return start if handle.read(1) == b"\n" else 0
        except OSError:
            return 0

    def _checked(self, end: int, generation: int, stamp: tuple[int, ...], wait: bool) -> None:
        """Record that every event before `end` is cached, as `pending` found in the journal of forget
        `generation` while the cache had `stamp`. Under the writers' lock, and only if no drop came
        between: a drop takes vectors out (rewritten lines) and resets the record after it."""
        cache = self.cache()
        with contextlib.suppress(CacheBusy), cache.exclusive(wait):
            if cache.stamp() == stamp:
                try:
                    write_private(self._offset_file(), f"{end} {generation}".encode(), sync=False)
                except OSError as exc:   # e.g. a folder in its place: the next pass checks every event
                    log.warning("%s not written (%s); every event is checked again", self._offset_file(), exc)

    def catch_up(self, limit: int | None = None, progress: Callable[[int], None] | None = None,
                 wait: bool = True) -> int:
        """Embed what the cache lacks (up to `limit` events); returns how many were embedded.
        `wait=False`: `CacheBusy` rather than wait for another writer of the cache (a query)."""
        with self._lock:
            return self._catch_up(limit, progress, wait)

    def _catch_up(self, limit: int | None, progress: Callable[[int], None] | None, wait: bool) -> int:
        generation, stamp = self._forgotten.generation(), self.cache().stamp()
        events, end = self.pending(limit)
        chunk = BACKGROUND_CHUNK if self.background else 512
        added = embed_events(self.embedder, self.cache(), events, chunk=chunk, progress=progress, wait=wait,
                             keep=self._forgotten.keep_current(generation)) if events else 0
        self._checked(end, generation, stamp, wait)
        return added

    def _embed_for_query(self) -> bool:
        """What a query embeds before it answers, never waiting for anyone: not for the embedder loop
        (this view's lock), nor for another writer of the cache (the index process mid-request). A
        process on its own (the CLI) embeds up to `sync_limit` events; beside the daemon's loop a query
        embeds a few new events (one small request), and none of a backlog: the loop is working through
        it, and the query answers from what is cached. Returns whether events are left not embedded."""
        if not self._lock.acquire(blocking=False):
            return bool(self.pending(1)[0])
        try:
            if not self.background:
                with contextlib.suppress(CacheBusy):
                    self._catch_up(self.sync_limit, None, wait=False)
                return bool(self.pending(1)[0])
            generation, stamp = self._forgotten.generation(), self.cache().stamp()
            missing, end = self.pending(INLINE_BESIDE_LOOP + 1)
            if len(missing) > INLINE_BESIDE_LOOP:
                return True
            if missing:     # (none: the offset is the loop's to move, a query writes nothing)
                try:
                    embed_events(self.embedder, self.cache(), missing, wait=False,
                                 keep=self._forgotten.keep_current(generation))
                except CacheBusy:
                    return True
                self._checked(end, generation, stamp, wait=False)
            return False
        finally:
            self._lock.release()

    def search(self, query: str, *, since_ms: int | None, limit: int, filters: Filters,
               until_ms: int | None = None, explain: bool = False) -> tuple[list[Hit], list[str]]:
        notes: list[str] = []
        if self._embed_for_query():
            notes.append("some events are not embedded yet and were not searched: "
                         + ("the daemon is embedding them" if self.background else "run `urchin embed`"))
        query, holds = constraints(query)
        vector = self.embedder.embed_query(query)
        events: dict[str, Event | None] = {}

        def accept(event_id: str) -> bool:
            if event_id not in events:
                events[event_id] = self.locate(event_id)
            event = events[event_id]
            return event is not None and filters.match(event) and (holds is None or holds(event))

        cache = self.cache()
        ranked = cache.search(vector, since_ms=since_ms, until_ms=until_ms, accept=accept, limit=limit)
        # The score shown is the cosine measured against the query's own background (score.EMBEDDER):
        # a per-query increasing map of the cosine, so it keeps the cosine's order and ties.
        mean, spread = cache.background(vector)
        hits = [Hit(event, embedder_score(cosine, mean, spread),
                    embedder_explain(cosine, mean, spread) if explain else None)
                for event_id, cosine in ranked if (event := events.get(event_id)) is not None]
        return hits, notes



def embedder_evidence(cosine: float, mean: float, spread: float) -> Evidence:
    """A cosine's evidence for score.EMBEDDER: its z-score against the query's background, in 0-1."""
    return Evidence(share=0.0, every=False, dense=z_unit((cosine - mean) / spread))


def embedder_score(cosine: float, mean: float, spread: float) -> float:
    """The calibrated score `urchin semantic` shows for an embedder's cosine (score.EMBEDDER)."""
    return EMBEDDER.score(embedder_evidence(cosine, mean, spread))


def embedder_explain(cosine: float, mean: float, spread: float) -> dict[str, Any]:
    """How an embedder hit's score was made: its cosine, the query's background, and score.EMBEDDER's parts."""
    out = EMBEDDER.explain(embedder_evidence(cosine, mean, spread))
    out["cosine"] = {"value": round(cosine, 6), "backgroundMean": round(mean, 6), "backgroundSpread": round(spread, 6),
                     "z": round((cosine - mean) / spread, 6), "dense": f"z / {Z_SPAN:g}, within 0-1"}
    return out
