"""What every collector shares: per-file checkpoints, complete-line reading, text helpers, the run loop.

A collector turns files an agent already keeps (transcripts, histories) into event dicts and hands
them to a sink (the single write path, `Ingestor.ingest`); a file's checkpoint moves only after
the sink has returned, so events are durable before the offset that covers them is saved. The
checkpoint counts lines too, so an event read from a line cites it (`meta.origin`, see `origin.py`).

Ids derived from content are keyed (`ids.py`); `deliver` skips an item whose former, unkeyed id
the journal already holds or forgot.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from urchin.collectors.edits import describe as describe_edit
from urchin.collectors.ids import FormerIds, former_id, keyed_ids, pending_former, plain_hash, short_hash
from urchin.collectors.origin import origin_hash
from urchin.config import Settings
from urchin.event import MAX_ID_LENGTH, TRUNCATION_MARKER, as_name, clip, format_timestamp, quoted
from urchin.fileio import complete_lines, write_private
from urchin.redact import Redactor
from urchin.redact._idkey import IdKey

__all__ = [
    "Item", "Sink", "Checkpoints", "Collector", "LineCollector", "Lines", "CollectReport", "FileCursor",
    "with_origin", "count_lines", "workspace_for", "short_hash", "cap_text", "cap_content", "is_noise",
    "summarize_input", "text_of", "ms_to_iso", "complete_lines", "keyed_ids",
]

Item = dict[str, Any]
Sink = Callable[[Sequence[Mapping[str, Any]]], Sequence[Any]]

READ_CHUNK = 4 << 20          # bytes of a file read per step; a longer line grows the step
MAX_PENDING_TOOLS = 256       # tool calls waiting for their result, kept per file
_HEAD_BYTES = 256             # fingerprint of a file's start, to notice it was rewritten
_CUT_CONTEXT = 64 * 1024      # characters read past a cut: a secret the cut goes through ends in them

_PASTE_MARKER = re.compile(r"\[(?:Pasted text|Image) #\d+(?: \+\d+ lines)?\]")
_NOISE_COMMANDS = {"/clear", "/compact", "/exit", "/quit", "/help", "/cost", "/status", "/resume",
                   "/model", "/config", "/login", "/logout", "/init", "/memory", "/mcp", "/doctor"}
_NOISE_TEXT = ("[Request interrupted by user", "<command-name>", "<local-command-stdout>",
               "<command-message>", "<local-command-stderr>", "Caveat: The messages below were generated")


# ---- text helpers ----------------------------------------------------------------------------


def fit_names(item: Item) -> Item:
    """Names an adapter took from an agent's data (session, workspace, and the id built from them)
    made valid as `as_name` makes a folder's name: what an agent did is never lost because its
    session id holds a NUL or runs to 5,000 characters. Deterministic, so dedupe still holds."""
    for key, limit in (("session", 512), ("workspace", 512), ("id", MAX_ID_LENGTH - 40)):
        value = item.get(key)
        if not isinstance(value, str) or (value.isprintable() and len(value) <= limit):
            continue
        # cut before the token a cut would go through (the redactor would miss half a secret)
        short = as_name(quoted(value, limit, repr_=False) if len(value) > limit else value)
        item[key] = f"{short}~{plain_hash(value, length=32)}" if short != value else short or None
    return item


def ms_to_iso(value: Any) -> str | None:
    """Epoch milliseconds (int, float or numeric string) -> RFC 3339, or None."""
    try:
        ms = float(value)
    except (TypeError, ValueError):
        return None
    if ms <= 0:
        return None
    return format_timestamp(datetime.fromtimestamp(ms / 1000, UTC))


def text_of(content: Any) -> str:
    """Plain text of a message body: a string, or a list of blocks/parts with `text`."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        return ""
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict):
            kind = block.get("type")
            if kind in (None, "text", "input_text", "output_text") and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif kind == "tool_result":
                parts.append(text_of(block.get("content")))
    return "\n".join(p for p in parts if p)


def prompt_item(base: dict[str, Any], prompt: Any, event_id: str | None) -> dict[str, Any] | None:
    """A user prompt from a hook payload as an event item; None for noise (`/clear`, blanks)."""
    if not isinstance(prompt, str) or is_noise(prompt):
        return None
    item = {**base, "kind": "conversation", "content": prompt, "meta": {**base["meta"], "role": "user"}}
    if event_id:
        item["id"] = event_id
    return item


