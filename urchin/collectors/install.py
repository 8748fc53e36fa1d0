"""`urchin install-hooks`: merge Urchin's hooks into an agent's or a shell's own config, idempotently.

`render(target)` is the snippet (the files under contrib/ are exactly these, a test checks it);
`plan(target, path)` computes the merged file; `install()` writes it after a timestamped backup,
or only returns the diff for `--dry-run`. A second run changes nothing.
"""

from __future__ import annotations

import difflib
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from urchin.config import Settings
from urchin.errors import ConfigError, ValidationError

__all__ = ["TARGETS", "render", "default_path", "install", "InstallResult", "SHELL_BASH", "SHELL_ZSH"]

TARGETS = ("claude", "gemini", "copilot", "shell")
MARK_BEGIN = "# >>> urchin >>>"
MARK_END = "# <<< urchin <<<"

CLAUDE_EVENTS = {"UserPromptSubmit": None, "PostToolUse": "*", "PostToolUseFailure": "*", "Stop": None,
                 "SessionStart": None, "SessionEnd": None, "PreCompact": None}
GEMINI_EVENTS = ("BeforeAgent", "AfterAgent", "AfterTool", "SessionStart", "SessionEnd")
COPILOT_EVENTS = ("userPromptSubmitted", "postToolUse", "sessionStart", "sessionEnd", "errorOccurred")

SHELL_BASH = r'''# Urchin for bash: record each command with its exit code, cwd and duration.
# Source this from ~/.bashrc (`urchin install-hooks shell` does it). The recording runs in the
# background, so the prompt never waits; commands that bash keeps out of history (a leading
# space with HISTCONTROL=ignorespace) are not recorded either. URCHIN_BIN overrides the command.
[[ $- == *i* ]] || return 0
[[ -n ${__urchin_loaded:-} ]] && return 0
__urchin_loaded=1
__urchin_last=$(builtin history 1 | { read -r n _; printf '%s' "${n%\*}"; })   # not the line that sourced us
__urchin_armed=1
__urchin_start=""

__urchin_now_us() {
  if [[ -n ${EPOCHREALTIME:-} ]]; then printf '%s' "${EPOCHREALTIME/[.,]/}"; else printf '%s000000' "$(date +%s)"; fi
}

__urchin_preexec() {
  if [[ -n $__urchin_armed ]]; then __urchin_armed=""; __urchin_start=$(__urchin_now_us); fi
}

__urchin_record() {
  local code=$? entry num stamp cmd dur=""
  entry=$(HISTTIMEFORMAT='%s ' builtin history 1)
  [[ $entry =~ ^[[:space:]]*([0-9]+)[*[:space:]]+([0-9]+)[[:space:]](.*)$ ]] || return $code
  num=${BASH_REMATCH[1]} stamp=${BASH_REMATCH[2]} cmd=${BASH_REMATCH[3]}
  if [[ $num != "$__urchin_last" && -n $__urchin_last$__urchin_start ]]; then
    [[ -n $__urchin_start ]] && dur=$(( ($(__urchin_now_us) - __urchin_start) / 1000 ))
    ( printf '%s' "$cmd" | command "${URCHIN_BIN:-urchin}" hook shell --shell bash --exit-code "$code" \
        --cwd "$PWD" --started "$stamp" --duration-ms "$dur" --session "$$" >/dev/null 2>&1 & )
  fi
  __urchin_last=$num
  return $code
}

__urchin_ready() { __urchin_armed=1; __urchin_start=""; }

if declare -p preexec_functions >/dev/null 2>&1; then
  preexec_functions+=(__urchin_preexec)          # bash-preexec is loaded: use it
elif [[ -z $(trap -p DEBUG) ]]; then
  trap '__urchin_preexec' DEBUG
fi
if [[ $(declare -p PROMPT_COMMAND 2>/dev/null) == "declare -a"* ]]; then
  PROMPT_COMMAND=(__urchin_record "${PROMPT_COMMAND[@]}" __urchin_ready)
else
  PROMPT_COMMAND="__urchin_record${PROMPT_COMMAND:+; $PROMPT_COMMAND}; __urchin_ready"
fi
'''

