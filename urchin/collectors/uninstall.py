"""`urchin uninstall-hooks`: take Urchin's hooks out of agents' and shells' configs, and nothing else.

A hook is Urchin's when its command is exactly what `install-hooks` writes, from any release or entry
point (`urchin hook claude`, `/venv/bin/urchin hook copilot --event X`, `python -I -m urchin hook
gemini`); an entry holding the user's hooks beside ours keeps theirs. The file is backed up first and
rewritten keeping its mode and owner (the writer `install-hooks` uses); a second run changes nothing.
The shell's rc file loses the block between Urchin's markers. Copilot's `hooks/urchin.json`, which
holds nothing but Urchin's hooks, is removed once emptied.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from urchin.collectors.install import MARK_BEGIN, MARK_END, TARGETS, backup_path, default_path, write_keeping_mode
from urchin.config import Settings
from urchin.errors import ConfigError, UrchinError, ValidationError

__all__ = ["uninstall", "uninstall_all", "UninstallResult", "is_urchin_command"]

_AGENTS = ("claude", "gemini", "copilot", "codex")
_BLOCK = re.compile(rf"^{re.escape(MARK_BEGIN)}\n.*?^{re.escape(MARK_END)}[^\n]*(?:\n|\Z)", re.M | re.S)


def is_urchin_command(command: str) -> bool:
    """Whether `command` is a hook command `install-hooks` writes: ENTRY hook AGENT [--event NAME], ENTRY
    being an `urchin` executable or `PYTHON [-flags] -m urchin`."""
    try:
        words = shlex.split(command)
    except ValueError:
        return False
    if "hook" not in words:
        return False
    at = words.index("hook")
    entry, rest = words[:at], words[at + 1:]
    if not rest or rest[0] not in _AGENTS or (rest[1:] and (len(rest) != 3 or rest[1] != "--event")):
        return False
    if len(entry) == 1:
        return os.path.basename(entry[0]) == "urchin"
    return (len(entry) >= 3 and entry[-2:] == ["-m", "urchin"] and os.path.basename(entry[0]).startswith("python")
            and all(w.startswith("-") for w in entry[1:-2]))


@dataclass(frozen=True)
class UninstallResult:
    target: str
    path: Path
    removed: int = 0                 # hooks (or the shell's block) taken out
    backup: Path | None = None
    written: bool = False
    deleted: bool = False            # the file held nothing but Urchin's hooks, and is gone
    missing: bool = False
    diff: str = ""
    error: str | None = None

    def describe(self) -> str:
        if self.error:
            return f"{self.target}: {self.error}"
        if self.missing:
            return f"{self.target}: {self.path} does not exist; nothing to remove"
        if not self.removed:
            return f"{self.target}: no Urchin hooks in {self.path}"
        what = "the Urchin block" if self.target == "shell" else (
            f"{self.removed} Urchin hook" + ("" if self.removed == 1 else "s"))
        if not self.written:
            return f"{self.target}: would remove {what} from {self.path} (dry run)"
        done = f"removed {self.path}, which held only Urchin's hooks" if self.deleted else \
            f"removed {what} from {self.path}"
        return f"{self.target}: {done} (backup: {self.backup})"


def _strip(entries: list[Any]) -> tuple[list[Any], int]:
    """`entries` without Urchin's hooks (entries left empty by it go too), and how many were removed."""
    kept, removed = [], 0
    for entry in entries:
        if isinstance(entry, dict):
            direct = [entry[k] for k in ("command", "bash") if isinstance(entry.get(k), str)]
            if any(is_urchin_command(c) for c in direct):
                removed += 1
                continue
            inner = entry.get("hooks")
            if isinstance(inner, list) and inner:
                rest, count = _strip(inner)
                removed += count
                if not rest:
                    continue
                if count:
                    entry = {**entry, "hooks": rest}
        kept.append(entry)
    return kept, removed


def _strip_json(document: dict[str, Any]) -> tuple[dict[str, Any], int]:
    hooks = document.get("hooks")
    if not isinstance(hooks, dict):
        return document, 0
    new_hooks, removed = {}, 0
    for event, entries in hooks.items():
        if isinstance(entries, list):
            kept, count = _strip(entries)
            removed += count
            if count and not kept:
                continue                 # the event held only ours: it goes with them
            entries = kept
        new_hooks[event] = entries
    if not removed:
        return document, 0
    out = dict(document)
    if new_hooks:
        out["hooks"] = new_hooks
    else:
        del out["hooks"]
    return out, removed


def _read(path: Path) -> tuple[str, os.stat_result]:
    try:
        with path.open("rb") as handle:
            return handle.read().decode("utf-8"), os.fstat(handle.fileno())
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text; not changed") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror}); not changed") from None


def _new_text(target: str, path: Path, old: str) -> tuple[str | None, int]:
    """The file's new text (None: remove the file) and how many hooks went."""
    if target == "shell":
        new, count = _BLOCK.subn("", old)
        return new, count
    try:
        document = orjson.loads(old) if old.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc}); remove the hooks running `urchin hook` by hand") from None
    if not isinstance(document, dict):
        raise ConfigError(f"{path}: must hold a JSON object; not changed")
    stripped, removed = _strip_json(document)
    if not removed:
        return old, 0
    if target == "copilot" and path.name == "urchin.json" and stripped in ({}, {"version": 1}):
        return None, removed
    return orjson.dumps(stripped, option=orjson.OPT_INDENT_2).decode() + "\n", removed


def uninstall(target: str, settings: Settings, *, path: Path | None = None, dry_run: bool = False,
              shell: str | None = None) -> UninstallResult:
    """Remove Urchin's hooks for `target` from `path` (default: the agent's user config)."""
    if target not in TARGETS:
        raise ValidationError("target", f"must be one of {', '.join(TARGETS)}, got {target!r}")
    shown = path or default_path(target, settings, shell or "bash")
    real = shown.resolve() if shown.is_symlink() else shown      # a linked config changes where it points
    if not real.exists():
        return UninstallResult(target, shown, missing=True)
    old, like = _read(real)
    new, removed = _new_text(target, real, old)
    diff = "".join(difflib.unified_diff(old.splitlines(True), (new or "").splitlines(True), str(shown), str(shown)))
    if not removed or dry_run:
        return UninstallResult(target, shown, removed, diff=diff)
    backup = backup_path(real)
    write_keeping_mode(backup, old.encode(), like)            # never more readable than the original
    if new is None:
        real.unlink()
    else:
        write_keeping_mode(real, new.encode(), like)
    return UninstallResult(target, shown, removed, backup, True, new is None, diff=diff)


def uninstall_all(settings: Settings, *, dry_run: bool = False) -> list[UninstallResult]:
    """Every agent's default config, and both shells' rc files; a file that fails is reported, not fatal."""
    results = []
    for target, shell in [(t, None) for t in _AGENTS] + [("shell", "bash"), ("shell", "zsh")]:
        try:
            results.append(uninstall(target, settings, dry_run=dry_run, shell=shell))
        except UrchinError as exc:
            results.append(UninstallResult(target, default_path(target, settings, shell or "bash"),
                                           error=exc.message))
    return results
