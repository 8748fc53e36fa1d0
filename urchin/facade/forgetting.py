"""Forgetting and rewriting: `Memory.forget` (tombstone, then compaction) and `Memory.redact_rewrite`.

Selection scans the journal once (ids, session, query, time range: all given must hold). The
tombstone makes every view hide the events at once; compaction then rewrites the journal without
them and every derived view follows (id sidecar, block index, token-cosine store, vector caches,
PostgreSQL rows through the feeder).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

import orjson

from urchin.config import Settings
from urchin.errors import UrchinError
from urchin.event import Event
from urchin.journal import Journal
from urchin.tombstones import Compaction, ForgetLog, compact, forget_hash, line_id
from urchin.words import plural

if TYPE_CHECKING:
    from urchin.facade.hybrid import HybridIndex
    from urchin.facade.semantic import SemanticViews
    from urchin.facade.writing import WritePath
    from urchin.params.forget import ForgetParams
    from urchin.search.substring import SubstringSearcher

__all__ = ["Forgetting", "ForgetResult", "RewriteReport", "PREVIEW_LIMIT"]


class RewriteReport(TypedDict):
    """`urchin redact --rewrite`: journal lines rewritten and dropped, and what the views said."""

    rewritten: int
    dropped: int
    notes: list[str]

log = logging.getLogger("urchin.tombstones")
PREVIEW_LIMIT = 20


@dataclass(slots=True)
class ForgetResult:
    """What a forget did (or, unconfirmed, would do). Holds no content beyond a short preview."""

    matched: int = 0
    forgotten: int = 0
    confirmed: bool = False
    preview: list[dict[str, Any]] = field(default_factory=list)
    not_found: list[str] = field(default_factory=list)
    compacted: bool = False
    removed_bytes: int = 0
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"matched": self.matched, "forgotten": self.forgotten, "confirmed": self.confirmed,
                "preview": self.preview, "notFound": self.not_found, "compacted": self.compacted,
                "removedBytes": self.removed_bytes, "notes": self.notes}

    @classmethod
    def from_dict(cls, body: Mapping[str, Any]) -> ForgetResult:
        return cls(int(body.get("matched", 0)), int(body.get("forgotten", 0)), bool(body.get("confirmed")),
                   list(body.get("preview", [])), list(body.get("notFound", [])), bool(body.get("compacted")),
                   int(body.get("removedBytes", 0)), list(body.get("notes", [])))

    def render(self, confirm: str = "call again with confirm: true") -> str:
        """The text every front end shows; `confirm` says how its caller confirms a preview (the CLI: --yes)."""
        lines = [f"{e['timestamp'][:19]}Z {e['source']} {e['id']} — {e['snippet']}" for e in self.preview]
        if self.matched > len(self.preview):
            lines.append(f"… and {self.matched - len(self.preview)} more")
        if self.not_found:
            lines.append("not found: " + ", ".join(self.not_found))
        if self.confirmed:
            lines.append(f"forgot {_events(self.forgotten)}" + (" and compacted the journal" if self.compacted else ""))
        else:
            lines.append(f"{_events(self.matched)} would be forgotten; nothing was changed ({confirm} to forget "
                         f"{'it' if self.matched == 1 else 'them'})")
        lines.extend(self.notes)
        return "\n".join(lines)


def _events(count: int) -> str:
    return plural(count, "event")


@dataclass(frozen=True, slots=True)
class _Selector:
    ids: frozenset[str] | None
    session: str | None
    query: str | None
    since_ms: int | None
    until_ms: int | None

    def match(self, event: Event) -> bool:
        return ((self.ids is None or event.id in self.ids)
                and (self.session is None or event.session == self.session)
                and (self.since_ms is None or event.ts_ms >= self.since_ms)
                and (self.until_ms is None or event.ts_ms <= self.until_ms)
                and (self.query is None or self.query in event.content.casefold()))


class Forgetting:
    """Forget and rewrite; every derived view follows. Part of `Memory`, which passes its parts."""

    def __init__(self, settings: Settings, journal: Journal, substring: SubstringSearcher,
                 write: WritePath, semantic: SemanticViews, index: HybridIndex) -> None:
        self.settings = settings
        self.journal = journal
        self.substring = substring
        self._write = write
        self._semantic = semantic
        self._index = index

    @property
    def forget_log(self) -> ForgetLog:
        return self.substring.forgotten

    def forget(self, params: ForgetParams) -> ForgetResult:
        """Forget every event matching all the given selectors; without `confirm` only preview them.
        `purge`: also rewrite the PostgreSQL tables, so no data file keeps the deleted rows' bytes."""
        selector = self._as_stored(_Selector(frozenset(params.ids) if params.ids else None, params.session,
                                             params.query, params.since_ms, params.until_ms))
        confirm, purge = params.confirm, params.purge
        log_ = self.forget_log
        result = ForgetResult(confirmed=confirm)
        hashes: list[bytes] = []
        found: set[str] = set()
        for stored_id, event in _candidates(self.journal, selector):
            if not selector.match(event) or log_.hides(stored_id) or event.id in found:
                continue
            found.add(event.id)
            hashes.append(forget_hash(stored_id))
            if len(result.preview) < PREVIEW_LIMIT:
                result.preview.append(_preview(event))
        result.matched = len(hashes)
        if selector.ids is not None:
            result.not_found = sorted(i for i in selector.ids if i not in found)
        if not confirm:
            return result
        if hashes:
            with self.journal.locked():
                result.forgotten = log_.record_forget(hashes)
        done = self.compact()
        result.compacted = done is not None
        result.removed_bytes = sum(old - new for _, old, new in done.edits) if done else 0
        result.notes.extend(self._sync_index())
        if purge:
            result.notes.extend(self._purge_index())
        return result

    def _as_stored(self, selector: _Selector) -> _Selector:
        """Selectors as the journal holds them: a secret in an id, session or query was redacted on
        the way in, so it is matched (and a miss named) in its redacted form, never echoed."""
        redactor = self._write.ingestor.redactor
        ids = frozenset(redactor.redact_id(i.strip()) for i in selector.ids) if selector.ids else None
        session = redactor.redact_text(selector.session)[0] if selector.session else None
        query = redactor.redact_text(selector.query)[0].casefold() if selector.query else None
        return _Selector(ids, session, query, selector.since_ms, selector.until_ms)

    def compact(self) -> Compaction | None:
        """Rewrite the journal without forgotten events, if any are left in it; views follow."""
        return compact(self.journal, self.forget_log, hold=self.substring.index.held_before,
                       after=self._after_compaction, settle=self._drop_vectors)

    def finish(self) -> Compaction | None:
        """Finish a forget a crash (SIGKILL, power loss) interrupted: its tombstone already hides the
        events, but the journal may still hold their lines until this compaction. Every command that
        opens the journal calls it first; nothing to finish costs one `stat` (or a read of the forget
        log's tail). A failure (a read-only home) leaves the tombstone hiding them, and is logged."""
        if not self.forget_log.unfinished():
            return None
        try:
            return self.compact()
        except (UrchinError, OSError) as exc:
            log.warning("an interrupted forget is not finished yet: %s", getattr(exc, "message", exc))
            return None

    def redact_rewrite(self, purge: bool = False) -> RewriteReport:
        """Apply the current redaction rules to every journal line; lines they change are rewritten,
        every other line stays byte-identical, and every view is refreshed. `purge`: the PostgreSQL
        tables are rewritten too, so no data file keeps the rows' old, unredacted text."""
        redactor = self._write.ingestor.redactor
        proof = self.journal.proof

        def rewrite(line: bytes) -> bytes | None:
            """A line the rules change, or one no write path proved (a reference journal, a line added
            by hand), is written again, redacted and signed: it is then served as it stands."""
            event = Event.from_json(line)
            if event is None:
                return None
            redacted = redactor.redact_event(event)
            if redacted == event and proof.proven(line):
                return None
            return proof.sign(redacted.to_json())

        done = compact(self.journal, self.forget_log, rewrite=rewrite, hold=self.substring.index.held_before,
                       after=self._after_compaction, settle=self._drop_vectors)
        rewritten = sum(1 for _, _, new in done.edits if new) if done else 0
        notes = (self._sync_index() if done else []) + self._rechunk_files()
        if purge:
            notes += self._purge_index()
        return {"rewritten": rewritten, "dropped": sum(1 for _, _, new in done.edits if not new) if done else 0,
                "notes": notes}

    # ---- the views follow ---------------------------------------------------------------------
    def _after_compaction(self, done: Compaction) -> None:
        """Under the journal lock, the new file in place: derived views drop what they hold of the old one."""
        self._write.ingestor.ids.catch_up()  # the sidecar names the old file's inode: rebuilt now
        self.journal.path.with_name(self.journal.path.name + ".stats").unlink(missing_ok=True)
        from urchin.search import cosine_store

        cosine_store.discard(self.settings.index_dir / "cosine")
        self._semantic.journal_replaced()

    def _drop_vectors(self, done: Compaction) -> None:
        """After the journal lock is released (it waits for the vector caches' writers, one embedding
        request long): drop the vectors of forgotten events, and of rewritten lines, which are embedded
        again. A cache's `journal.offset` goes with them under its writers' lock: every event is
        checked again (see `EmbeddingView.pending`)."""
        root = self.settings.home / "vectors"
        if not root.is_dir():
            return
        from urchin.search.vectors import VectorCache

        hidden = self.forget_log.hashes() | done.replaced
        for folder in root.iterdir():
            try:
                meta = orjson.loads((folder / "meta.json").read_bytes())
                cache = VectorCache(self.settings.home, folder.name, int(meta["dim"])).open()
            except (OSError, ValueError, KeyError, TypeError, UrchinError) as exc:
                log.warning("vector cache %s not cleaned: %s", folder, exc)
                continue
            try:
                with cache.exclusive():
                    cache.drop(lambda event_id: forget_hash(event_id) in hidden)
                    (folder / "journal.offset").unlink(missing_ok=True)
            finally:
                cache.close()
        self._semantic.drop_vector_cache()

    def _rechunk_files(self) -> list[str]:
        """Indexed workspace files are redacted text too: files indexed under other rules are re-chunked."""
        if not (self.settings.database_url or self.settings.pg_dir.exists()) or not self._index.files.roots:
            return []
        try:
            report = self._index.index_files()
        except UrchinError as exc:
            return [f"workspace files are re-chunked at the next `urchin index` ({exc.message})"]
        files = f"{report.indexed} workspace file{'' if report.indexed == 1 else 's'}"
        return [f"re-chunked {files} under the current rules"] if report.indexed else []

    def _sync_index(self) -> list[str]:
        """Delete forgotten rows from PostgreSQL now when an index exists; else the next feed does."""
        if not (self.settings.database_url or self.settings.pg_dir.exists()):
            return []
        try:
            deleted = self._index.service.sync_forgotten()
        except UrchinError as exc:
            return [f"PostgreSQL rows are removed at the next `urchin index` ({exc.message})"]
        return [f"removed {plural(deleted, 'row')} from the PostgreSQL index"] if deleted else []


    def _purge_index(self) -> list[str]:
        """`purge`: VACUUM FULL on Urchin's own server; on a shared one, say who does it."""
        if not (self.settings.database_url or self.settings.pg_dir.exists()):
            return []
        try:
            purged = self._index.service.purge()
        except UrchinError as exc:
            return [f"the PostgreSQL index was not purged ({exc.message})"]
        if not purged:
            return ["the shared database keeps the deleted rows' bytes until its owner runs VACUUM FULL "
                    "(contrib/team/TEAM.md)"]
        return ["purged the PostgreSQL index (VACUUM FULL, CHECKPOINT): no data file holds the forgotten rows"]


def _candidates(journal: Journal, selector: _Selector) -> Iterator[tuple[str, Event]]:
    """`(id in the line, event as served)` of the lines that may match; by ids, a line's id is read
    before the whole event is parsed. The selector matches and the preview shows the served event (a
    line the write path did not prove is redacted: neither the count nor the preview tells what was
    removed); the line's own id is what the tombstone hashes, so compaction drops that line."""
    for _, line in journal.iter_lines():
        stored_id = line_id(line)
        if selector.ids is not None and stored_id not in selector.ids:
            continue
        event = journal.event(line)
        if event is not None:
            yield stored_id or event.id, event


def _preview(event: Event) -> dict[str, Any]:
    text = " ".join(event.content.split())
    return {"id": event.id, "timestamp": event.timestamp, "source": event.source, "kind": event.kind,
            "session": event.session, "snippet": text[:117] + "…" if len(text) > 120 else text}
