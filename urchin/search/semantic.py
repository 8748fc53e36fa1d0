"""Ranked (semantic) search as views that follow the journal by byte offset.

`TokenCosineView` keeps a `TokenCosineIndex` caught up with the journal and maps its rows back to
journal offsets, so it holds no event text: hits are read back from the journal (a few `pread`s).
`EmbeddingView` does the same with a remote embedder's vectors, cached on disk per model.
"""

from __future__ import annotations

import os
import threading
from array import array
from collections.abc import Callable
from pathlib import Path

from urchin.event import Event
from urchin.journal import Journal
from urchin.search.cosine import TokenCosineIndex
from urchin.search.embedder import Embedder
from urchin.search.query import Filters, Hit
from urchin.search.vectors import VectorCache, embed_events

__all__ = ["TokenCosineView", "EmbeddingView"]

_CATCH_UP_BYTES = 16 << 20


class TokenCosineView:
    """Thread-safe: one lock serialises catch-up and queries (the index itself is not thread-safe)."""

    mode = "token-cosine"

    def __init__(self, journal: Journal) -> None:
        self.journal = journal
        self.index = TokenCosineIndex()
        self.offsets = array("q")
        self.next_offset = 0
        self._lock = threading.Lock()

    def catch_up(self) -> int:
        """Index every complete line appended since the last call; returns how many events were added."""
        with self._lock:
            return self._catch_up()

    def _catch_up(self) -> int:
        added = 0
        while True:
            result = self.journal.read_from(self.next_offset, _CATCH_UP_BYTES)
            if not result.lines:
                self.next_offset = result.next_offset
                return added
            batch: list[Event] = []
            for offset, line in result.lines:
                event = Event.from_json(line)
                if event is not None:
                    batch.append(event)
                    self.offsets.append(offset)
            self.index.add_many(batch)
            added += len(batch)
            self.next_offset = result.next_offset

    def search(self, query: str, *, since_ms: int | None, limit: int, filters: Filters,
               until_ms: int | None = None) -> list[Hit]:
        with self._lock:
            self._catch_up()
            scored = self.index.search(query, since_ms=since_ms, until_ms=until_ms, source=filters.source,
                                       workspace=filters.workspace, session=filters.session, kind=filters.kind,
                                       limit=limit)
            offsets = [self.offsets[s.row] for s in scored]
        hits = []
        for s, offset in zip(scored, offsets, strict=True):
            line = self.journal.read_line_at(offset)
            event = Event.from_json(line) if line is not None else None
            if event is not None:
                hits.append(Hit(event, s.score))
        return hits


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
        self._cache: VectorCache | None = None
        self._lock = threading.Lock()
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
        """Events the cache lacks (oldest first, at most `limit`), and the offset they reach."""
        cache = self.cache()
        try:
            start = int(self._offset_file().read_text() or 0)
        except (FileNotFoundError, ValueError):
            start = 0
        if start > self.journal.size():
            start = 0  # the journal was replaced or repaired: check every event again
        missing: list[Event] = []
        end = start
        for offset, line in self.journal.iter_lines(start):
            event = Event.from_json(line)
            end = offset + len(line) + 1
            if event is not None and event.id not in cache:
                missing.append(event)
                if limit is not None and len(missing) >= limit:
                    break
        return missing, end

    def catch_up(self, limit: int | None = None, progress: Callable[[int], None] | None = None) -> int:
        """Embed what the cache lacks (up to `limit` events); returns how many were embedded."""
        with self._lock:
            events, end = self.pending(limit)
            added = embed_events(self.embedder, self.cache(), events, progress=progress) if events else 0
            _write_private(self._offset_file(), str(end).encode())
            return added

    def search(self, query: str, *, since_ms: int | None, limit: int, filters: Filters,
               until_ms: int | None = None) -> tuple[list[Hit], list[str]]:
        notes: list[str] = []
        self.catch_up(self.sync_limit)
        left, _ = self.pending(1)
        if left:
            notes.append("some events are not embedded yet and were not searched: run `urchin embed`")
        vector = self.embedder.embed_query(query)
        events: dict[str, Event | None] = {}

        def accept(event_id: str) -> bool:
            if event_id not in events:
                events[event_id] = self.locate(event_id)
            event = events[event_id]
            return event is not None and filters.match(event)

        ranked = self.cache().search(vector, since_ms=since_ms, until_ms=until_ms, accept=accept, limit=limit)
        hits = [Hit(event, score) for event_id, score in ranked if (event := events.get(event_id)) is not None]
        return hits, notes


def _write_private(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    os.replace(tmp, path)
