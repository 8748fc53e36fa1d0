"""Ranked (semantic) search as views that follow the journal by byte offset.

`TokenCosineView` keeps a `TokenCosineIndex` caught up with the journal and maps its rows back to
journal offsets, so it holds no event text: hits are read back from the journal (a few `pread`s).
With an index directory it is saved there now and then and loaded at start (then only the journal's
tail is indexed); a saved index that does not match the journal is rebuilt, never trusted.
`EmbeddingView` does the same with a remote embedder's vectors, cached on disk per model.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterator
from typing import Any

from urchin.event import Event
from urchin.search.cosine import Scored
from urchin.search.cosine_view import BULK_BYTES, SAVE_EVERY, _release_free_memory
from urchin.search.cosine_view_build import BuildingView
from urchin.search.cosine_view_learn import INLINE_ASSOC_ROWS
from urchin.search.embedding_view import EmbeddingView, embedder_evidence
from urchin.search.journal_handle import JournalHandle
from urchin.search.query import Filters, Hit
from urchin.search.ranked import CONSTRAINED_EXTRA, WEAK_SCORE, constraints, cosine_explain, weakness
from urchin.search.terms import terms_of, tokenize
from urchin.search.websearch import parse
from urchin.tombstones import forget_hash

__all__ = ["TokenCosineView", "EmbeddingView", "SAVE_EVERY", "BULK_BYTES", "WEAK_SCORE", "weakness",
           "INLINE_ASSOC_ROWS", "constraints", "embedder_evidence"]

log = logging.getLogger(__name__)


class TokenCosineView(BuildingView):
    """Thread-safe: one lock serialises catch-up and queries (the index itself is not thread-safe).

    For a daemon: call `catch_up()` on every journal change (it saves by itself once `save_every`
    events, and 5% of the saved ones, have been indexed since the last save) and `save()` at
    shutdown. Construction does no I/O; the first `catch_up` or `search` loads the saved index.

    With `background` set, no caller waits for a build: a backlog over `tail_bytes` (an import, a
    first start) is left to a build ("thread": one of this process's; "child": a child this process
    waits for, then loads what it saved, the daemon's; "process": a detached child that saves it for
    the next process; `urchin.search.cosine_build`), and until that is done queries answer from a
    `Tail` of the newest events, saying how much they left out. The build owns the index meanwhile
    (nothing else reads it), saves it every `save_every_s` (a kill resumes from there) and swaps it
    in when it has caught up: the same index a build without a tail makes.
    """

    mode = "token-cosine"

    # ---- following the journal --------------------------------------------------------------
    def catch_up(self) -> int:
        """Index every complete line appended since the last call; returns how many events were added."""
        with self._lock:
            added = self._catch_up()
        self._save_if_due()
        return added

    def ready(self) -> int:
        """What a first query does before it answers, done ahead of it (a daemon's start): the saved
        index loaded and caught up, or, behind a large backlog with `background` set, the tail of the
        newest events built and the build started. Never saves (the follower's catch-up does)."""
        with self._lock:
            return self._catch_up()

    def _catch_up(self) -> int:
        if not self._opened:
            self._open()
        if self._behind:
            if self.background == "child":
                self._start_build()     # again, once BUILD_RETRY_S after a failed one
            return self._follow_tail()
        size = self._check_journal()
        backlog = size - self.next_offset
        if self.background is not None and backlog > self.tail_bytes:
            self._behind = True
            added = self._follow_tail()
            self._start_build()
            return added
        if backlog < BULK_BYTES:
            return self._read_tail(size) if backlog > 0 else 0    # nothing new: the journal is not opened
        with self.index.bulk():
            added = self._build_parallel() if self.workers > 1 else 0
            added += self._read_tail()
        _release_free_memory()
        return added

    # ---- querying -----------------------------------------------------------------------------
    def search(self, query: str, *, since_ms: int | None, limit: int, filters: Filters,
               until_ms: int | None = None, explain: bool = False) -> list[Hit]:
        return self.ranked(query, since_ms=since_ms, limit=limit, filters=filters, until_ms=until_ms,
                           explain=explain)[0]

    def ranked(self, query: str, *, since_ms: int | None, limit: int, filters: Filters,
               until_ms: int | None = None, explain: bool = False) -> tuple[list[Hit], list[str]]:
        """The hits (each with how its score was made, with `explain`), and notes: what was left out
        while the index builds (`coverage`)."""
        hits, notes = self._ranked(query, since_ms, limit, filters, until_ms, explain)
        return list(hits), notes

    def search_lazily(self, query: str, *, since_ms: int | None, limit: int, filters: Filters) -> Iterator[Hit]:
        """`search`'s hits, each read from the journal when it is taken: a prompt's recall takes the
        few its budget holds of the `limit` ranked (bench/RESULTS.md, round sixteen)."""
        return self._ranked(query, since_ms, limit, filters, None, False)[0]

    def _ranked(self, query: str, since_ms: int | None, limit: int, filters: Filters, until_ms: int | None,
                explain: bool) -> tuple[Iterator[Hit], list[str]]:
        parsed = parse(query)      # once: the ranked text, the filter, the -words and the OR groups
        query, holds = constraints(query, parsed)
        generation = self.forgotten.generation()    # before the catch-up: a rewrite after it stops the hits
        hidden = self.forgotten.hashes()
        # until a compaction drops them, forgotten rows may hold some of the top places: ask for more
        wanted = limit + min(len(hidden), 1000) if hidden else limit
        if holds is not None:
            wanted += CONSTRAINED_EXTRA     # phrases and -words filter the ranked candidates
        params = {"since_ms": since_ms, "until_ms": until_ms, "source": filters.source, "limit": wanted,
                  "workspace": filters.workspace, "session": filters.session, "kind": filters.kind,
                  "exclude": terms_of(parsed.excluded),
                  "groups": [[tokenize(alt) for alt in group] for group in parsed.groups]}
        with self._lock:
            self._catch_up()
            scored, offsets = self._ranking(query, params)
            handle = self._handle_of(self._ranked_file())
            note = self.coverage()
        if self.save_in_queries:
            self._save_if_due()
        hits = self._hits(scored, offsets, limit, filters, holds, explain, handle, generation)
        return hits, [note] if note else []

    def _ranked_file(self) -> tuple[int, int] | None:
        """Under the lock: the journal file (device, inode) the rows just ranked were read from."""
        return self._tail.identity if self._behind and self._tail is not None else self._identity

    def _ranking(self, query: str, params: dict[str, Any]) -> tuple[list[Scored], list[int]]:
        """Under the lock, caught up: the ranking and its rows' offsets, from the tail of the newest
        events while a build owns the index, else from the index."""
        if self._behind and self._tail is not None:
            scored = self._tail.index.search(query, **params)
            return scored, [self._tail.offsets[s.row] for s in scored]
        self._assoc_if_stale()
        self._used = time.monotonic()
        try:
            scored = self.index.search(query, **params)
            self._used = time.monotonic()    # idle from the end of a query (a first whole-index one takes seconds)
            return scored, [self.offsets[s.row] for s in scored]
        except IndexError as exc:
            if not self.loaded_from_disk:
                raise
            # Loading checks shapes and bounds of everything but the postings (that would read
            # them all); a damaged posting surfaces here: rebuild from the journal, once.
            log.warning("token-cosine: saved index damaged (%s); rebuilding", exc)
            self.rebuild_reason, self.loaded_from_disk = f"damaged postings: {exc}", False
            self._reset()
            self._catch_up()
            return self._ranking(query, params)

    def _hits(self, scored: list[Scored], offsets: list[int], limit: int, filters: Filters,
              holds: Callable[[Event], bool] | None, explain: bool = False,
              handle: JournalHandle | None = None, generation: int | None = None) -> Iterator[Hit]:
        """The first `limit` of `scored` that may be served, read from the journal one by one (from
        `handle`, the file they were ranked in, when given; else by path). Each is checked when it is
        read, not when it was ranked (a prompt's recall takes them lazily): an id forgotten since is
        skipped, a line that is not the ranked event (another file at the path) too, and none is read
        once a compaction rewrote the journal after the ranking (`generation`, the forget log's then):
        the held file still has the forgotten and the redacted lines as they were."""
        forgotten = self.forgotten
        read = handle.line_at if handle is not None else self.journal.read_line_at

        def each() -> Iterator[Hit]:
            given = 0
            for s, offset in zip(scored, offsets, strict=True):
                if given >= limit:
                    return
                state = forgotten.state()      # two stats: taken as each hit is, maybe long after the ranking
                if generation is not None and len(state.compactions) != generation:
                    return
                event = self.journal.event(read(offset))
                if (event is not None and event.id == s.id
                        and not (state.hashes and forget_hash(event.id) in state.hashes)
                        and (holds is None or holds(event)) and not filters.hides(event)):
                    given += 1
                    yield Hit(event, s.score, cosine_explain(s) if explain else None)

        return each()


    def session_events(self, filters: Filters, since_ms: int, limit: int) -> list[Event] | None:
        """What substring search's `search(None, ...)` gives for a session filter, the newest `limit`
        events of `filters.session` from `since_ms` on that pass `filters`, newest first, from the
        session's own rows (`TokenCosineIndex.session_rows`) instead of a scan of the window. None
        while a build owns the index (the tail may not hold the session's older events), or when a
        compaction rewrote the journal while its rows were read (the caller scans the new one)."""
        labels = filters.to_dict()
        session = labels.pop("session")
        forgotten = self.forgotten
        generation = forgotten.generation()     # before the catch-up: a compaction after it, None
        wanted = limit + min(len(forgotten.hashes()), 1000)   # forgotten rows, until a compaction drops them
        with self._lock:
            self._catch_up()
            if self._behind:
                return None      # a build owns the index: the caller scans the window instead
            offsets = [self.offsets[row] for row in
                       itertools.islice(self.index.session_rows(session, since_ms, labels), wanted)]
            handle = self._handle_of(self._identity)
        read = handle.line_at if handle is not None else self.journal.read_line_at
        lines = [read(offset) for offset in offsets]
        state = forgotten.state()        # after the reads: what was forgotten meanwhile is not served
        if len(state.compactions) != generation:
            return None      # rewritten since: the held file's lines may be forgotten or redacted ones
        events = []
        for line in lines:
            event = self.journal.event(line)
            if (event is not None and not (state.hashes and forget_hash(event.id) in state.hashes)
                    and filters.match(event)):
                events.append(event)
        return sorted(events, key=lambda e: e.ts_ms, reverse=True)[:limit]
