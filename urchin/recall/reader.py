"""What recall reads and writes, as plain callables: the facade (`Memory`) binds them to its own views,
and a hook with no daemon binds them to the journal directly (`local`), without `Memory`'s imports."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from urchin.event import Event
from urchin.search.query import Filters, Hit

if TYPE_CHECKING:
    from urchin.config import Settings

__all__ = ["Reader", "local"]


@dataclass(frozen=True)
class Reader:
    """`recent(filters, since_ms, limit)`: newest first; `ranked(query, filters, since_ms, limit)`: best
    first with scores (each may be read from the journal only when it is taken); `memories()`: (slug,
    title, useWhen) of the curated memories; `redact`: the one redactor; `record(item)`: append one
    event through the write path; `ephemeral()`: whether it is on."""

    recent: Callable[[Filters, int, int], list[Event]]
    ranked: Callable[[str, Filters, int, int], Iterable[Hit]]
    memories: Callable[[], list[tuple[str, str, str]]]
    redact: Callable[[str], str]
    record: Callable[[Mapping[str, Any]], None]
    ephemeral: Callable[[], bool]
    config: Mapping[str, Any]


def local(settings: Settings, *, save: bool = True) -> Reader:
    """A reader over this home's journal and views, built on first use of each part (a hook's
    session start reads only `recent`). `save` False: the token-cosine view is not saved by this
    process (a hook under a deadline leaves that to the daemon and the CLI)."""
    from urchin.journal import Journal
    from urchin.proof import LineProof

    journal = Journal(settings.journal_path, settings.durability, LineProof(settings))
    parts: dict[str, Any] = {}

    def part(name: str, build: Callable[[], Any]) -> Any:
        if name not in parts:
            parts[name] = build()
        return parts[name]

    def substring() -> Any:
        from urchin.search.substring import SubstringSearcher

        return SubstringSearcher(journal)

    def cosine() -> Any:
        from urchin.search.semantic import SAVE_EVERY, TokenCosineView

        view = TokenCosineView(journal, settings.index_dir / "cosine", save_every=SAVE_EVERY if save else 0,
                               home=settings.home)
        view.background = "process"     # a hook never waits for a build (a saving one starts a child's)
        return view

    def ingestor() -> Any:
        from urchin.ingest import Ingestor

        return Ingestor(settings, journal)

    def recent(filters: Filters, since_ms: int, limit: int) -> list[Event]:
        if filters.session is not None:     # a session's own rows (the prompt's ranking loaded the view)
            events = part("cosine", cosine).session_events(filters, since_ms, limit)
            if events is not None:
                return events
        return part("substring", substring).search(None, since_ms=since_ms, limit=limit, filters=filters)

    def ranked(query: str, filters: Filters, since_ms: int, limit: int) -> Iterable[Hit]:
        return part("cosine", cosine).search_lazily(query, since_ms=since_ms, limit=limit, filters=filters)

    def memories() -> list[tuple[str, str, str]]:
        from urchin.workspace.curated import CuratedMemories

        return [(m.slug, m.title, m.use_when) for m in CuratedMemories(settings.home).list()]

    def redact(text: str) -> str:
        return str(part("ingestor", ingestor).redactor.redact_text(text)[0])

    def record(item: Mapping[str, Any]) -> None:
        part("ingestor", ingestor).ingest([dict(item)])

    def ephemeral() -> bool:
        from urchin.ephemeral import Ephemeral

        return Ephemeral(settings.home).is_on()

    return Reader(recent, ranked, memories, redact, record, ephemeral, settings.config)
