"""What the collectors make an event item's fields of: a message body's text, a tool call's input
in one line, noise left out, names an agent gave made valid, a project folder's name, and content
redacted and capped before the write path sees it. The hook path uses these too.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from urchin.clipping import clip, quoted
from urchin.collectors.edits import describe as describe_edit
from urchin.collectors.ids import plain_hash
from urchin.event import MAX_ID_LENGTH, TRUNCATION_MARKER, as_name
from urchin.redact import Redactor
from urchin.timestamps import format_timestamp

__all__ = ["Item", "fit_names", "ms_to_iso", "text_of", "prompt_item", "is_noise", "strip_paste_markers",
           "summarize_input", "cap_text", "cap_content", "workspace_for"]

Item = dict[str, Any]

_CUT_CONTEXT = 64 * 1024      # characters read past a cut: a secret the cut goes through ends in them

_PASTE_MARKER = re.compile(r"\[(?:Pasted text|Image) #\d+(?: \+\d+ lines)?\]")
_NOISE_COMMANDS = {"/clear", "/compact", "/exit", "/quit", "/help", "/cost", "/status", "/resume",
                   "/model", "/config", "/login", "/logout", "/init", "/memory", "/mcp", "/doctor"}
_NOISE_TEXT = ("[Request interrupted by user", "<command-name>", "<local-command-stdout>",
               "<command-message>", "<local-command-stderr>", "Caveat: The messages below were generated")


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
