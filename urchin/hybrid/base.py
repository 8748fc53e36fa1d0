"""The small interface the feeder and the hybrid query need from an index backend.

`postgres.PostgresIndex` is the one implementation; this Protocol keeps psycopg out of every
other module and says exactly what a backend must do.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NotRequired, Protocol, TypedDict

from urchin.event import MEMORY_KINDS  # re-exported: memories = the events urchin_remember writes

__all__ = ["IndexBackend", "UNIT_ROWS", "GaveWay", "ChunkRow", "LegHit", "ContextRow", "Filter", "Embedder",
           "MEMORY_KINDS", "chunk_key", "split_key", "IndexState", "CursorState", "SkippedEvents"]

# A chunk is (device, chunk id): an id is unique per device only (issue 34). Legs, fusion and fetch pass
# a chunk around as one string, its key `<length of device>:<device><chunk id>` (exact whatever either
# holds; the backend builds the same string in SQL).


class CursorState(TypedDict):
    """How far one device's journal is fed."""

    device: str
    journal: str
    offset: int
    updatedAt: str


class SkippedEvents(TypedDict):
    """Rows the database refused in this process (the cursor moved on): how many, and the last few."""

    count: int
    last: list[dict[str, str]]


class IndexState(TypedDict):
    """`urchin index --status` (`Memory.index_status`): the backend's numbers, then the service's
    (where the database is, how far behind the journal it is, rows it refused)."""

    chunks: int
    schemaVersion: int | None
    pgvector: str | None
    cursors: list[CursorState]
    files: dict[str, dict[str, int]]          # root -> file state -> count
    pendingEmbeddings: NotRequired[int]
    database: NotRequired[str]
    behindJournalBytes: NotRequired[int]
    skippedEvents: NotRequired[SkippedEvents]


def chunk_key(device: str, chunk_id: str) -> str:
    return f"{len(device)}:{device}{chunk_id}"


def split_key(key: str) -> tuple[str, str]:
    """(device, chunk id) of a key made by `chunk_key` or `KEY_SQL`."""
    size, _, rest = key.partition(":")
    n = int(size)
    return rest[:n], rest[n:]


@dataclass(slots=True)
class ChunkRow:
    """One row to upsert: an event (or, later, a file chunk) with its token-cosine vector."""

    chunk_id: str
    doc_id: str
    source: str
    kind: str
    content: str
    occurred_at: datetime
    workspace: str | None = None
    session: str | None = None
    title: str | None = None
    tags: list[str] = field(default_factory=list)
    account: str | None = None
    device: str | None = None
    journal_offset: int | None = None
    doc_type: str = "event"
    path: str | None = None
    heading_path: list[str] | None = None
    start_line: int | None = None
    end_line: int | None = None
    content_hash: str | None = None
    terms: str = "{}"             # integer[] text form, see sparse.int_array
    tvec: str | None = None


@dataclass(frozen=True, slots=True)
class LegHit:
    chunk_id: str       # the chunk's key (`chunk_key`), or a live file chunk's own id
    raw: float          # the leg's own score (ts_rank, or the pivoted cosine: may pass 1), with context and prior
    kind: str
    occurred_at: datetime


@dataclass(frozen=True, slots=True)
class ContextRow:
    """A leg's candidate (`anchor == chunk_id`, distance 0) or one of its session neighbours (distance
    -n / +n turns), each with its own score; `hybrid.with_context` turns these into ranked hits.
    `prior`: what the chunk's total (its score and its neighbours') is multiplied by: 1 + the memory
    prior for a memory, times 1 + the named-source prior for a source the question names. `anchor` and
    `chunk_id` are keys (`chunk_key`)."""

    anchor: str
    chunk_id: str
    distance: int
    score: float
    kind: str
    occurred_at: datetime
    prior: float = 1.0


@dataclass(frozen=True, slots=True)
class Filter:
    """Filters applied inside every leg, before ranking (never after fusion)."""

    sources: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    workspace: str | None = None
    session: str | None = None
    tags: tuple[str, ...] = ()
    since: datetime | None = None
    until: datetime | None = None
    memories: bool = True
    conversations: bool = True
    devices: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()
    constraint: str | None = None   # the question's "phrases" and -exclusions (websearch syntax): must hold
    roots: tuple[str, ...] = ()     # workspace roots named as sources: their files (OR the sources above)


@dataclass(frozen=True, slots=True)
class Tier:
    """One step of a leg's gathering of candidates: the chunks holding every one (or any) of `items`
    (words for the keyword leg, term ids for token-cosine), the last RECENT first."""

    items: tuple[Any, ...]
    every: bool


class Embedder(Protocol):
    """What the index needs of an embedding client (urchin/search/embedder.py provides one)."""

    @property
    def fingerprint(self) -> str: ...      # changes whenever vectors would change (url, model, dimension)

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> Any: ...     # rows of floats (a numpy matrix is fine)


# A background feed builds and copies its rows in units of this many, giving way to queries between them
# (`Feeder.give_way`): its work, and the server's COPY behind it, pause within a unit's time (a few ms).
UNIT_ROWS = 64


class GaveWay(Exception):
    """A background feed's batch given up (rolled back, nothing committed) because the daemon's requests
    came while it was written: its rows go again in small pieces (`Feeder._write_pieces`)."""


class IndexBackend(Protocol):
    outage_errors: tuple[type[BaseException], ...]     # errors meaning "the database went away": retry
    refused_errors: tuple[type[BaseException], ...]    # "cannot hold this value": skip the row, move on

    def reset(self) -> None: ...

    def cursor(self, device: str, journal: str) -> int: ...

    def write_batch(self, rows: Sequence[ChunkRow], device: str, journal: str, expected: int,
                    new_offset: int, wait: bool = True, between: Callable[[], object] | None = None,
                    generation: int | None = None, give_up: Callable[[], bool] | None = None) -> int: ...

    def rebuild(self) -> None: ...

    def term_stats(self, terms: Sequence[int]) -> tuple[dict[int, int], int]: ...

    def twin(self) -> IndexBackend: ...     # another connection, for a leg run at the same time

    def keyword(self, words: Sequence[str], constraints: str | None, flt: Filter, limit: int,
                context_turns: int = 0, every: str | None = None, tiers: Sequence[Tier] = (),
                budget: int = 0, prior: float = 0.0, named: Sequence[str] = ()) -> list[ContextRow]: ...

    def sparse(self, vector: str, terms: Sequence[int], flt: Filter, limit: int,
               context_turns: int = 0, tiers: Sequence[Tier] = (), budget: int = 0,
               pivot: tuple[float, float] = (0.0, 1.0), prior: float = 0.0,
               named: Sequence[str] = ()) -> list[ContextRow]: ...

    def norm_mean(self, chunks: int) -> float: ...   # the mean length (l2 norm) of the chunks' token vectors

    def dense(self, model: str, vector: Sequence[float], flt: Filter, limit: int) -> list[LegHit]: ...

    def held(self, chunk_ids: Sequence[str], terms: Sequence[int]) -> dict[str, set[int]]: ...  # by key

    def known_sources(self) -> list[str]: ...

    def unmatched(self, flt: Filter) -> list[str]: ...

    def fetch(self, chunk_ids: Sequence[str]) -> dict[str, dict[str, Any]]: ...   # rows by key (`chunk_key`)

    def status(self, model: str | None = None) -> IndexState: ...

    def close(self) -> None: ...
