"""Shell: bash history (`#<epoch>` lines when HISTTIMEFORMAT is set), zsh extended history
(`: <epoch>:<duration>;cmd`), fish history, and the `urchin hook shell` payload of contrib/shell.

A command's id is `shell:<shell>:<epoch>:<hash>` (or `shell:<shell>:<hash>` without a time), so
the prompt hook and the history file agree, and a history rewritten by the shell dedupes.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from urchin.collectors.base import CollectReport, Item, LineCollector
from urchin.collectors.ids import short_hash
from urchin.collectors.text import ms_to_iso, workspace_for

__all__ = ["ShellCollector", "from_hook", "command_item", "shell_of"]

SOURCE = "shell"
_ZSH_EXTENDED = re.compile(r"^: (\d+):(\d+);(.*)$", re.S)
_BASH_TIME = re.compile(rb"^#(\d{9,11})$")
_BARE_NOISE = {"ls", "ll", "la", "l", "cd", "pwd", "clear", "exit", "history", "fg", "bg", "jobs", "reset",
               "logout", "true", "false", ":"}


def shell_of(path: Path) -> str:
    name = path.name.lower()
    return "zsh" if "zsh" in name else "fish" if "fish" in name else "bash"


def _noise(command: str) -> bool:
    stripped = command.strip()
    return not stripped or stripped in _BARE_NOISE or command.startswith(" ")


def command_item(shell: str, command: str, epoch: int | None, *, exit_code: Any = None, cwd: Any = None,
                 duration_ms: Any = None, session: Any = None) -> Item | None:
    """One command -> one event; a command typed with a leading space is private (HISTCONTROL)."""
    if _noise(command):
        return None
    command = command.rstrip("\n")
    key = short_hash(command.strip())
    ident = f"shell:{shell}:{epoch}:{key}" if epoch else f"shell:{shell}:{key}"
    meta = {"shell": shell, "exit_code": exit_code, "cwd": cwd, "duration_ms": duration_ms,
            "time_unknown": None if epoch else True}
    return {"id": ident, "source": SOURCE, "kind": "command", "content": command,
            "timestamp": ms_to_iso(epoch * 1000) if epoch else None, "workspace": workspace_for(cwd),
            "session": str(session) if session not in (None, "") else None, "meta": meta}


def _int(value: Any) -> int | None:
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return None


def from_hook(payload: Mapping[str, Any]) -> Item | None:
    """`{"shell", "command", "exit_code", "cwd", "started" (epoch s), "duration_ms", "session"}`."""
    command = payload.get("command")
    if not isinstance(command, str):
        return None
    shell = str(payload.get("shell") or "bash").lower()
    shell = shell if shell in ("bash", "zsh", "fish") else "sh"
    return command_item(shell, command, _int(payload.get("started")), exit_code=_int(payload.get("exit_code")),
                        cwd=payload.get("cwd"), duration_ms=_int(payload.get("duration_ms")),
                        session=payload.get("session"))


def _unmetafy(raw: bytes) -> str:
    """zsh stores bytes >= 0x83 as 0x83 followed by the byte xor 0x20."""
    if b"\x83" in raw:
        out = bytearray()
        it = iter(raw)
        for byte in it:
            out.append(next(it, 0x20) ^ 0x20 if byte == 0x83 else byte)
        raw = bytes(out)
    return raw.decode("utf-8", "replace")


def _fish_unescape(text: str) -> str:
    return text.replace("\\n", "\n").replace("\\\\", "\\")


class ShellCollector(LineCollector):
    name = "shell"
    source = SOURCE

    def folders(self) -> list[Path]:
        return list(self.settings.shell_histories)

    def files(self) -> list[Path]:
        return [p for p in self.settings.shell_histories if p.is_file()]

    def parse(self, path: Path, lines: list[tuple[int, bytes]], state: dict[str, Any],
              report: CollectReport) -> list[Item | None]:
        shell = shell_of(path)
        if shell == "zsh":
            return self._zsh(lines, state)
        if shell == "fish":
            return self._fish(lines, state)
        items: list[Item | None] = []
        for _, raw in lines:
            stamp = _BASH_TIME.match(raw.strip())
            if stamp:
                state["time"] = int(stamp.group(1))
                continue
            items.append(command_item("bash", raw.decode("utf-8", "replace"), state.pop("time", None)))
        return items

    def _zsh(self, lines: list[tuple[int, bytes]], state: dict[str, Any]) -> list[Item | None]:
        items: list[Item | None] = []
        for _, raw in lines:
            text = _unmetafy(raw)
            if "partial" in state:
                text = state.pop("partial") + "\n" + text
            if text.endswith("\\"):
                state["partial"] = text[:-1]   # a multi-line command continues on the next line
                continue
            match = _ZSH_EXTENDED.match(text)
            if match:
                items.append(command_item("zsh", match.group(3), int(match.group(1)),
                                          duration_ms=int(match.group(2)) * 1000))
            else:
                items.append(command_item("zsh", text, None))
        return items

    def _fish(self, lines: list[tuple[int, bytes]], state: dict[str, Any]) -> list[Item | None]:
        items: list[Item | None] = []
        for _, raw in lines:
            text = raw.decode("utf-8", "replace")
            if text.startswith("- cmd: "):
                state["cmd"] = _fish_unescape(text[len("- cmd: "):])
            elif text.startswith("  when: ") and "cmd" in state:
                items.append(command_item("fish", state.pop("cmd"), _int(text[len("  when: "):])))
        return items
