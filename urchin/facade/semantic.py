"""Memory's ranked-search part: the token-cosine view, the embedder's view, and which one answers."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from urchin.config import Settings
from urchin.errors import EmbedderError
from urchin.facade.events import JournalEvents
from urchin.journal import Journal
from urchin.requests_first import Serving
from urchin.search.query import Filters, Hit, SearchResult

if TYPE_CHECKING:
    from urchin.search.semantic import EmbeddingView, TokenCosineView

__all__ = ["SemanticViews"]

log = logging.getLogger(__name__)


class SemanticViews:
    """Both ranked views, built on first use. Part of `Memory`, which passes the journal's events (the
    embedder's view looks its hits up by id)."""

    def __init__(self, settings: Settings, journal: Journal, events: JournalEvents) -> None:
        self._settings = settings
        self._journal = journal
        self._events = events
        self._cosine: TokenCosineView | None = None
        self._embedding: EmbeddingView | None = None
        self._background = False
        self._hot = False       # a daemon's (see `hot`)
        self._making = threading.Lock()

    def search(self, query: str, since_ms: int, limit: int, filters: Filters, *, min_score: float = 0.0,
               explain: bool = False) -> SearchResult:
        """The embedder when one is configured; when it is down or misconfigured, token-cosine, saying
        so in `mode` and `notes`. Scores of the two are never mixed. The hint about a weak best match
        is made before `min_score` drops any hit (it says why a list came back short)."""
        from urchin.search.semantic import TokenCosineView, weakness

        mode = TokenCosineView.mode
        notes: list[str] = []
        hits: list[Hit] | None = None
        if self._settings.embedder_url:
            try:
                view = self.embedding()
                hits, notes = view.search(query, since_ms=since_ms, limit=limit, filters=filters, explain=explain)
                mode = view.mode
            except EmbedderError as exc:
                mode = "token-cosine (the embedder failed)"   # why, once: in the note
                notes = [f"fell back to token-cosine: {exc.message}"]
        if hits is None:
            hits, left_out = self.cosine().ranked(query, since_ms=since_ms, limit=limit, filters=filters,
                                                  explain=explain)
            notes += left_out
        hint = weakness(hits, mode)
        kept = [hit for hit in hits if hit.score is not None and hit.score >= min_score] if min_score else hits
        return SearchResult(kept, query, mode, notes + _unheld(query, kept), weak=hint is not None, hint=hint)

    def cosine(self) -> TokenCosineView:
        with self._making:      # the follower's thread and a query may both be first
            if self._cosine is None:
                from urchin.search.semantic import TokenCosineView

                view = TokenCosineView(self._journal, self._settings.index_dir / "cosine", home=self._settings.home)
                # A process of its own never waits for a build: it answers from the newest events and a
                # child builds the rest for the next one (a daemon waits for its own child: `_daemon_view`).
                view.background = "process"
                if self._hot:
                    self._daemon_view(view)
                self._cosine = view
        return self._cosine

    def hot(self) -> None:
        """A daemon's views: the token-cosine view is made in a thread of its own (its imports and
        thesaurus take a second, which neither the daemon's start nor the follower's refreshes of the
        other views wait for), or by the first query if that comes first; the follower then keeps it.
        That thread also opens it as a first query would (`TokenCosineView.ready`: the saved index, or
        the tail of the newest events while a build starts), marked as a request until done, so the
        daemon's other start-up work gives way to it (`requests_first`)."""
        with self._making:
            self._hot = True
            if self._cosine is not None:
                self._daemon_view(self._cosine)
        first = Serving()     # taken here: the start-up work begun after this call waits for it
        threading.Thread(target=self._open_first, args=(first,), name="urchin-cosine-view", daemon=True).start()

    def _open_first(self, mark: Serving) -> None:
        try:
            self.cosine().ready()
        except Exception as exc:  # noqa: BLE001 - the first query opens it again, and says what failed
            log.warning("token-cosine: opening the view at the start failed: %s", exc)
        finally:
            mark.done()

    @staticmethod
    def _daemon_view(view: TokenCosineView) -> None:
        # Its learned associations are built by a child process at the lowest priority: seconds of CPU
        # that, in the follower's thread, stalled the views' updates and ran at the daemon's priority.
        view.learn_apart = True
        view.save_in_queries = False     # the follower's catch-up saves (not a request)
        # A large backlog is built by a child while queries answer from the newest events: the build's
        # working set (~270 bytes an event) is never the daemon's, which then maps what the child saved.
        view.background = "child"

    def embedding(self) -> EmbeddingView:
        """The embedder's view; `EmbedderError` when the embedder is not configured fully."""
        if self._embedding is None:
            from urchin.search.embedder import configured_embedder
            from urchin.search.semantic import EmbeddingView

            embedder = configured_embedder(self._settings)
            if embedder is None:
                raise EmbedderError("URCHIN_EMBEDDER_URL and URCHIN_EMBEDDER_MODEL: both must be set to embed"
                                    if not self._settings.embedder_url
                                    else "URCHIN_EMBEDDER_MODEL: must be set when URCHIN_EMBEDDER_URL is")
            self._embedding = EmbeddingView(self._journal, self._settings.home, embedder, self._events.locate)
            self._embedding.background = self._background
        return self._embedding

    def embed_in_background(self, on: bool = True) -> None:
        """This process embeds new events in the background (the daemon's loop): a query no longer
        embeds a backlog before it answers, and `embed` sends small requests one at a time."""
        self._background = on
        if self._embedding is not None:
            self._embedding.background = on

    def embed(self, progress: Callable[[int], None] | None, limit: int | None = None) -> dict[str, Any]:
        if not self._settings.embedder_url:
            raise EmbedderError("no embedder configured: set URCHIN_EMBEDDER_URL and URCHIN_EMBEDDER_MODEL")
        view = self.embedding()
        added = view.catch_up(limit=limit, progress=progress)
        return {"embedded": added, "cached": len(view.cache()), "model": view.embedder.model,
                "fingerprint": view.embedder.fingerprint}

    def refresh(self) -> None:
        """The token-cosine view follows the journal by itself (its own lock), once it exists."""
        if self._cosine is not None:
            self._cosine.catch_up()

    def release_pages(self, idle_s: float) -> None:
        if self._cosine is not None:
            self._cosine.release_pages(idle_s)

    def save(self) -> bool:
        """The daemon's last save: no association build is started (it would outlive the daemon)."""
        return self._cosine.save(learn=False) if self._cosine is not None else False

    def journal_replaced(self) -> None:
        """After a compaction: the token-cosine view lets go of the old journal file now (its queries
        read their hits from it), not at its next catch-up: the forgotten lines' file is freed."""
        if self._cosine is not None:
            self._cosine.let_go()

    def drop_vector_cache(self) -> None:
        """After a compaction: the embedder's cache is reopened (reloaded) on next use."""
        if self._embedding is not None:
            self._embedding._cache = None

    def state(self) -> dict[str, Any] | None:
        """The embedder's settings and, when this process opened it, how many events it embedded."""
        if not self._settings.embedder_url:
            return None
        out: dict[str, Any] = {"url": self._settings.embedder_url, "model": self._settings.embedder_model}
        if self._embedding is not None and self._embedding._cache is not None:
            out["embeddedEvents"] = len(self._embedding._cache)
        return out


def _unheld(query: str, hits: list[Any]) -> list[str]:
    """An empty answer to a query with "phrases" says why and what to try (a phrase is never dropped)."""
    from urchin.search.websearch import unheld_phrases

    unheld = None if hits else unheld_phrases(query, "event within the filters and window")
    return [str(unheld["note"])] if unheld else []
