"""Events into a vector cache (urchin/search/vectors.py): what an event is embedded as, and the one loop
that embeds the events a cache lacks, a chunk at a time, under the cache's writers' lock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from urchin.search.vectors import VectorCache

__all__ = ["embed_events", "event_text", "BACKGROUND_CHUNK"]

# Texts per embedding request of background work (the daemon's embedder loop, the index feed), one
# request at a time: the cache's writers' lock is held across a request, and a query's own request at
# the embedder queues behind it, so each stays one small batch long.
BACKGROUND_CHUNK = 16


class _EventLike(Protocol):
    @property
    def id(self) -> str: ...
    @property
    def ts_ms(self) -> int: ...
    @property
    def content(self) -> str: ...
    @property
    def title(self) -> str | None: ...


def event_text(event: _EventLike) -> str:
    """What an event is embedded as: its title, then its content (tags and source add noise)."""
    title = getattr(event, "title", None)
    return f"{title}\n{event.content}" if title else event.content


def embed_events(embedder: Any, cache: VectorCache, events: Iterable[_EventLike], *,
                 chunk: int = 512, progress: Callable[[int], None] | None = None, wait: bool = True,
                 keep: Callable[[list[_EventLike]], list[_EventLike]] | None = None) -> int:
    """Embed the events the cache lacks, `chunk` at a time; returns how many were added.

    `embedder` is an `Embedder` (or anything with `embed(texts) -> ndarray`). Events already
    cached cost no request; an embedder failure leaves every chunk done so far in the cache.
    `wait=False`: `CacheBusy` when another writer holds the cache (see `VectorCache.exclusive`).
    `keep(batch)`, asked under the writers' lock before each request: those of the batch still to be
    embedded. A compaction drops forgotten and rewritten events' vectors under that lock, after its
    journal is in place, so events read before it (forgotten since, or their text rewritten) are
    refused there or dropped by it (`ForgetLog.keep_current`).
    """
    added = 0
    pending: list[_EventLike] = []

    def flush() -> None:
        nonlocal added
        by_id = {e.id: e for e in pending}  # a repeated id is embedded once
        pending.clear()
        # Held from "missing" to "added": another writer (the daemon's index process) waits, then
        # finds these cached instead of embedding them too.
        with cache.exclusive(wait):
            batch = [by_id[i] for i in cache.missing(by_id)]
            if batch and keep is not None:
                batch = keep(batch)
            if batch:
                vectors = embedder.embed([event_text(e) for e in batch])
                added += cache.add([e.id for e in batch], [e.ts_ms for e in batch], vectors)
        if batch and progress is not None:
            progress(len(batch))

    for event in events:
        pending.append(event)
        if len(pending) >= chunk:
            flush()
    flush()
    return added
