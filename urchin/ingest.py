"""The single write path every writer goes through.

validate -> redact -> stamp identity -> dedupe by id (and refuse forgotten ids: a collector
re-reading a transcript must not bring a forgotten event back) -> ephemeral check -> append (durable).
Each item gets one `IngestResult`: appended, duplicate, suppressed or rejected with the reason.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import accumulate
from typing import Any, Literal

import orjson

from urchin.config import Settings
from urchin.ephemeral import Ephemeral
from urchin.errors import ValidationError
from urchin.event import HARD_LIMIT_BYTES, Event, stored_as_given
from urchin.idindex import IdIndex, id_hash
from urchin.journal import Journal
from urchin.proof import LineProof
from urchin.redact import Redactor
from urchin.redact._idkey import IdKey
from urchin.tombstones import ForgetLog, forget_hash

__all__ = ["Ingestor", "IngestResult", "BatchReport", "Joined", "Prepared", "Status"]

Status = Literal["appended", "duplicate", "suppressed", "rejected"]


@dataclass(frozen=True, slots=True)
class IngestResult:
    status: Status
    id: str | None
    reason: str | None = None
    event: Event | None = None
    offset: int | None = None

    @property
    def label(self) -> str:
        """`appended`, `duplicate`, `suppressed: ephemeral mode` or `rejected: <reason>`."""
        return f"{self.status}: {self.reason}" if self.reason else self.status

    def for_writer(self) -> IngestResult:
        """The answer for a caller that may write but not read (the hooks' ingest-only token): whether
        an id was already held, or forgotten, is for readers to learn, else posting a guessed id
        would confirm it. A duplicate or a forgotten id answers as an append does; the event is
        still stored once and a forgotten one still not."""
        if self.status == "duplicate" or (self.status == "suppressed" and self.reason == "forgotten"):
            return IngestResult("appended", self.id)
        return self

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "status": self.label}
        if self.reason:
            out["reason"] = self.reason
        return out


@dataclass(slots=True)
class BatchReport:
    """The tally of a batch of writes (an import, an HTTP batch, the daemon writer's running totals):
    counts by status, and each rejected item's place (line number or index) and reason."""

    appended: int = 0
    duplicate: int = 0
    suppressed: int = 0
    rejected: list[tuple[int, str]] = field(default_factory=list)
    indexed_events: int = 0       # an import indexes what it appended, in one pass, before it returns
    index_seconds: float = 0.0
    workers: int = 0              # an import: processes that validated and redacted (0: all in this one)

    def add(self, result: IngestResult, where: int = 0) -> None:
        if result.status == "rejected":
            self.rejected.append((where, result.reason or "rejected"))
        elif result.status == "appended":
            self.appended += 1
        elif result.status == "duplicate":
            self.duplicate += 1
        else:
            self.suppressed += 1

    @classmethod
    def of(cls, results: Iterable[IngestResult]) -> BatchReport:
        report = cls()
        for index, result in enumerate(results):
            report.add(result, index)
        return report

    def counts(self) -> dict[str, int]:
        return {"appended": self.appended, "duplicate": self.duplicate, "suppressed": self.suppressed,
                "rejected": len(self.rejected)}

    def to_dict(self) -> dict[str, Any]:
        return {"appended": self.appended, "duplicate": self.duplicate, "suppressed": self.suppressed,
                "rejected": [{"line": n, "reason": r} for n, r in self.rejected],
                "index": {"events": self.indexed_events, "seconds": round(self.index_seconds, 2)}}

    def render(self) -> str:
        return (f"appended {self.appended}, duplicate {self.duplicate}, suppressed {self.suppressed}, "
                f"rejected {len(self.rejected)}")


class Ingestor:
    """Owns the journal's write side for one process. Construction does no I/O."""

    def __init__(self, settings: Settings, journal: Journal | None = None) -> None:
        self.settings = settings
        self.journal = journal or Journal(settings.journal_path, settings.durability, LineProof(settings))
        self.ids = IdIndex(self.journal)
        self.forgotten = ForgetLog(self.journal)
        self.redactor = Redactor.from_config(settings.section("redact"), IdKey(settings.home))
        self.ephemeral = Ephemeral(settings.home)
        self._actor = {"account": settings.account, "device": settings.device}

    def keep_ids_in_memory(self) -> None:
        """For bulk writers (import, the daemon): trade ~100 bytes/event of RAM for speed."""
        self.ids.load()

    def prepare(self, item: Mapping[str, Any] | Event, defaults: Mapping[str, Any] | None = None,
                now: datetime | None = None) -> Event:
        """Validate, redact and stamp one item; raises `ValidationError`."""
        given: Mapping[str, Any] | None = None
        if isinstance(item, Event):
            event = item
        else:
            data = {**defaults, **item} if defaults and isinstance(item, Mapping) else item
            if (type(data) is dict or isinstance(data, Mapping)) and data.get("actor") is None:   # an ABC check: slow
                data = {**data, "actor": dict(self._actor)}  # stamped here: one Event built, not two
            # Redact the whole text before the soft cap cuts it: a secret cut in half at the cap
            # would no longer match its pattern, and its first half would reach the disk.
            try:
                event = Event.from_input(data, now=now, soft_cap=HARD_LIMIT_BYTES)
            except ValidationError as exc:  # a rule may quote the value it refused: it must not carry a secret
                rule, field = self.redactor.redact_text(exc.rule)[0], self.redactor.redact_text(exc.field)[0]
                if rule == exc.rule and field == exc.field:
                    raise
                raise type(exc)(field, rule) from None
            given = data
        if event.actor is None:
            event = event.replace(actor=dict(self._actor))
        # Every string of the event, the stamped actor too, passes the redactor here, once.
        redacted = self.redactor.redact_event(event, given)
        cap = self.settings.soft_cap_bytes
        content = event.content
        if redacted is event and given is not None and len(content) <= cap and (
                content.isascii() or len(content) * 4 <= cap):
            # `from_input` checked this content (clean, not blank, under the hard limit) and the
            # redactor kept it: under the soft cap there is nothing left for `capped` to do
            return event
        return redacted.capped(cap)

    def as_given(self, record: Any) -> bytes | None:
        """`prepare(record).to_json()` in one pass, for a record already in the journal's own shape that
        holds nothing to redact (lines in Urchin's own shape, no proof): `orjson.dumps(record)` as it is. None for
        any other record (`prepare` decides, and refuses what it refuses)."""
        if (type(record) is dict and stored_as_given(record, self.settings.soft_cap_bytes)
                and self.redactor.keeps(record)):
            return orjson.dumps(record)
        return None

    def ingest(self, items: Iterable[Mapping[str, Any] | Event], defaults: Mapping[str, Any] | None = None,
               now: datetime | None = None) -> list[IngestResult]:
        results: list[IngestResult | None] = []
        ready: list[tuple[int, Event]] = []
        for item in items:
            try:
                ready.append((len(results), self.prepare(item, defaults, now)))
                results.append(None)
            except ValidationError as exc:
                results.append(self.rejected(item, exc))
        for index, result in self._append(ready, now):
            results[index] = result
        return [r for r in results if r is not None]

    def rejected(self, item: Any, exc: ValidationError) -> IngestResult:
        """The answer for an item `prepare` refused: its id as it would be stored (never a secret)."""
        rejected_id = item.get("id") if isinstance(item, Mapping) else None
        return IngestResult("rejected", self.redactor.redact_id(rejected_id) if isinstance(rejected_id, str) else None,
                            exc.message)

    def append_prepared(self, events: Sequence[Event], now: datetime | None = None) -> list[IngestResult]:
        """Append events already through `prepare` (the daemon's group commit): dedupe, ephemeral, one write."""
        results: list[IngestResult | None] = [None] * len(events)
        for index, result in self._append(list(enumerate(events)), now):
            results[index] = result
        return [r for r in results if r is not None]

    def append_lines(self, ids: Sequence[str], lines: Sequence[bytes], hashes: Sequence[int],
                     now: datetime | None = None) -> BatchReport:
        """Append the journal lines a worker process made with `prepare(...).to_json()`, with their
        events' ids and `id_hash`es (a parallel import, urchin/facade/bulk.py): the same dedupe,
        ephemeral check and one write. Returns the tally (an import reports counts, not each event)."""
        return self.append_joined(Joined.of(ids, lines, hashes), now)

    def append_joined(self, joined: Joined, now: datetime | None = None) -> BatchReport:
        """`append_lines` of lines a worker sent joined (one bytes object, no per-line objects)."""
        report = BatchReport()
        if self._append_new(joined, now, report):
            return report
        ids, hashes = joined.id_list(), joined.hashes
        ready = list(enumerate(map(Prepared, ids, joined.lines())))
        for index, result in self._append(ready, now, hashes, tally=report):
            report.add(result, index)
        return report

    def _append_new(self, joined: Joined, now: datetime | None, report: BatchReport) -> bool:
        """`append_joined` when nothing of the batch can be a duplicate, forgotten or suppressed (an import
        of new events, almost every batch): the lines are written as they are, without the per-event
        bookkeeping of `_append` (~5 us an event of the importing process, its one serial part).
        False, having written nothing, when any event needs that bookkeeping."""
        hashes = joined.hashes
        if not hashes:
            return True
        with self.journal.locked() as writer:
            self.ids.catch_up()
            held = self.ids.held(hashes)
            forgotten = self.forgotten.hashes()
            if (held is None or held or not joined.distinct or self.ephemeral.is_on(now)
                    or forgotten and any(forget_hash(i) in forgotten for i in joined.id_list())):
                return False
            offset = writer.write_joined(joined.payload)
            # each line's offset: its start in the payload, and where the payload landed
            offsets = array("Q", map(offset.__add__, joined.starts))
            writer.finish()
            self.ids.record_new(hashes, offsets, offset + len(joined.payload))
        report.appended += len(hashes)
        return True

    def _append(self, ready: Sequence[tuple[int, Event | Prepared]], now: datetime | None,
                hashes_given: Sequence[int] | None = None, tally: BatchReport | None = None
                ) -> list[tuple[int, IngestResult]]:
        """Dedupe, check and write `ready`; the result of each. With `tally`, appended events are only
        counted there (no result each: an import of millions)."""
        if not ready:
            return []
        out: list[tuple[int, IngestResult]] = []
        with self.journal.locked() as writer:
            self.ids.catch_up()
            fresh: list[tuple[int, Event | Prepared]] = []
            hashes: list[int] = []
            seen: set[str] = set()
            forgotten = self.forgotten.hashes()
            given = hashes_given if hashes_given is not None else [id_hash(event.id) for _, event in ready]
            held = self.ids.held(given)   # the ids that may be duplicates: only these are looked up
            for (index, event), h in zip(ready, given, strict=True):
                if forgotten and forget_hash(event.id) in forgotten:
                    out.append((index, IngestResult("suppressed", event.id, "forgotten", _event(event))))
                elif event.id in seen or (held is None or h in held) and self.ids.contains(event.id, h):
                    out.append((index, IngestResult("duplicate", event.id, event=_event(event))))
                else:
                    seen.add(event.id)
                    fresh.append((index, event))
                    hashes.append(h)
            if fresh and self.ephemeral.is_on(now):
                self.ephemeral.count_suppressed(len(fresh))
                out.extend((i, IngestResult("suppressed", e.id, "ephemeral mode", _event(e))) for i, e in fresh)
                return out
            fresh, hashes, lines = _serialise(fresh, hashes, out, self.journal.proof.sign)
            if not lines:
                return out
            offset = writer.write(lines)
            placed: list[tuple[int, int]] = []
            if tally is not None:
                tally.appended += len(fresh)
            for (index, event), line, h in zip(fresh, lines, hashes, strict=True):
                if tally is None:
                    out.append((index, IngestResult("appended", event.id, event=_event(event), offset=offset)))
                placed.append((h, offset))
                offset += len(line) + 1
            writer.finish()
            self.ids.record_hashed(placed, offset)
        return out


def _serialise(fresh: list[tuple[int, Event | Prepared]], hashes: list[int], out: list[tuple[int, IngestResult]],
               sign: Callable[[bytes], bytes]) -> tuple[list[tuple[int, Event | Prepared]], list[int], list[bytes]]:
    """Each event's journal line, signed (`Prepared` lines come signed). Validation makes this always
    succeed; should it not, only the event that cannot be serialised is rejected, never the others."""
    kept: list[tuple[int, Event | Prepared]] = []
    kept_hashes: list[int] = []
    lines: list[bytes] = []
    for (index, event), h in zip(fresh, hashes, strict=True):
        try:
            line = event.to_json() if isinstance(event, Prepared) else sign(event.to_json())
        except (TypeError, ValueError) as exc:  # orjson.JSONEncodeError is a TypeError
            out.append((index, IngestResult("rejected", event.id, f"event: cannot be serialised ({exc})")))
            continue
        kept.append((index, event))
        kept_hashes.append(h)
        lines.append(line)
    return kept, kept_hashes, lines


class Prepared:
    """An event a worker process validated, redacted, serialised and signed: its id and its journal line."""

    __slots__ = ("id", "line")

    def __init__(self, id: str, line: bytes) -> None:
        self.id = id
        self.line = line

    def to_json(self) -> bytes:
        return self.line


class Joined:
    """A batch of journal lines as a worker process sends it: one payload (each line ends in a newline),
    each line's start in it, the events' id hashes, and their ids joined by newlines (no id holds a
    control character), split only when a batch needs them one by one. `distinct`: no id twice."""

    __slots__ = ("ids", "distinct", "payload", "starts", "hashes")

    def __init__(self, ids: str, distinct: bool, payload: bytes, starts: Sequence[int], hashes: Sequence[int]) -> None:
        self.ids, self.distinct, self.payload, self.starts, self.hashes = ids, distinct, payload, starts, hashes

    @classmethod
    def of(cls, ids: Sequence[str], lines: Sequence[bytes], hashes: Sequence[int]) -> Joined:
        payload = b"".join(line + b"\n" for line in lines)
        starts = list(accumulate((len(line) + 1 for line in lines), initial=0))[:-1]
        return cls("\n".join(ids), len(set(ids)) == len(ids), payload, starts, hashes)

    def id_list(self) -> list[str]:
        return self.ids.split("\n") if self.hashes else []

    def lines(self) -> list[bytes]:
        return self.payload.split(b"\n")[:-1] if self.hashes else []


def _event(item: Event | Prepared) -> Event | None:
    return item if isinstance(item, Event) else None
