"""What every collector shares: the run loop over its files, delivery to the write path, the report.

A collector turns files an agent already keeps (transcripts, histories) into event dicts and hands
them to a sink (the single write path, `Ingestor.ingest`); a file's checkpoint (`checkpoints.py`)
moves only after the sink has returned, so events are durable before the offset that covers them is
saved. The checkpoint counts lines too, so an event read from a line cites it (`meta.origin`, see
`origin.py`). The fields of an item are made with `text.py`'s helpers.

Ids derived from content are keyed (`ids.py`); `deliver` skips an item whose former, unkeyed id
the journal already holds or forgot.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from urchin.collectors.checkpoints import READ_CHUNK, Checkpoints, check_rotation, count_lines, head_of
from urchin.collectors.ids import FormerIds, former_id, keyed_ids, pending_former
from urchin.collectors.origin import Lines
from urchin.collectors.text import Item, cap_content, fit_names
from urchin.config import Settings
from urchin.fileio import complete_lines
from urchin.redact import Redactor
from urchin.redact._idkey import IdKey
from urchin.timestamps import format_timestamp

__all__ = ["Item", "Sink", "Collector", "LineCollector", "CollectReport", "loads", "remember"]

Sink = Callable[[Sequence[Mapping[str, Any]]], Sequence[Any]]

MAX_PENDING_TOOLS = 256       # tool calls waiting for their result, kept per file


# ---- reports and the collector base -------------------------------------------------------------
@dataclass
class CollectReport:
    name: str
    files: int = 0
    appended: int = 0
    duplicate: int = 0
    suppressed: int = 0
    rejected: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)

    def add(self, results: Iterable[Any]) -> None:
        for result in results:
            status = getattr(result, "status", None)
            if status == "appended":
                self.appended += 1
            elif status == "duplicate":
                self.duplicate += 1
            elif status == "suppressed":
                self.suppressed += 1
            else:
                self.rejected += 1

    def to_dict(self) -> dict[str, Any]:
        return {"collector": self.name, "files": self.files, "appended": self.appended,
                "duplicate": self.duplicate, "suppressed": self.suppressed, "rejected": self.rejected,
                "skipped": self.skipped, "errors": self.errors}

    def summary(self) -> str:
        text = (f"{self.name}: {self.files} files, appended {self.appended}, duplicate {self.duplicate}, "
                f"suppressed {self.suppressed}, rejected {self.rejected}, skipped {self.skipped}")
        return text + (f", {len(self.errors)} errors" if self.errors else "")


class Collector:
    """One source of events on disk. Subclasses set `name`, `folders()` and `collect_into()`."""

    name = ""
    source = ""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._redactor: Redactor | None = None   # for content over the soft cap (`cap_content`)
        self._former = FormerIds(settings)

    def redactor(self) -> Redactor:
        if self._redactor is None:
            self._redactor = Redactor.from_config(self.settings.section("redact"), IdKey(self.settings.home))
        return self._redactor

    def folders(self) -> list[Path]:
        """The folders (or files) this collector reads; the daemon watches them."""
        raise NotImplementedError

    def found(self) -> bool:
        return any(p.exists() for p in self.folders())

    def files(self) -> list[Path]:
        raise NotImplementedError

    def run(self, sink: Sink) -> CollectReport:
        """Collect everything new, then record the run in the checkpoint file."""
        report = CollectReport(self.name)
        checkpoints = Checkpoints(self.settings, self.name).load()
        try:
            with keyed_ids(IdKey(self.settings.home)()):   # derived ids: see ids.py
                self.collect_into(sink, checkpoints, report)
        except Exception as exc:  # noqa: BLE001 - one collector's failure must not stop the others
            report.errors.append(f"{type(exc).__name__}: {exc}")
        checkpoints.stats["events"] = int(checkpoints.stats.get("events") or 0) + report.appended
        checkpoints.stats["lastRun"] = format_timestamp(ms=False)
        checkpoints.stats["lastError"] = report.errors[-1] if report.errors else None
        checkpoints.stats["lastReport"] = report.to_dict()
        checkpoints.save()
        return report

    def collect_into(self, sink: Sink, checkpoints: Checkpoints, report: CollectReport) -> None:
        raise NotImplementedError

    # ---- shared by subclasses ------------------------------------------------------------------
    def finish(self, items: Iterable[Item | None]) -> list[Item]:
        """Drop noise and cap content so no collected event is rejected for its size."""
        return [item for item, _ in self._finish(items)]

    def _finish(self, items: Iterable[Item | None]) -> list[tuple[Item, str | None]]:
        """`finish`, each item with its former (unkeyed) id, fitted as its id is (None: it has none)."""
        former = pending_former()
        out: list[tuple[Item, str | None]] = []
        for item in items:
            if not item:
                continue
            content = item.get("content")
            if not isinstance(content, str) or not content.strip():
                continue
            item = cap_content(item, self.settings.soft_cap_bytes, self.redactor)
            item.setdefault("source", self.source or self.name)
            if item.get("meta") is not None:
                item["meta"] = {k: v for k, v in item["meta"].items() if v is not None} or None
            before = former_id(item.get("id"), former)
            out.append((fit_names({k: v for k, v in item.items() if v is not None}),
                        fit_names({"id": before})["id"] if before else None))
        former.clear()   # each batch's digests were made for it
        return out

    def deliver(self, sink: Sink, items: Sequence[Item | None], report: CollectReport) -> None:
        ready = self._finish(items)
        held = self._former.held([before for _, before in ready]) if any(b for _, b in ready) else {}
        for status in held.values():
            if status == "duplicate":
                report.duplicate += 1
            else:
                report.suppressed += 1
        fresh = [item for index, (item, _) in enumerate(ready) if index not in held]
        if fresh:
            report.add(sink(fresh))


class LineCollector(Collector):
    """A collector over append-only JSONL (or line) files, read forward from a checkpoint."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._key = IdKey(settings.home)    # origins' hashes (read on first use)

    def parse(self, path: Path, lines: Lines, state: dict[str, Any], report: CollectReport) -> list[Item | None]:
        raise NotImplementedError

    def collect_into(self, sink: Sink, checkpoints: Checkpoints, report: CollectReport) -> None:
        for path in self.files():
            try:
                self.collect_file(path, sink, checkpoints, report)
            except OSError as exc:
                report.errors.append(f"{path}: {exc.strerror or exc}")
            except Exception as exc:  # noqa: BLE001 - one file an adapter did not foresee costs no other file
                report.errors.append(f"{path}: {type(exc).__name__}: {exc}")

    def collect_file(self, path: Path, sink: Sink, checkpoints: Checkpoints, report: CollectReport) -> None:
        cursor = checkpoints.cursor(path)
        check_rotation(path, cursor)
        if cursor.offset >= cursor.size:
            return
        report.files += 1
        if cursor.line is None:
            cursor.line = count_lines(path, cursor.offset)
        cited = os.path.abspath(path)
        for batch, next_offset in complete_lines(path, cursor.offset, READ_CHUNK):
            lines = Lines(batch, cited, cursor.line + 1, self._key)
            state = dict(cursor.state)
            try:
                items = self.parse(path, lines, state, report)
            except Exception:  # noqa: BLE001 - a line an adapter did not foresee: find it, keep the rest
                state = orjson.loads(orjson.dumps(cursor.state))   # the failed pass may have changed it
                items = self._parse_each(path, lines, state, report)
            self.deliver(sink, items, report)   # durable (fsync'd) before the cursor moves
            cursor.offset = next_offset
            cursor.line += len(lines)
            cursor.state = state
            cursor.head = head_of(path, cursor.offset)
            checkpoints.save()


    def _parse_each(self, path: Path, lines: Lines, state: dict[str, Any],
                     report: CollectReport) -> list[Item | None]:
        """`parse` line by line: the one line it fails on is skipped (and counted), never the others."""
        items: list[Item | None] = []
        for index in range(len(lines)):
            before = orjson.dumps(state)
            try:
                items.extend(self.parse(path, lines.one(index), state, report))
            except Exception:  # noqa: BLE001
                state.clear()
                state.update(orjson.loads(before))
                report.skipped += 1
        return items


def loads(line: bytes, report: CollectReport) -> Any:
    """Parse one JSON line; a broken line is counted and skipped, never fatal."""
    if not line.strip():
        return None
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        report.skipped += 1
        return None


def remember(pending: dict[str, Any], key: str, value: Any) -> None:
    """Keep a tool call until its result arrives; the oldest ones go first past the bound."""
    pending[key] = value
    while len(pending) > MAX_PENDING_TOOLS:
        pending.pop(next(iter(pending)))

