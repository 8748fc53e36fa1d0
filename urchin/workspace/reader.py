"""Ranged reads of workspace files: a window of numbered lines and the file's total line count, bounded.

A read scans at most `SCAN_BYTES` of a file, for at most `SCAN_SECONDS`, and holds at most one
line's head at a time outside the window: lines before the window are passed by counting breaks
block by block, a line longer than `LINE_CHARS` is cut with a marker, and `totalLines` is counted
the same way after the window, or left out with a note when the scan stops first. The window is
redacted as one text (a private key block across lines is found whole, also one begun before the
window); a secret across a cut is replaced whole, never left as a prefix.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from urchin.errors import QueryError, ValidationError
from urchin.params.limits import MAX_LINES
from urchin.redact import MARKER, Redactor
from urchin.workspace.access import FileAccess

if TYPE_CHECKING:
    from urchin.params.workspace import FileParams

__all__ = ["FileRange", "read_range", "MAX_LINES", "LINE_CHARS", "SCAN_BYTES", "SCAN_SECONDS", "LINE_CUT"]

LINE_CHARS = 4096                    # a longer line is cut, with LINE_CUT after it
LINE_CUT = " …[line cut: longer than {} characters]"
SCAN_BYTES = 64 * 1024 * 1024        # a read looks at no more of a file than this
SCAN_SECONDS = 1.0                   # nor for longer (a slow disk, a network mount)
_MARGIN = 16 * 1024                  # read past a cut so a secret across it is seen whole (JWTs run long)
_KEEP = 4 * LINE_CHARS + _MARGIN     # bytes of a line kept (UTF-8: up to 4 bytes a character)
_LOOKBACK = 64 * 1024                # bytes before the window searched for an unfinished private key block
_BLOCK = 1024 * 1024
_BREAK = re.compile(rb"\r\n?|\n")    # the line breaks universal newlines know


@dataclass(frozen=True, slots=True)
class FileRange:
    path: str
    from_line: int
    to_line: int
    total_lines: int | None          # None: the scan stopped before the end (`note` says where)
    lines: list[str]
    note: str | None = None

    @property
    def truncated(self) -> bool:
        return self.total_lines is None or self.to_line < self.total_lines

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "fromLine": self.from_line, "toLine": self.to_line}
        if self.total_lines is not None:
            out["totalLines"] = self.total_lines
        else:
            out["totalLinesNote"] = self.note
        out["lines"] = [{"n": self.from_line + i, "text": t} for i, t in enumerate(self.lines)]
        out["truncated"] = self.truncated
        return out

    def render(self) -> str:
        width = len(str(max(self.to_line, 1)))
        body = "\n".join(f"{self.from_line + i:>{width}}  {text}" for i, text in enumerate(self.lines))
        of = f"of {self.total_lines}" if self.total_lines is not None else f"; {self.note}"
        more = ""
        if self.total_lines is None:
            more = f"\n… read on from line {self.to_line + 1}"
        elif self.to_line < self.total_lines:
            more = f"\n… lines {self.to_line + 1}-{self.total_lines} not shown (read on from line {self.to_line + 1})"
        return f"{self.path} (lines {self.from_line}-{self.to_line} {of})\n{body}{more}"


def read_range(files: FileAccess, params: FileParams) -> FileRange:
    """Lines `from_line`.. of a checked workspace file, redacted (line numbers kept), and its line
    count when the bounded scan reaches the end; the range was checked when `params` were built."""
    path, from_line, max_lines = params.path, params.from_line, params.max_lines
    loc = files.locate(path)
    if files.is_binary(loc):
        raise ValidationError("path", f"{path!r} is a binary file")
    raw: list[tuple[bytes, bool]] = []
    with files.open(loc) as handle:
        scan = _Scan(handle)
        reached = scan.skip(from_line - 1) == from_line - 1
        context = _pending_key(scan.tail)
        while reached and len(raw) < max_lines and (line := scan.line()) is not None:
            raw.append(line)
        scan.skip(None)
        total = scan.breaks + (1 if scan.unfinished() else 0) if scan.complete else None
    if not raw and from_line > 1:
        if total is None:
            raise QueryError("fromLine", f"{loc.display!r}: fromLine {from_line} is past what one read scans "
                                         f"({_scanned(scan)}); search it instead (`urchin context --mode live`)")
        raise QueryError("fromLine", f"{loc.display!r} has {total} line{'s' if total != 1 else ''}: "
                                     f"fromLine {from_line} is past its end")
    lines = _redact_window(files.redactor, context, raw)
    to_line = from_line + len(lines) - 1 if lines else from_line - 1
    note = None if total is not None else f"totalLines not counted: the scan stopped after {_scanned(scan)}"
    return FileRange(loc.display, from_line, to_line, total, lines, note)


def _scanned(scan: _Scan) -> str:
    return f"{scan.read // (1024 * 1024)} MiB" if scan.read >= 1024 * 1024 else f"{scan.read} bytes"


class _Scan:
    """A file read block by block, at most `SCAN_BYTES` and `SCAN_SECONDS`: lines passed by counting
    their breaks, or taken one at a time (each at most `_KEEP` bytes)."""

    def __init__(self, handle: BinaryIO) -> None:
        self.handle = handle
        self.buf = b""
        self.pos = 0
        self.read = 0
        self.eof = False
        self.stopped = False
        self.last = b""              # the file's last byte read
        self.tail = b""              # the last `_LOOKBACK` bytes passed by `skip` before the window
        self.breaks = 0              # line breaks passed so far
        self.deadline = time.monotonic() + SCAN_SECONDS

    @property
    def complete(self) -> bool:
        return self.eof and not self.stopped

    def unfinished(self) -> bool:
        """Does the file end in a line without a break (counted as a line)?"""
        return self.read > 0 and self.last not in (b"\n", b"\r")

    def _fill(self) -> bool:
        if self.eof or self.stopped:
            return False
        if self.read >= SCAN_BYTES or time.monotonic() > self.deadline:
            self.stopped = True
            return False
        block = self.handle.read(min(_BLOCK, SCAN_BYTES - self.read))
        if not block:
            self.eof = True
            return False
        self.read += len(block)
        self.last = block[-1:]
        self.buf = self.buf[self.pos:] + block
        self.pos = 0
        return True

    def _end(self) -> int:
        """Where the complete part of the buffer ends: a last `\\r` may be half of a `\\r\\n`."""
        end = len(self.buf)
        return end - 1 if end > self.pos and not self.eof and self.buf.endswith(b"\r") else end

    def skip(self, n: int | None) -> int:
        """Pass `n` line breaks (None: all); returns how many were passed before the file or the scan ended."""
        done = 0
        while n is None or done < n:
            buf, pos, end = self.buf, self.pos, self._end()
            found = buf.count(b"\n", pos, end)
            returns = buf.count(b"\r", pos, end)
            if returns:                         # `\r\n` is one break (most files have no `\r` at all)
                found += returns - buf.count(b"\r\n", pos, end)
            if n is not None and found >= n - done:
                for i, match in enumerate(_BREAK.finditer(buf, pos, end), done + 1):
                    if i == n:
                        self._passed(match.end(), n - done)
                        return n
            done += found
            self._passed(end, found)
            if not self._fill() and self._end() == self.pos:   # (at the end, a held-back `\r` is let go)
                return done
        return done

    def _passed(self, to: int, breaks: int) -> None:
        self.breaks += breaks
        if to > self.pos:
            self.tail = (self.tail + self.buf[max(self.pos, to - _LOOKBACK):to])[-_LOOKBACK:]
        self.pos = to

    def line(self) -> tuple[bytes, bool] | None:
        """The next line without its break: (its first `_KEEP` bytes, whether it was cut); None past the end."""
        while True:
            end = self._end()
            match = _BREAK.search(self.buf, self.pos, end)
            if match is not None:
                line = self.buf[self.pos:match.start()]
                self.pos = match.end()
                self.breaks += 1
                return line[:_KEEP], len(line) > _KEEP
            if end - self.pos > _KEEP:          # longer than kept: the head, then pass the rest
                head = self.buf[self.pos:self.pos + _KEEP]
                self.pos = end
                self.skip(1)
                return head, True
            if not self._fill():
                if self._end() > end:           # the end of the file lets a held-back `\r` go
                    continue
                if self.pos >= len(self.buf):
                    return None
                rest = self.buf[self.pos:]
                self.pos = len(self.buf)
                return rest, self.stopped


def _pending_key(before: bytes) -> str | None:
    """The BEGIN line of a private key block still open where the window starts, if any: the
    redactor then sees the block from its start (it is redacted through its END line)."""
    at = before.rfind(b"PRIVATE KEY")
    while at >= 0:
        start = max(before.rfind(b"\n", 0, at), before.rfind(b"\r", 0, at)) + 1
        stop = _BREAK.search(before, at)
        line = before[start:stop.start() if stop else len(before)]
        if b"-----END" in line:
            return None
        if b"-----BEGIN" in line:
            return line.decode("utf-8", "replace")
        at = before.rfind(b"PRIVATE KEY", 0, start)
    return None


def _redact_window(redactor: Redactor, context: str | None, raw: list[tuple[bytes, bool]]) -> list[str]:
    """Each line decoded, redacted in the window's context, and cut at `LINE_CHARS` (a secret across
    the cut becomes its whole marker)."""
    texts = [head.decode("utf-8", "replace") for head, _ in raw]
    lead = [] if context is None else [context]
    text = "\n".join([*lead, *texts])
    spans = redactor.spans(text)
    out: list[str] = []
    offset = len(context) + 1 if context is not None else 0
    at = 0                                   # the first span that may still touch a line
    for line, (_, cut) in zip(texts, raw, strict=True):
        start, end = offset, offset + len(line)
        cut = cut or len(line) > LINE_CHARS
        limit = min(end, start + LINE_CHARS)
        while at < len(spans) and spans[at][1] <= start:
            at += 1
        parts: list[str] = []
        pos = start
        for s, e, kind in spans[at:]:
            if s >= limit:
                break
            if s >= start:
                parts.append(text[pos:s])
            if s >= start or not out:        # a block begun before the window: its marker on the first line
                parts.append(MARKER.format(kind))
            pos = max(pos, min(e, end))
        if pos < limit:
            parts.append(text[pos:limit])
        out.append("".join(parts) + (LINE_CUT.format(LINE_CHARS) if cut else ""))
        offset = end + 1
    return out