def is_noise(text: str) -> bool:
    """Low-signal lines: slash commands like /clear, interrupted markers, command echoes, paste-only."""
    stripped = text.strip()
    if not stripped:
        return True
    if stripped.split(maxsplit=1)[0] in _NOISE_COMMANDS and len(stripped) < 200:
        return True
    if stripped.startswith(_NOISE_TEXT):
        return True
    return not _PASTE_MARKER.sub("", stripped).strip()


def strip_paste_markers(text: str) -> str:
    return _PASTE_MARKER.sub("", text).strip() or text


def summarize_input(tool: str, args: Any, limit: int = 400) -> str:
    """One compact line for a tool call's input: what an edit did (`edits.describe`), the command,
    the path or pattern, else the JSON."""
    edit = describe_edit(args, limit)
    if edit is not None:
        return edit
    if isinstance(args, str):
        try:
            args = orjson.loads(args)
        except orjson.JSONDecodeError:
            return clip(args, limit)
    if isinstance(args, dict):
        for key in ("command", "cmd", "pattern", "query", "file_path", "path", "absolute_path", "url",
                    "prompt", "description"):
            value = args.get(key)
            if isinstance(value, list):
                value = " ".join(str(v) for v in value)
            if isinstance(value, str) and value.strip():
                extra = args.get("path") if key == "pattern" and isinstance(args.get("path"), str) else None
                text = f"{value} (in {extra})" if extra else value
                return clip(text, limit)
    if args in (None, {}, []):
        return ""
    try:
        return clip(orjson.dumps(args).decode(), limit)
    except TypeError:  # nested deeper than orjson writes (254 levels)
        return "(input nested too deeply to show)"


