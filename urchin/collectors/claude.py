"""Claude Code: hook payloads and transcripts (`~/.claude/projects/*/*.jsonl`, `history.jsonl`).

Ids are shared by the hook and the transcript so a thing captured both ways is stored once:
an assistant reply is its line's `uuid`; a prompt is `claude:<session>:prompt:<hash of the text>`
(the hook cannot know the line's uuid yet); a tool call is `claude:<session>:tool:<tool_use_id>`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from urchin.collectors.base import CollectReport, Item, LineCollector, loads, remember
from urchin.collectors.edits import body as edit_body
from urchin.collectors.ids import short_hash
from urchin.collectors.origin import Lines
from urchin.collectors.text import (
    is_noise,
    ms_to_iso,
    prompt_item,
    strip_paste_markers,
    summarize_input,
    text_of,
    workspace_for,
)

__all__ = ["ClaudeCollector", "from_hook", "prompt_id", "tool_id", "response_text"]

SOURCE = "claude"
_TAIL_BYTES = 512 * 1024   # how much of a transcript the Stop hook reads back to find the reply


def prompt_id(session: str, text: str) -> str:
    return f"claude:{session}:prompt:{short_hash(text.strip())}"


def tool_id(session: str, tool_use_id: str) -> str:
    return f"claude:{session}:tool:{tool_use_id}"


def response_text(response: Any) -> str:
    """The readable part of a tool's response: output streams, content, else compact JSON."""
    if response is None:
        return ""
    if isinstance(response, str):
        return response
    if isinstance(response, list):
        return text_of(response)
    if isinstance(response, dict):
        streams = [response.get(k) for k in ("stdout", "stderr") if isinstance(response.get(k), str)]
        if any(streams):
            return "\n".join(s for s in streams if s)
        for key in ("content", "output", "result", "text", "message", "error"):
            value = response.get(key)
            if isinstance(value, (str, list)) and value:
                return value if isinstance(value, str) else text_of(value)
        file = response.get("file")
        if isinstance(file, dict) and isinstance(file.get("content"), str):
            return file["content"]
        if isinstance(response.get("filePath"), str):
            return f"updated {response['filePath']}"
    return orjson.dumps(response).decode()


def _tool_content(name: str, args: Any, output: str) -> str:
    summary = summarize_input(name, args)
    head = f"{name}: {summary}" if summary else name
    return f"{head}\n{output}" if output.strip() else head


# ---- hooks ------------------------------------------------------------------------------------
def from_hook(payload: Mapping[str, Any]) -> Item | None:
    """One Claude Code hook payload -> one event dict, or None for events not worth keeping."""
    name = payload.get("hook_event_name")
    session = str(payload.get("session_id") or "") or None
    cwd = payload.get("cwd")
    base: Item = {"source": SOURCE, "session": session, "workspace": workspace_for(cwd),
                  "meta": {"hook": name, "cwd": cwd}}
    if name == "UserPromptSubmit":
        prompt = payload.get("prompt")
        return prompt_item(base, prompt, prompt_id(session, prompt) if session and isinstance(prompt, str) else None)
    if name in ("PostToolUse", "PostToolUseFailure"):
        tool = str(payload.get("tool_name") or "tool")
        failed = name == "PostToolUseFailure"
        output = str(payload.get("error") or "") if failed else edit_body(
            payload.get("tool_input"), response_text(payload.get("tool_response")))
        if not failed and not output.strip():
            return None   # empty tool output is noise
        item = {**base, "kind": "error" if failed else "tool_use",
                "content": _tool_content(tool, payload.get("tool_input"), output),
                "meta": {**base["meta"], "tool": tool, "tool_use_id": payload.get("tool_use_id")}}
        if session and isinstance(payload.get("tool_use_id"), str):
            item["id"] = tool_id(session, payload["tool_use_id"])
        return item
    if name == "Stop":
        return _last_reply(payload, base)
    if name == "SessionStart":
        what = payload.get("source") or "startup"
        return {**base, "kind": "agent", "content": f"Claude Code session started ({what})"}
    if name == "SessionEnd":
        return {**base, "kind": "agent", "content": f"Claude Code session ended ({payload.get('reason') or 'exit'})"}
    if name == "PreCompact":
        extra = payload.get("custom_instructions")
        text = f"Claude Code compacted the conversation ({payload.get('trigger') or 'auto'})"
        return {**base, "kind": "agent", "content": f"{text}: {extra}" if extra else text}
    return None


def _last_reply(payload: Mapping[str, Any], base: Item) -> Item | None:
    """At Stop the reply is already in the transcript: take its uuid so the collector agrees."""
    path = payload.get("transcript_path")
    if not isinstance(path, str):
        return None
    try:
        with open(path, "rb") as handle:
            handle.seek(0, 2)
            size = handle.tell()
            handle.seek(max(0, size - _TAIL_BYTES))
            tail = handle.read()
    except OSError:
        return None
    for line in reversed(tail.split(b"\n")):
        if b'"assistant"' not in line:
            continue
        try:
            record = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        item = _assistant_item(record) if isinstance(record, dict) else None
        if item is not None:
            item["meta"] = {**base["meta"], **item.get("meta", {})}
            return item
    return None


