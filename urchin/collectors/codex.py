"""OpenAI Codex CLI: session rollouts `~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl`.

Lines are `{timestamp, type, payload}`: `session_meta` (id, cwd), `response_item` (messages,
`function_call` / `function_call_output` paired by `call_id`), `event_msg` and `turn_context`.
Older rollouts put the metadata first and the items bare. Ids: `codex:<session>:<byte offset>`
(rollouts are append-only), tool calls `codex:<session>:tool:<call_id>`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from urchin.collectors.base import CollectReport, Item, LineCollector, loads, remember
from urchin.collectors.origin import Lines
from urchin.collectors.text import is_noise, summarize_input, text_of, workspace_for

__all__ = ["CodexCollector", "parse_record"]

SOURCE = "codex"
_BOILERPLATE = ("<environment_context>", "<user_instructions>", "<permissions instructions>",
                "# AGENTS.md instructions", "<user_shell_command>")


def _output_text(output: Any) -> tuple[str, int | None]:
    """A function_call_output's text and exit code; some versions wrap it as a JSON string."""
    if isinstance(output, dict):
        text, meta = output.get("output") or output.get("content"), output.get("metadata")
    else:
        text, meta = output, None
        if isinstance(output, str) and output.startswith("{"):
            try:
                parsed = orjson.loads(output)
            except orjson.JSONDecodeError:
                parsed = None
            if isinstance(parsed, dict) and "output" in parsed:
                text, meta = parsed.get("output"), parsed.get("metadata")
    code = meta.get("exit_code") if isinstance(meta, dict) else None
    return (text if isinstance(text, str) else text_of(text)), code if isinstance(code, int) else None


def parse_record(record: Any, offset: int, state: dict[str, Any]) -> Item | None:
    """One rollout line at `offset` -> an event dict, or None."""
    if not isinstance(record, dict):
        return None
    kind = record.get("type")
    payload = record.get("payload") if isinstance(record.get("payload"), dict) else None
    if kind == "session_meta" or (offset == 0 and payload is None and "instructions" in record):
        meta = payload or record
        state["session"] = meta.get("id") or state.get("session")
        state["cwd"] = meta.get("cwd") or state.get("cwd")
        return None
    if kind == "turn_context" and payload is not None:
        state["cwd"] = payload.get("cwd") or state.get("cwd")
        return None
    if kind != "response_item" and payload is None and record.get("type") in ("message", "function_call",
                                                                             "function_call_output"):
        payload = record   # the old bare form
    elif kind != "response_item":
        return None
    if payload is None:
        return None
    session = state.get("session") or "unknown"
    base: Item = {"source": SOURCE, "timestamp": record.get("timestamp") or None, "session": session,
                  "workspace": workspace_for(state.get("cwd")), "meta": {"cwd": state.get("cwd")}}
    item_type = payload.get("type")
    if item_type == "message":
        role = payload.get("role")
        text = text_of(payload.get("content"))
        if role not in ("user", "assistant") or is_noise(text) or text.lstrip().startswith(_BOILERPLATE):
            return None
        return {**base, "id": f"codex:{session}:{offset}", "kind": "conversation", "content": text,
                "meta": {**base["meta"], "role": role}}
    if item_type in ("function_call", "custom_tool_call", "local_shell_call"):
        call = payload.get("call_id") or payload.get("id")
        name = str(payload.get("name") or ("shell" if item_type == "local_shell_call" else "tool"))
        args = payload.get("arguments", payload.get("input", payload.get("action")))
        if isinstance(call, str):
            remember(state.setdefault("pending", {}), call, [name, summarize_input(name, args)])
        return None
    if item_type in ("function_call_output", "custom_tool_call_output"):
        call = str(payload.get("call_id") or "")
        name, summary = state.setdefault("pending", {}).pop(call, ["tool", ""])
        output, code = _output_text(payload.get("output"))
        failed = code not in (None, 0)
        if not output.strip() and not failed:
            return None
        head = f"{name}: {summary}" if summary else name
        return {**base, "id": f"codex:{session}:tool:{call}" if call else f"codex:{session}:{offset}",
                "kind": "error" if failed else "tool_use",
                "content": f"{head}\n{output}" if output.strip() else head,
                "meta": {**base["meta"], "tool": name, "exit_code": code}}
    return None


class CodexCollector(LineCollector):
    name = "codex"
    source = SOURCE

    def folders(self) -> list[Path]:
        assert self.settings.codex_dir is not None
        return [self.settings.codex_dir / "sessions"]

    def files(self) -> list[Path]:
        return sorted(self.folders()[0].glob("**/*.jsonl"))

    def parse(self, path: Path, lines: Lines, state: dict[str, Any], report: CollectReport) -> list[Item | None]:
        if "session" not in state:
            # rollout-2025-10-29T00-59-38-<uuid>.jsonl: the uuid is the session, if meta is missing.
            state["session"] = "-".join(path.stem.split("-")[-5:]) if path.stem.startswith("rollout-") else path.stem
        items: list[Item | None] = []
        for index, (offset, line) in enumerate(lines):
            items.extend(lines.cite(index, [parse_record(loads(line, report), offset, state)]))
        return items
