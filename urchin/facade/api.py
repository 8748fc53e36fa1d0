"""`Facade`: the API every front end calls, as a Protocol that `Memory` (in-process) and the daemon
client `RemoteMemory` (urchin/daemon/client.py) both satisfy.

The reading operations (`search`, `semantic`, `recent`, `session_context`, `workspace_context`, `get`,
`tail`, `context`) take their typed parameters (`urchin/params/`), built and checked at the edge.
Front ends hold a `Facade`, never `Any`: `open_memory` and `CliState.memory()` return one, so mypy
checks both implementations against it and a method that drifts in either (a renamed keyword, a
different result type) fails the type check rather than a user's call. No `Any`: results whose keys a
front end reads are `TypedDict`s beside the code that makes them; the textrawl-shaped documents (their
keys vary with the document's kind, and front ends pass them on whole) and input not validated yet are
`JSON` (urchin/jsontypes.py). Only types, no run-time cost: import it under `TYPE_CHECKING`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypedDict

if TYPE_CHECKING:
    from urchin.api_tokens import NewToken, TokenRecord
    from urchin.collectors import CollectorStatus
    from urchin.collectors.base import CollectReport
    from urchin.collectors.install import InstallResult
    from urchin.collectors.uninstall import UninstallResult
    from urchin.config import Settings
    from urchin.ephemeral import EphemeralState
    from urchin.event import Event
    from urchin.facade.forgetting import ForgetResult, RewriteReport
    from urchin.facade.hybrid import IndexRun
    from urchin.facade.status import HomeStatus
    from urchin.facade.workspace import Overview
    from urchin.hybrid.base import IndexState
    from urchin.hybrid.feeder import FeedReport
    from urchin.hybrid.files import FileIndexReport
    from urchin.hybrid.pg_roles import FeederRole, RoleSetup
    from urchin.hybrid.search_context import ContextResult
    from urchin.ingest import BatchReport, IngestResult
    from urchin.jsontypes import JSON, JSONObject
    from urchin.params.context import ContextParams
    from urchin.params.documents import DocumentSearchParams
    from urchin.params.ephemeral import EphemeralParams
    from urchin.params.forget import ForgetParams
    from urchin.params.reading import (
        GetParams,
        RecentParams,
        SemanticParams,
        SessionParams,
        TailParams,
        WorkspaceParams,
    )
    from urchin.params.recall import RecallParams
    from urchin.params.search import SearchParams
    from urchin.params.sources import DocumentParams, FetchParams, QuerySourceParams
    from urchin.params.workspace import CuratedMemoryParams, FileParams
    from urchin.recall import RecallDict
    from urchin.redact import Finding
    from urchin.search.query import SearchResult
    from urchin.tombstones import Compaction
    from urchin.workspace.curated import CuratedMemory, Member, MemoryContents
    from urchin.workspace.reader import FileRange
    from urchin.workspace.roots import Root

__all__ = ["Facade", "RecallAnswer", "EmbedReport"]


class RecallAnswer(Protocol):
    """What `recall` returns: the block as the agent receives it, and its JSON object."""

    @property
    def text(self) -> str: ...

    def to_dict(self) -> RecallDict: ...


class EmbedReport(TypedDict):
    """`urchin embed`: events embedded by this call, vectors cached in all, for which model."""

    embedded: int
    cached: int
    model: str
    fingerprint: str


class Facade(Protocol):
    """Every operation a front end runs; results are the same objects whichever implementation answers."""

    @property
    def settings(self) -> Settings: ...

    def close(self) -> None: ...

    # ---- writing
    def ingest(self, items: Iterable[Mapping[str, JSON] | Event],
               defaults: Mapping[str, JSON] | None = None) -> list[IngestResult]: ...

    def ingest_one(self, item: Mapping[str, JSON] | Event,
                   defaults: Mapping[str, JSON] | None = None) -> IngestResult: ...

    def prepare(self, item: Mapping[str, JSON], defaults: Mapping[str, JSON] | None = None) -> Event: ...

    def import_lines(self, lines: Iterable[bytes | str],
                     on_progress: Callable[[int], None] | None = None) -> BatchReport: ...

    # ---- reading the journal
    def search(self, query: SearchParams, /, *, now: datetime | None = None) -> SearchResult: ...

    def semantic(self, query: SemanticParams, /, *, now: datetime | None = None) -> SearchResult: ...

    def recent(self, params: RecentParams, /, *, now: datetime | None = None) -> SearchResult: ...

    def session_context(self, session: SessionParams, /, *, now: datetime | None = None) -> SearchResult: ...

    def workspace_context(self, workspace: WorkspaceParams, /, *, now: datetime | None = None) -> SearchResult: ...

    def get(self, event_id: GetParams, /) -> Event: ...

    def tail(self, n: TailParams, /) -> list[Event]: ...

    def end_offset(self) -> int: ...

    def follow(self, offset: int) -> tuple[list[Event], int]: ...

    def follow_events(self, stop: threading.Event | None = None, poll_s: float = ...) -> Iterator[Event]: ...

    def status(self) -> HomeStatus: ...

    def embed(self, progress: Callable[[int], None] | None = None, *,
              limit: int | None = None) -> EmbedReport: ...

    # ---- recall
    def recall(self, params: RecallParams | None = None, /, *, workspace: str | None = None, cwd: str | None = None,
               session: str | None = None, prompt: str | None = None, budget: int | None = None,
               now: datetime | None = None) -> RecallAnswer: ...

    # ---- the hybrid index
    def context(self, params: ContextParams, /) -> ContextResult: ...

    def document_search(self, params: DocumentSearchParams, /) -> JSONObject: ...

    def query_source(self, params: QuerySourceParams, /) -> ContextResult: ...

    def fetch_source_document(self, params: FetchParams, /) -> JSONObject: ...

    def get_document(self, params: DocumentParams, /) -> JSONObject: ...

    def index(self, rebuild: bool = False, follow: bool = False,
              on_progress: Callable[[int, int], None] | None = None,
              stop: threading.Event | None = None) -> FeedReport: ...

    def update_index(self, rebuild: bool = False, follow: bool = False,
                     on_progress: Callable[[int, int], None] | None = None,
                     stop: threading.Event | None = None) -> IndexRun: ...

    def index_files(self) -> FileIndexReport: ...

    def index_status(self) -> IndexState: ...

    def db_setup(self, owner_password: str | None = None, reader_password: str | None = None) -> RoleSetup: ...

    def db_feeder(self, device: str, password: str | None = None,
                  account: str | None = None) -> FeederRole: ...

    # ---- privacy and forgetting
    def ephemeral(self, params: EphemeralParams, /) -> EphemeralState: ...

    def redact_check(self, path: str) -> Iterator[Finding]: ...

    def redact_rewrite(self, purge: bool = False) -> RewriteReport: ...

    def forget(self, params: ForgetParams, /) -> ForgetResult: ...

    def finish_forget(self) -> Compaction | None: ...

    def identity(self) -> dict[str, str]: ...

    # ---- scoped API tokens
    def token_create(self, scope: str, workspaces: Sequence[str] = (), expires: str | None = None,
                     name: str | None = None) -> NewToken: ...

    def token_list(self) -> list[TokenRecord]: ...

    def token_revoke(self, token_id: str) -> None: ...

    # ---- capture
    def collect(self, which: str = ...) -> list[CollectReport]: ...

    def collectors_status(self) -> list[CollectorStatus]: ...

    def install_hooks(self, target: str, *, path: str | None = None, dry_run: bool = False,
                      shell: str | None = None) -> InstallResult: ...

    def uninstall_hooks(self, target: str | None = None, *, path: str | None = None, dry_run: bool = False,
                        shell: str | None = None) -> list[UninstallResult]: ...

    # ---- workspace files and curated memories
    def workspace_add(self, path: str, name: str | None = None, allow_secret_files: bool = False) -> Root: ...

    def workspace_remove(self, name: str) -> Root: ...

    def workspace_list(self) -> list[Root]: ...

    def get_file(self, params: FileParams, /) -> FileRange: ...

    def memory_create(self, slug: str, use_when: str, members: list[Member], title: str | None = None,
                      replace: bool = False) -> CuratedMemory: ...

    def memory_edit(self, slug: str, *, use_when: str | None = None, members: list[Member] | None = None,
                    title: str | None = None) -> CuratedMemory: ...

    def memory_delete(self, slug: str) -> CuratedMemory: ...

    def memory_list(self) -> list[CuratedMemory]: ...

    def memory_get(self, params: CuratedMemoryParams, /) -> MemoryContents: ...

    def overview(self) -> Overview: ...