def cap_text(text: str, soft_cap: int) -> tuple[str, bool]:
    """Cut `text` to at most `soft_cap` bytes including the marker, so the write path keeps it whole.
    Redact first (`cap_content`): a secret cut in half no longer matches its rule."""
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size <= soft_cap:
        return text, False
    kept = clip(text, max(soft_cap - 80, soft_cap // 2), in_bytes=True)
    return kept + TRUNCATION_MARKER.format(dropped=size - len(kept.encode("utf-8"))), True


def cap_content(item: Item, soft_cap: int, redactor: Callable[[], Redactor]) -> Item:
    """Redact, then cap: content over the soft cap is redacted before it is cut, and what was found
    is counted in `meta.redactions` (the write path adds its own count). Only what a cut keeps and
    `_CUT_CONTEXT` characters after it are read: a hook payload may hold 8 MiB."""
    content = item.get("content")
    if not isinstance(content, str) or len(content) <= soft_cap // 4 or len(content.encode("utf-8")) <= soft_cap:
        return item
    window = content[:soft_cap + _CUT_CONTEXT]
    text, counts = redactor().redact_text(window)
    text, cut = cap_text(text, soft_cap)
    if not cut and len(window) < len(content):  # redaction made the window short enough; the rest is gone
        text += TRUNCATION_MARKER.format(dropped=len(content.encode("utf-8")) - len(window.encode("utf-8")))
        cut = True
    meta = dict(item.get("meta") or {})
    if cut:
        meta["truncated"] = True
    if counts:
        given = meta.get("redactions")
        merged = dict(given) if isinstance(given, dict) else {}
        for typ, n in counts.items():
            prior = merged.get(typ)
            merged[typ] = (prior if isinstance(prior, int) else 0) + n
        meta["redactions"] = merged
    item["content"] = text
    item["meta"] = meta
    return item


_WORKSPACES: dict[str, str | None] = {}


def workspace_for(cwd: Any) -> str | None:
    """The project folder's name: the git root's when there is one, else the folder's own."""
    if not isinstance(cwd, str) or not cwd.strip():
        return None
    if cwd in _WORKSPACES:
        return _WORKSPACES[cwd]
    path = Path(cwd)
    name = path.name or None
    probe = path
    for _ in range(40):
        try:
            if (probe / ".git").exists():
                name = probe.name or name
                break
        except (OSError, ValueError):  # a name too long for the OS, a NUL: no git root to find
            break
        if probe.parent == probe:
            break
        probe = probe.parent
    name = as_name(name) if name else None
    _WORKSPACES[cwd] = name
    return name


# ---- checkpoints ------------------------------------------------------------------------------
@dataclass
class FileCursor:
    """Where reading one file stopped: offset after the last complete line consumed, and how many
    lines lie before it (None in a checkpoint from before line numbers: counted once when next read)."""

    offset: int = 0
    inode: int = 0
    size: int = 0
    head: str = ""
    state: dict[str, Any] = field(default_factory=dict)
    line: int | None = 0

    def to_dict(self) -> dict[str, Any]:
        return {"offset": self.offset, "line": self.line, "inode": self.inode, "size": self.size,
                "head": self.head, "state": self.state}

    @classmethod
    def from_dict(cls, data: Any) -> FileCursor:
        if not isinstance(data, dict):
            return cls()
        state = data.get("state")
        line = data.get("line")
        return cls(int(data.get("offset") or 0), int(data.get("inode") or 0), int(data.get("size") or 0),
                   str(data.get("head") or ""), state if isinstance(state, dict) else {},
                   line if type(line) is int and line >= 0 else None)


class Checkpoints:
    """`$URCHIN_HOME/collectors/<name>.json` (0600): cursors per file plus run statistics."""

    def __init__(self, settings: Settings, name: str) -> None:
        self.path = settings.collectors_dir / f"{name}.json"
        self.files: dict[str, FileCursor] = {}
        self.stats: dict[str, Any] = {"events": 0, "lastRun": None, "lastError": None}

    def load(self) -> Checkpoints:
        try:
            data = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            return self
        except (OSError, orjson.JSONDecodeError):
            # A damaged checkpoint only costs a re-read: ids are deterministic, so nothing doubles.
            return self
        if isinstance(data, dict):
            files = data.get("files")
            if isinstance(files, dict):
                self.files = {k: FileCursor.from_dict(v) for k, v in files.items()}
            stats = data.get("stats")
            if isinstance(stats, dict):
                self.stats.update(stats)
        return self

    def cursor(self, path: Path) -> FileCursor:
        return self.files.setdefault(str(path), FileCursor())

    def save(self) -> None:
        body = orjson.dumps({"files": {k: v.to_dict() for k, v in self.files.items()}, "stats": self.stats})
        write_private(self.path, body)


def _head(path: Path, upto: int) -> str:
    with path.open("rb") as handle:
        return hashlib.blake2b(handle.read(min(upto, _HEAD_BYTES)), digest_size=8).hexdigest()


def check_rotation(path: Path, cursor: FileCursor) -> bool:
    """Reset `cursor` when the file was replaced, truncated or rewritten; True when it was."""
    st = path.stat()
    rotated = (cursor.inode and st.st_ino != cursor.inode) or st.st_size < cursor.offset
    if not rotated and cursor.offset and cursor.head and _head(path, cursor.offset) != cursor.head:
        rotated = True
    if rotated:
        cursor.offset, cursor.line, cursor.state = 0, 0, {}
    cursor.inode = st.st_ino
    cursor.size = st.st_size
    return bool(rotated)


def count_lines(path: Path, upto: int) -> int:
    """Newlines in the first `upto` bytes of `path`: the line count an older checkpoint lacks."""
    count = 0
    with path.open("rb") as handle:
        while upto > 0 and (chunk := handle.read(min(READ_CHUNK, upto))):
            count += chunk.count(b"\n")
            upto -= len(chunk)
    return count


# ---- where an event came from ------------------------------------------------------------------
class Lines(list[tuple[int, bytes]]):
    """A batch of complete lines as (byte offset, bytes) pairs, the first being line `first` (1-based)
    of `path`: what `LineCollector.parse` reads, and what the events it makes cite (`origin.py`)."""

    def __init__(self, lines: Iterable[tuple[int, bytes]], path: str, first: int, key: Callable[[], bytes]) -> None:
        super().__init__(lines)
        self.path = path
        self.first = first
        self.key = key

    def origin(self, index: int) -> dict[str, Any]:
        """`meta.origin` of an event made from line `index` of the batch (the raw bytes, before redaction)."""
        number = self.first + index
        return {"path": self.path, "lines": [number, number], "hash": origin_hash(self.key(), self[index][1])}

    def cite(self, index: int, items: Iterable[Item | None]) -> list[Item | None]:
        """`items`, made from line `index`, each with that line as its origin (hashed only if there are any)."""
        items = list(items)
        return with_origin(items, self.origin(index)) if any(items) else items

    def one(self, index: int) -> Lines:
        return Lines([self[index]], self.path, self.first + index, self.key)


def with_origin(items: Iterable[Item | None], origin: dict[str, Any] | None) -> list[Item | None]:
    """`items` with `meta.origin` set (left alone when `origin` is None)."""
    out = list(items)
    if origin is not None:
        for item in out:
            if item:
                item["meta"] = {**(item.get("meta") or {}), "origin": {**origin}}
    return out


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
            cursor.head = _head(path, cursor.offset)
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


def now_iso() -> str:
    return format_timestamp()