# ---- transcripts --------------------------------------------------------------------------------
def _common(record: Mapping[str, Any]) -> Item:
    return {"source": SOURCE, "timestamp": record.get("timestamp") or None,
            "session": record.get("sessionId") or None, "workspace": workspace_for(record.get("cwd")),
            "meta": {"uuid": record.get("uuid"), "cwd": record.get("cwd"), "branch": record.get("gitBranch") or None,
                     "sidechain": True if record.get("isSidechain") else None}}


def _assistant_item(record: Mapping[str, Any]) -> Item | None:
    if record.get("type") != "assistant" or not isinstance(record.get("uuid"), str):
        return None
    message = record.get("message")
    blocks = message.get("content") if isinstance(message, dict) else None
    texts = [b["text"] for b in blocks or [] if isinstance(b, dict) and b.get("type") == "text"
             and isinstance(b.get("text"), str)] if isinstance(blocks, list) else [text_of(blocks)]
    text = "\n".join(t for t in texts if t.strip())
    if not text.strip() or is_noise(text):
        return None
    item = _common(record)
    item.update(id=record["uuid"], kind="conversation", content=text)
    item["meta"] = {**item["meta"], "role": "assistant",
                    "model": message.get("model") if isinstance(message, dict) else None}
    return item


def parse_line(record: Any, pending: dict[str, Any]) -> list[Item]:
    """One transcript line -> events (usually zero or one); tool calls wait in `pending`."""
    if not isinstance(record, dict) or record.get("isMeta") or record.get("isCompactSummary"):
        return []
    kind = record.get("type")
    session = record.get("sessionId")
    message = record.get("message")
    if kind == "assistant":
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else []:
            if isinstance(block, dict) and block.get("type") == "tool_use" and isinstance(block.get("id"), str):
                remember(pending, block["id"], [str(block.get("name") or "tool"), summarize_input(
                    str(block.get("name") or ""), block.get("input"))])
        item = _assistant_item(record)
        return [item] if item else []
    if kind != "user" or not isinstance(message, dict) or not isinstance(session, str):
        return []
    content = message.get("content")
    results = [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"] \
        if isinstance(content, list) else []
    if results:
        out = []
        for index, block in enumerate(results):
            use_id = str(block.get("tool_use_id") or "")
            name, summary = pending.pop(use_id, ["tool", ""])
            output = text_of(block.get("content"))
            if not output.strip() and not block.get("is_error"):
                continue   # empty tool output is noise
            item = _common(record)
            head = f"{name}: {summary}" if summary else name
            item.update(id=tool_id(session, use_id) if use_id else f"{record.get('uuid')}:{index}",
                        kind="error" if block.get("is_error") else "tool_use",
                        content=f"{head}\n{output}" if output.strip() else head)
            item["meta"] = {**item["meta"], "tool": name, "tool_use_id": use_id or None}
            out.append(item)
        return out
    text = text_of(content)
    if is_noise(text):
        return []
    item = _common(record)
    item.update(id=prompt_id(session, text), kind="conversation", content=text)
    item["meta"] = {**item["meta"], "role": "user"}
    return [item]


def parse_history(record: Any) -> Item | None:
    """A line of `~/.claude/history.jsonl`: a prompt as typed, pasted text folded back in."""
    if not isinstance(record, dict) or not isinstance(record.get("display"), str):
        return None
    text = record["display"]
    pasted = record.get("pastedContents")
    if isinstance(pasted, dict):
        for key, value in pasted.items():
            if isinstance(value, dict) and isinstance(value.get("content"), str):
                lines = value["content"].count("\n")
                for marker in (f"[Pasted text #{key} +{lines} lines]", f"[Pasted text #{key}]"):
                    text = text.replace(marker, value["content"])
    if is_noise(text):
        return None
    session = record.get("sessionId")
    project = record.get("project")
    stamp = ms_to_iso(record.get("timestamp"))
    ident = prompt_id(session, text) if isinstance(session, str) and session else \
        f"claude:history:{record.get('timestamp')}:{short_hash(text)}"
    return {"id": ident, "source": SOURCE, "kind": "conversation", "content": strip_paste_markers(text),
            "timestamp": stamp, "session": session if isinstance(session, str) else None,
            "workspace": workspace_for(project), "meta": {"role": "user", "cwd": project, "history": True}}


class ClaudeCollector(LineCollector):
    name = "claude"
    source = SOURCE

    def folders(self) -> list[Path]:
        root = self.settings.claude_dir
        assert root is not None
        return [root / "projects", root / "history.jsonl"]

    def files(self) -> list[Path]:
        root = self.settings.claude_dir
        assert root is not None
        projects = root / "projects"
        found = sorted(projects.glob("*/*.jsonl")) + sorted(projects.glob("*/*/subagents/*.jsonl"))
        history = root / "history.jsonl"
        return found + ([history] if history.is_file() else [])

    def parse(self, path: Path, lines: Lines, state: dict[str, Any], report: CollectReport) -> list[Item | None]:
        items: list[Item | None] = []
        if path.name == "history.jsonl" and path.parent == self.settings.claude_dir:
            for index, (_, line) in enumerate(lines):
                items.extend(lines.cite(index, [parse_history(loads(line, report))]))
            return items
        pending = state.setdefault("pending", {})
        for index, (_, line) in enumerate(lines):
            # a tool result cites its own line (the call's input summary came from an earlier one)
            items.extend(lines.cite(index, parse_line(loads(line, report), pending)))
        return items
