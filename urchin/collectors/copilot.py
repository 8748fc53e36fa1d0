"""GitHub Copilot CLI: hook payloads (camelCase, `timestamp` in ms) and `session-state/<id>/events.jsonl`.

Session-state lines are envelopes `{type, id, timestamp, parentId, data}`; tool calls pair
`tool.execution_start` with `tool.execution_complete` by `toolCallId`. A prompt has the id
`copilot:<session>:prompt:<hash>` both ways, so the hook and the collector store it once.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from urchin.collectors.base import CollectReport, Item, LineCollector, loads, remember
from urchin.collectors.edits import body as edit_body
from urchin.collectors.ids import short_hash
from urchin.collectors.origin import Lines
from urchin.collectors.text import is_noise, ms_to_iso, prompt_item, summarize_input, text_of, workspace_for

__all__ = ["CopilotCollector", "from_hook", "hook_event"]

SOURCE = "copilot"


def prompt_id(session: str, text: str) -> str:
    return f"copilot:{session}:prompt:{short_hash(text.strip())}"


def hook_event(payload: Mapping[str, Any]) -> str | None:
    """Copilot does not name the event in the payload; infer it from the fields it carries."""
    for key in ("hookEventName", "hook_event_name", "event"):
        if isinstance(payload.get(key), str):
            return payload[key]
    if "prompt" in payload and "toolName" not in payload:
        return "userPromptSubmitted"
    if "toolResult" in payload:
        return "postToolUse"
    if "toolName" in payload:
        return "preToolUse"
    if "error" in payload:
        return "errorOccurred"
    if "reason" in payload:
        return "sessionEnd"
    if "source" in payload or "initialPrompt" in payload:
        return "sessionStart"
    return None


def from_hook(payload: Mapping[str, Any], event: str | None = None) -> Item | None:
    name = event or hook_event(payload)
    session = str(payload.get("sessionId") or payload.get("session_id") or "") or None
    cwd = payload.get("cwd")
    base: Item = {"source": SOURCE, "session": session, "workspace": workspace_for(cwd),
                  "timestamp": ms_to_iso(payload.get("timestamp")), "meta": {"hook": name, "cwd": cwd}}
    if name == "userPromptSubmitted":
        prompt = payload.get("prompt")
        return prompt_item(base, prompt, prompt_id(session, prompt) if session and isinstance(prompt, str) else None)
    if name in ("postToolUse", "postToolUseFailure"):
        tool = str(payload.get("toolName") or "tool")
        result = payload.get("toolResult")
        result = result if isinstance(result, dict) else {}
        output = str(result.get("textResultForLlm") or payload.get("error") or "")
        failed = name == "postToolUseFailure" or result.get("resultType") in ("failure", "denied")
        output = output if failed else edit_body(payload.get("toolArgs"), output)
        if not output.strip() and not failed:
            return None
        summary = summarize_input(tool, payload.get("toolArgs"))
        head = f"{tool}: {summary}" if summary else tool
        return {**base, "kind": "error" if failed else "tool_use",
                "content": f"{head}\n{output}" if output.strip() else head,
                "meta": {**base["meta"], "tool": tool, "result": result.get("resultType")}}
    if name == "errorOccurred":
        error = payload.get("error")
        error = error if isinstance(error, dict) else {"message": str(error or "")}
        message = f"{error.get('name') or 'Error'}: {error.get('message') or ''}".strip()
        return {**base, "kind": "error", "content": message}
    if name == "sessionStart":
        text = f"Copilot CLI session started ({payload.get('source') or 'new'})"
        initial = payload.get("initialPrompt")
        return {**base, "kind": "agent", "content": f"{text}: {initial}" if isinstance(initial, str) else text}
    if name == "sessionEnd":
        reason = payload.get("reason") or "complete"
        return {**base, "kind": "agent", "content": f"Copilot CLI session ended ({reason})"}
    return None


def parse_event(record: Any, state: dict[str, Any]) -> Item | None:
    """One `events.jsonl` line -> an event dict, or None; session and cwd come from `session.start`."""
    if not isinstance(record, dict) or not isinstance(record.get("data"), dict):
        return None
    kind, data = record.get("type"), record["data"]
    if kind in ("session.start", "session.resume"):
        context = data.get("context") if isinstance(data.get("context"), dict) else {}
        state["session"] = data.get("sessionId") or state.get("session")
        state["cwd"] = context.get("cwd") or context.get("gitRoot") or state.get("cwd")
        return None
    session = state.get("session")
    cwd = state.get("cwd")
    base: Item = {"source": SOURCE, "timestamp": record.get("timestamp") or None, "session": session,
                  "workspace": workspace_for(cwd), "meta": {"event_id": record.get("id"), "cwd": cwd}}
    if kind == "user.message":
        text = text_of(data.get("content"))
        if is_noise(text):
            return None
        return {**base, "id": prompt_id(session, text) if session else f"copilot:{record.get('id')}",
                "kind": "conversation", "content": text, "meta": {**base["meta"], "role": "user"}}
    if kind == "assistant.message":
        text = text_of(data.get("content"))
        if is_noise(text):
            return None
        return {**base, "id": f"copilot:{record.get('id')}", "kind": "conversation", "content": text,
                "meta": {**base["meta"], "role": "assistant"}}
    if kind == "tool.execution_start" and isinstance(data.get("toolCallId"), str):
        name = str(data.get("toolName") or "tool")
        summary = summarize_input(name, data.get("arguments"))
        remember(state.setdefault("pending", {}), data["toolCallId"], [name, summary])
        return None
    if kind == "tool.execution_complete":
        call = str(data.get("toolCallId") or "")
        name, summary = state.setdefault("pending", {}).pop(call, ["tool", ""])
        result = data.get("result") if isinstance(data.get("result"), dict) else {}
        error = data.get("error")
        output = text_of(result.get("content")) or text_of(result.get("detailedContent"))
        if isinstance(error, dict):
            output = str(error.get("message") or output)
        elif isinstance(error, str):
            output = error
        failed = data.get("success") is False or bool(error)
        if not output.strip() and not failed:
            return None
        head = f"{name}: {summary}" if summary else name
        return {**base, "id": f"copilot:{session}:tool:{call}" if call else f"copilot:{record.get('id')}",
                "kind": "error" if failed else "tool_use",
                "content": f"{head}\n{output}" if output.strip() else head,
                "meta": {**base["meta"], "tool": name, "tool_call_id": call or None}}
    if kind == "session.error":
        message = data.get("message") or data.get("errorType")
        return {**base, "id": f"copilot:{record.get('id')}", "kind": "error", "content": str(message or "")}
    return None


class CopilotCollector(LineCollector):
    name = "copilot"
    source = SOURCE

    def folders(self) -> list[Path]:
        assert self.settings.copilot_dir is not None
        return [self.settings.copilot_dir / "session-state"]

    def files(self) -> list[Path]:
        root = self.folders()[0]
        return sorted(root.glob("*/events.jsonl")) + sorted(root.glob("*.jsonl"))

    def parse(self, path: Path, lines: Lines, state: dict[str, Any], report: CollectReport) -> list[Item | None]:
        # The folder (or file) is named after the session: a fallback when session.start is missing.
        state.setdefault("session", path.parent.name if path.name == "events.jsonl" else path.stem)
        items: list[Item | None] = []
        for index, (_, line) in enumerate(lines):
            items.extend(lines.cite(index, [parse_event(loads(line, report), state)]))
        return items
