"""Gemini CLI: hook payloads and chat files under `~/.gemini/tmp/<project hash>/chats/`.

Two chat forms: `session-*.json` (one object with `messages`, rewritten as it grows) and the
newer `session-*.jsonl` (a metadata line, `$set` lines, and messages re-appended whenever they
change: the last copy wins). A message is kept once it is final: a later message follows it, or
the file has been quiet for `SETTLE_S` seconds. Prompts and replies are keyed by a hash of their
text, which the `BeforeAgent`/`AfterAgent` hooks can compute too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from urchin.collectors.base import CollectReport, Item, LineCollector, Sink, loads
from urchin.collectors.checkpoints import Checkpoints, check_rotation
from urchin.collectors.edits import body as edit_body
from urchin.collectors.ids import short_hash
from urchin.collectors.origin import Lines, with_origin
from urchin.collectors.text import is_noise, summarize_input, workspace_for

__all__ = ["GeminiCollector", "from_hook", "SETTLE_S"]

SOURCE = "gemini"
SETTLE_S = 10.0


def prompt_id(session: str, text: str) -> str:
    return f"gemini:{session}:prompt:{short_hash(text.strip())}"


def reply_id(session: str, text: str) -> str:
    return f"gemini:{session}:reply:{short_hash(text.strip())}"


def _parts_text(content: Any) -> str:
    """Text of a PartListUnion: a string, a part, or parts (functionResponse outputs included)."""
    if isinstance(content, list):
        return "\n".join(t for t in (_parts_text(p) for p in content) if t)
    if isinstance(content, dict):
        if isinstance(content.get("text"), str):
            return content["text"]
        response = content.get("functionResponse")
        if isinstance(response, dict) and isinstance(response.get("response"), dict):
            inner = response["response"]
            value = inner.get("output", inner.get("error", inner.get("content")))
            return value if isinstance(value, str) else _parts_text(value)
        return ""
    return content if isinstance(content, str) else ""


def from_hook(payload: Mapping[str, Any]) -> Item | None:
    name = payload.get("hook_event_name")
    session = str(payload.get("session_id") or "") or None
    cwd = payload.get("cwd")
    base: Item = {"source": SOURCE, "session": session, "workspace": workspace_for(cwd),
                  "timestamp": payload.get("timestamp") or None, "meta": {"hook": name, "cwd": cwd}}
    if name == "BeforeAgent":
        prompt = payload.get("prompt")
        if not isinstance(prompt, str) or is_noise(prompt):
            return None
        return {**base, "id": prompt_id(session, prompt) if session else None, "kind": "conversation",
                "content": prompt, "meta": {**base["meta"], "role": "user"}}
    if name == "AfterAgent":
        reply = payload.get("prompt_response")
        if not isinstance(reply, str) or is_noise(reply):
            return None
        return {**base, "id": reply_id(session, reply) if session else None, "kind": "conversation",
                "content": reply, "meta": {**base["meta"], "role": "assistant"}}
    if name == "AfterTool":
        tool = str(payload.get("tool_name") or "tool")
        response = payload.get("tool_response")
        response = response if isinstance(response, dict) else {"llmContent": response}
        error = response.get("error")
        output = _parts_text(response.get("llmContent")) or (
            response["returnDisplay"] if isinstance(response.get("returnDisplay"), str) else "")
        if error:
            output = str(error.get("message") if isinstance(error, dict) else error)
        else:
            output = edit_body(payload.get("tool_input"), output)
        if not output.strip() and not error:
            return None
        summary = summarize_input(tool, payload.get("tool_input"))
        head = f"{tool}: {summary}" if summary else tool
        return {**base, "kind": "error" if error else "tool_use",
                "content": f"{head}\n{output}" if output.strip() else head, "meta": {**base["meta"], "tool": tool}}
    if name == "SessionStart":
        started = payload.get("source") or "startup"
        return {**base, "kind": "agent", "content": f"Gemini CLI session started ({started})"}
    if name == "SessionEnd":
        return {**base, "kind": "agent", "content": f"Gemini CLI session ended ({payload.get('reason') or 'exit'})"}
    return None


def message_items(message: Mapping[str, Any], session: str, cwd: str | None) -> list[Item]:
    """One chat message -> its events: the text, and one event per tool call of a model message."""
    kind = message.get("type")
    base: Item = {"source": SOURCE, "timestamp": message.get("timestamp") or None, "session": session,
                  "workspace": workspace_for(cwd), "meta": {"message_id": message.get("id"), "cwd": cwd}}
    text = _parts_text(message.get("content"))
    out: list[Item] = []
    if kind == "user" and not is_noise(text):
        out.append({**base, "id": prompt_id(session, text), "kind": "conversation", "content": text,
                    "meta": {**base["meta"], "role": "user"}})
    elif kind == "gemini":
        if not is_noise(text):
            out.append({**base, "id": reply_id(session, text), "kind": "conversation", "content": text,
                        "meta": {**base["meta"], "role": "assistant", "model": message.get("model")}})
        for call in message.get("toolCalls") or []:
            if not isinstance(call, dict):
                continue
            tool = str(call.get("name") or "tool")
            output = call["resultDisplay"] if isinstance(call.get("resultDisplay"), str) else ""
            output = output or _parts_text(call.get("result"))
            failed = call.get("status") in ("error", "cancelled")
            output = output if failed else edit_body(call.get("args"), output)
            if not output.strip() and not failed:
                continue
            summary = summarize_input(tool, call.get("args"))
            head = f"{tool}: {summary}" if summary else tool
            out.append({**base, "id": f"gemini:{session}:tool:{call.get('id') or short_hash(head, output)}",
                        "timestamp": call.get("timestamp") or base["timestamp"],
                        "kind": "error" if failed else "tool_use",
                        "content": f"{head}\n{output}" if output.strip() else head,
                        "meta": {**base["meta"], "tool": tool, "status": call.get("status")}})
    elif kind == "error" and text.strip():
        out.append({**base, "id": f"gemini:{session}:{message.get('id')}", "kind": "error", "content": text})
    return out


class GeminiCollector(LineCollector):
    name = "gemini"
    source = SOURCE

    def folders(self) -> list[Path]:
        assert self.settings.gemini_dir is not None
        return [self.settings.gemini_dir / "tmp"]

    def files(self) -> list[Path]:
        root = self.folders()[0]
        return sorted(root.glob("*/chats/session-*.json")) + sorted(root.glob("*/chats/session-*.jsonl"))

    def _cwd(self, path: Path) -> str | None:
        # Gemini keeps the project root in `<project hash>/.project_root` in recent versions.
        try:
            return (path.parent.parent / ".project_root").read_text("utf-8").strip() or None
        except OSError:
            return None

    def collect_into(self, sink: Sink, checkpoints: Checkpoints, report: CollectReport) -> None:
        for path in self.files():
            try:
                if path.suffix == ".json":
                    self._collect_whole(path, sink, checkpoints, report)
                else:
                    self.collect_file(path, sink, checkpoints, report)
            except OSError as exc:
                report.errors.append(f"{path}: {exc.strerror or exc}")
            except Exception as exc:  # noqa: BLE001 - one file an adapter did not foresee costs no other file
                report.errors.append(f"{path}: {type(exc).__name__}: {exc}")

    @staticmethod
    def _settled(path: Path) -> bool:
        return time.time() - path.stat().st_mtime >= SETTLE_S

    def _collect_whole(self, path: Path, sink: Sink, checkpoints: Checkpoints, report: CollectReport) -> None:
        """`session-*.json` is rewritten whole: re-read it when it changed, keep messages past `done`."""
        cursor = checkpoints.cursor(path)
        st = path.stat()
        if cursor.state.get("mtime_ns") == st.st_mtime_ns and cursor.size == st.st_size \
                and cursor.state.get("settled"):
            return
        try:
            record = orjson.loads(path.read_bytes())
        except orjson.JSONDecodeError:
            return   # caught mid-write: the next run reads it whole
        if not isinstance(record, dict) or not isinstance(record.get("messages"), list):
            report.skipped += 1
            return
        report.files += 1
        messages = [m for m in record["messages"] if isinstance(m, dict)]
        settled = self._settled(path)
        done = min(int(cursor.state.get("done") or 0), len(messages))
        final = len(messages) if settled else max(done, len(messages) - 1)
        session = str(record.get("sessionId") or path.stem)
        cwd = self._cwd(path)
        items: list[Item | None] = []
        for message in messages[done:final]:
            try:
                items.extend(message_items(message, session, cwd))
            except Exception:  # noqa: BLE001 - one message an adapter did not foresee costs no other
                report.skipped += 1
        self.deliver(sink, items, report)
        cursor.inode, cursor.size = st.st_ino, st.st_size
        cursor.state = {"done": final, "mtime_ns": st.st_mtime_ns, "settled": settled}
        checkpoints.save()

    def collect_file(self, path: Path, sink: Sink, checkpoints: Checkpoints, report: CollectReport) -> None:
        cursor = checkpoints.cursor(path)
        check_rotation(path, cursor)
        if cursor.offset >= cursor.size and cursor.state.get("open") and self._settled(path):
            # Nothing new, but the last message has now been quiet long enough to keep.
            open_message = cursor.state.pop("open")
            items = message_items(open_message, cursor.state.get("session") or path.stem, cursor.state.get("cwd"))
            self.deliver(sink, with_origin(items, cursor.state.pop("open_origin", None)), report)
            checkpoints.save()
            return
        super().collect_file(path, sink, checkpoints, report)

    def parse(self, path: Path, lines: Lines, state: dict[str, Any], report: CollectReport) -> list[Item | None]:
        state.setdefault("session", path.stem)
        if "cwd" not in state:
            state["cwd"] = self._cwd(path)
        items: list[Item | None] = []
        for index, (_, line) in enumerate(lines):
            record = loads(line, report)
            if not isinstance(record, dict):
                continue
            if isinstance(record.get("$set"), dict):
                record = {**record["$set"], "_meta": True}
            if "type" not in record and record.get("sessionId"):
                state["session"] = record["sessionId"]
                continue
            if "$rewindTo" in record or record.get("_meta") or not isinstance(record.get("id"), str):
                continue
            open_message = state.get("open")
            if open_message and open_message.get("id") != record["id"]:
                items.extend(with_origin(message_items(open_message, state["session"], state.get("cwd")),
                                         state.get("open_origin")))
            state["open"] = record   # the same id again replaces it: the last copy wins (and is cited)
            state["open_origin"] = lines.origin(index)
        if state.get("open") and self._settled(path):
            items.extend(with_origin(message_items(state.pop("open"), state["session"], state.get("cwd")),
                                     state.pop("open_origin", None)))
        return items
