"""An agent's file edit said plainly: which file, what it replaced, and the change itself.

Agents name the same edit differently (Claude Code's and Gemini CLI's `old_string`/`new_string`,
Claude's `edits` list, Copilot CLI's `old_str`/`new_str`, Codex's `apply_patch` text), and their
answers often only restate the path ("updated /x/redis.yaml"). Every adapter's tool line asks
`describe` for "/x/redis.yaml (replaced 3 lines with 4)" and `body` for the change, briefly.
Content goes through the one write path afterwards, so the redactor sees all of it.
"""

from __future__ import annotations

import re
from typing import Any

import orjson

from urchin.clipping import clip

__all__ = ["describe", "body", "edited_path"]

_PAIRS = (("old_string", "new_string"), ("old_str", "new_str"), ("oldString", "newString"))
_PATHS = ("file_path", "path", "filePath", "absolute_path")
_SIDE_CHARS = 300   # of each side of a change in the body: enough to find it again, not the whole file
_SIDE_LINES = 6
_RESTATES = 300     # an answer shorter than this that names the edited file says nothing more


def _lines(text: str) -> int:
    return len(text.splitlines()) or (1 if text else 0)


def _count(n: int) -> str:
    return f"{n} line" if n == 1 else f"{n} lines"


def _parsed(args: Any) -> Any:
    """Arguments as an agent sends them: a dict, or JSON text of one (Copilot CLI), or a patch's text."""
    if isinstance(args, str) and args.lstrip().startswith("{"):
        try:
            return orjson.loads(args)
        except orjson.JSONDecodeError:
            return args
    if isinstance(args, dict) and isinstance(args.get("input"), str) and _patch(args["input"]) is not None:
        return args["input"]   # Codex's apply_patch as a function call: {"input": "*** Begin Patch..."}
    return args


def _changes(args: Any) -> list[tuple[str, str]] | None:
    """The (old, new) text pairs of an edit's arguments, or None when they are not an edit's."""
    if not isinstance(args, dict):
        return None
    for old, new in _PAIRS:
        if isinstance(args.get(old), str) and isinstance(args.get(new), str):
            return [(args[old], args[new])]
    edits = args.get("edits")
    if isinstance(edits, list) and edits and all(isinstance(e, dict) for e in edits):
        pairs = [pair for e in edits for pair in (_changes(e) or [])]
        return pairs or None
    return None


def _path(args: dict[str, Any]) -> str:
    for key in _PATHS:
        if isinstance(args.get(key), str) and args[key].strip():
            return str(args[key])
    return "a file"


def _patch(text: str) -> tuple[list[str], int, int] | None:
    """Files, removed and added lines of an `apply_patch` text (Codex), or None when it is not one."""
    if not text.lstrip().startswith("*** Begin Patch"):
        return None
    files, removed, added = [], 0, 0
    for line in text.splitlines():
        for verb, done in (("Update", "updated"), ("Add", "added"), ("Delete", "deleted")):
            if line.startswith(f"*** {verb} File: "):
                files.append(f"{done} {line.split(': ', 1)[1].strip()}")
        if line.startswith("+") and not line.startswith("+++"):
            added += 1
        elif line.startswith("-") and not line.startswith("---"):
            removed += 1
    return files, removed, added


def describe(args: Any, limit: int = 400) -> str | None:
    """`/x/redis.yaml (replaced 3 lines with 4)` for an edit's arguments; None when they are not one."""
    args = _parsed(args)
    if isinstance(args, str):
        patch = _patch(args)
        if patch is None:
            return None
        files, removed, added = patch
        counts = [f"{verb} {_count(n)}" for verb, n in (("removed", removed), ("added", added)) if n]
        return clip(f"{', '.join(files) or 'a patch'} ({', '.join(counts) or 'no lines changed'})", limit)
    pairs = _changes(args)
    if pairs is None:
        return None
    old = sum(_lines(o) for o, _ in pairs)
    new = sum(_lines(n) for _, n in pairs)
    if not any(o for o, _ in pairs):
        what = f"inserted {_count(new)}"
    elif not any(n for _, n in pairs):
        what = f"deleted {_count(old)}"
    else:
        what = f"replaced {_count(old)} with {new}"
    if len(pairs) > 1:
        what = f"{len(pairs)} edits: {what}"
    if isinstance(args, dict) and args.get("replace_all") is True:
        what += ", every occurrence"
    return clip(f"{_path(args)} ({what})", limit)


_SAID = re.compile(r" \((?:\d+ edits: )?(?:replaced|inserted|deleted) [^()]*\)$")


def edited_path(summary: str) -> str:
    """The path of a `describe` summary ("/x/redis.yaml (replaced 3 lines with 4)" -> "/x/redis.yaml")."""
    return _SAID.sub("", summary)


def body(args: Any, output: str) -> str:
    """The event's text under the tool line: the agent's answer, unless it only restates the edited
    file (or is empty), when the change itself stands in for it: `- old` and `+ new` lines, briefly."""
    args = _parsed(args)
    pairs = _changes(args)
    if pairs is None:
        return output
    path = _path(args)
    if output.strip() and (len(output) >= _RESTATES or path not in output):
        return output
    shown: list[str] = []
    for old, new in pairs[:3]:
        shown += [f"- {line}" for line in _side(old)] + [f"+ {line}" for line in _side(new)]
    if len(pairs) > 3:
        shown.append(f"(and {len(pairs) - 3} more edits)")
    return "\n".join(shown)


def _side(text: str) -> list[str]:
    lines = clip(text, _SIDE_CHARS).splitlines()
    cut = len(lines) > _SIDE_LINES or len(text) > _SIDE_CHARS
    return lines[:_SIDE_LINES] + (["…"] if cut else [])
