"""Memory's ranked-search part: the token-cosine view, the embedder's view, and which one answers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from urchin.config import Settings
from urchin.errors import EmbedderError
from urchin.event import Event
from urchin.journal import Journal
from urchin.search.query import Filters, SearchResult

if TYPE_CHECKING:
    from urchin.search.semantic import EmbeddingView, TokenCosineView

__all__ = ["SemanticViews"]


class SemanticViews:
    """Both ranked views, built on first use. Part of `Memory`."""

    def __init__(self, settings: Settings, journal: Journal, locate: Callable[[str], Event | None]) -> None:
        self._settings = settings
        self._journal = journal
        self._locate = locate
        self._cosine: TokenCosineView | None = None
        self._embedding: EmbeddingView | None = None
        self._background = False

    def search(self, query: str, since_ms: int, limit: int, filters: Filters) -> SearchResult:
        """The embedder when one is configured; when it is down or misconfigured, token-cosine, saying
        so in `mode` and `notes`. Scores of the two are never mixed."""
        from urchin.search.semantic import TokenCosineView, weakness

        mode = TokenCosineView.mode
        notes: list[str] = []
        if self._settings.embedder_url:
            try:
                view = self.embedding()
                hits, notes = view.search(query, since_ms=since_ms, limit=limit, filters=filters)
                hint = weakness(hits, view.mode)
                return SearchResult(hits, query, view.mode, notes + _unheld(query, hits), weak=hint is not None,
                                    hint=hint)
            except EmbedderError as exc:
                mode = "token-cosine (the embedder failed)"   # why, once: in the note
                notes = [f"fell back to token-cosine: {exc.message}"]
        hits, left_out = self.cosine().ranked(query, since_ms=since_ms, limit=limit, filters=filters)
        notes += left_out
        hint = weakness(hits, mode)
        return SearchResult(hits, query, mode, notes + _unheld(query, hits), weak=hint is not None, hint=hint)

    def cosine(self) -> TokenCosineView:
        if self._cosine is None:
            from urchin.search.semantic import TokenCosineView

            self._cosine = TokenCosineView(self._journal, self._settings.index_dir / "cosine",
                                           home=self._settings.home)
            # A process of its own never waits for a build: it answers from the newest events and a
            # child builds the rest for the next one (the daemon builds in a thread: `Memory.warm`).
            self._cosine.background = "process"
        return self._cosine

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
            self._embedding = EmbeddingView(self._journal, self._settings.home, embedder, self._locate)
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

    def save(self) -> bool:
        """The daemon's last save: no association build is started (it would outlive the daemon)."""
        return self._cosine.save(learn=False) if self._cosine is not None else False

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