SHELL_ZSH = r'''# Urchin for zsh: record each command with its exit code, cwd and duration.
# Source this from ~/.zshrc (`urchin install-hooks shell` does it). The recording runs in the
# background and is disowned, so the prompt never waits; a command typed with a leading space
# is not recorded. URCHIN_BIN overrides the command.
[[ -o interactive ]] || return 0
(( ${+__urchin_loaded} )) && return 0
typeset -g __urchin_loaded=1 __urchin_cmd="" __urchin_start="" __urchin_epoch=""
zmodload zsh/datetime 2>/dev/null
autoload -Uz add-zsh-hook

__urchin_preexec() {
  __urchin_cmd=$1
  __urchin_start=$EPOCHREALTIME
  __urchin_epoch=$EPOCHSECONDS
}

__urchin_precmd() {
  local code=$?
  [[ -z $__urchin_cmd ]] && return
  local cmd=$__urchin_cmd
  __urchin_cmd=""
  [[ $cmd == ' '* ]] && return
  local dur=$(( (EPOCHREALTIME - __urchin_start) * 1000 ))
  ( print -rn -- "$cmd" | command "${URCHIN_BIN:-urchin}" hook shell --shell zsh --exit-code "$code" \
      --cwd "$PWD" --started "$__urchin_epoch" --duration-ms "${dur%.*}" --session "$$" >/dev/null 2>&1 ) &!
}

add-zsh-hook preexec __urchin_preexec
add-zsh-hook precmd __urchin_precmd
'''


def _claude(command: str) -> dict[str, Any]:
    hooks: dict[str, Any] = {}
    for event, matcher in CLAUDE_EVENTS.items():
        entry: dict[str, Any] = {"hooks": [{"type": "command", "command": f"{command} hook claude", "timeout": 10}]}
        if matcher:
            entry = {"matcher": matcher, **entry}
        hooks[event] = [entry]
    return {"hooks": hooks}


def _gemini(command: str) -> dict[str, Any]:
    hook = {"name": "urchin", "type": "command", "command": f"{command} hook gemini", "timeout": 10000}
    return {"hooks": {event: [{"matcher": "*", "hooks": [hook]} if event == "AfterTool" else {"hooks": [hook]}]
                      for event in GEMINI_EVENTS}}


def _copilot(command: str) -> dict[str, Any]:
    return {"version": 1, "hooks": {event: [{"type": "command", "bash": f"{command} hook copilot --event {event}",
                                             "timeoutSec": 10}] for event in COPILOT_EVENTS}}


def render(target: str, command: str = "urchin", shell: str = "bash") -> str:
    """The snippet for `target` as the contrib/ file holds it."""
    if target == "claude":
        return orjson.dumps(_claude(command), option=orjson.OPT_INDENT_2).decode() + "\n"
    if target == "gemini":
        return orjson.dumps(_gemini(command), option=orjson.OPT_INDENT_2).decode() + "\n"
    if target == "copilot":
        return orjson.dumps(_copilot(command), option=orjson.OPT_INDENT_2).decode() + "\n"
    if target == "shell":
        return SHELL_ZSH if shell == "zsh" else SHELL_BASH
    raise ValidationError("target", f"must be one of {', '.join(TARGETS)}, got {target!r}")


def default_path(target: str, settings: Settings, shell: str = "bash") -> Path:
    home = settings.user_home
    if target == "claude":
        assert settings.claude_dir is not None
        return settings.claude_dir / "settings.json"
    if target == "gemini":
        assert settings.gemini_dir is not None
        return settings.gemini_dir / "settings.json"
    if target == "copilot":
        assert settings.copilot_dir is not None
        return settings.copilot_dir / "hooks" / "urchin.json"
    if target == "shell":
        return home / (".zshrc" if shell == "zsh" else ".bashrc")
    raise ValidationError("target", f"must be one of {', '.join(TARGETS)}, got {target!r}")


def _merge_json(existing: dict[str, Any], ours: dict[str, Any], marker: str) -> dict[str, Any]:
    """Add each of our hook entries unless an entry running `marker` is already there."""
    merged = dict(existing)
    for key, value in ours.items():
        if key != "hooks":
            merged.setdefault(key, value)
    hooks = merged.get("hooks")
    if hooks is None:
        hooks = {}
    if not isinstance(hooks, dict):
        raise ConfigError("hooks: must be a JSON object in the existing settings; not changed")
    hooks = dict(hooks)
    for event, entries in ours["hooks"].items():
        current = hooks.get(event)
        current = list(current) if isinstance(current, list) else []
        if marker not in orjson.dumps(current).decode():
            current.extend(entries)
        hooks[event] = current
    merged["hooks"] = hooks
    return merged


@dataclass(frozen=True)
class InstallResult:
    target: str
    path: Path
    changed: bool
    diff: str
    backup: Path | None = None
    written: bool = False

    def describe(self) -> str:
        if not self.changed:
            return f"{self.target}: already installed in {self.path}"
        if not self.written:
            return f"{self.target}: would change {self.path} (dry run)"
        backup = f" (backup: {self.backup})" if self.backup else ""
        return f"{self.target}: installed in {self.path}{backup}"


def _new_text(target: str, path: Path, old: str, command: str, settings: Settings, shell: str) -> str:
    if target == "shell":
        if MARK_BEGIN in old:
            return old
        script = settings.home / "shell" / f"urchin.{shell}"
        block = f'{MARK_BEGIN}\n'
        if command != "urchin" and " " not in command:
            block += f"export URCHIN_BIN={shlex.quote(command)}\n"
        block += f'[ -f "{script}" ] && . "{script}"\n{MARK_END}\n'
        return old + ("\n" if old and not old.endswith("\n") else "") + block
    try:
        existing = orjson.loads(old) if old.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc}); add the hooks by hand from contrib/") from None
    if not isinstance(existing, dict):
        raise ConfigError(f"{path}: must hold a JSON object; not changed")
    ours = {"claude": _claude, "gemini": _gemini, "copilot": _copilot}[target](command)
    merged = _merge_json(existing, ours, f"hook {target}")
    if merged == existing and old.strip():
        return old
    return orjson.dumps(merged, option=orjson.OPT_INDENT_2).decode() + "\n"


def install(target: str, settings: Settings, *, path: Path | None = None, dry_run: bool = False,
            command: str | None = None, shell: str | None = None) -> InstallResult:
    """Merge the hooks for `target` into `path` (default: the agent's user config)."""
    if target not in TARGETS:
        raise ValidationError("target", f"must be one of {', '.join(TARGETS)}, got {target!r}")
    shell = shell or ("zsh" if path is not None and "zsh" in path.name else "bash")
    path = path or default_path(target, settings, shell)
    command = command or ("urchin" if shutil.which("urchin") else f"{shlex.quote(sys.executable)} -m urchin")
    try:
        old = path.read_text("utf-8")
    except FileNotFoundError:
        old = ""
    new = _new_text(target, path, old, command, settings, shell)
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(path), str(path)))
    if new == old:
        return InstallResult(target, path, False, "")
    if dry_run:
        return InstallResult(target, path, True, diff)
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if path.exists():
        backup = path.with_name(f"{path.name}.urchin-backup-{time.strftime('%Y%m%d%H%M%S')}")
        shutil.copy2(path, backup)
    if target == "shell":
        script = settings.home / "shell" / f"urchin.{shell}"
        script.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        script.write_text(render("shell", shell=shell), "utf-8")
    tmp = path.with_name(f".{path.name}.urchin-tmp")
    tmp.write_text(new, "utf-8")
    tmp.replace(path)
    return InstallResult(target, path, True, diff, backup, True)
