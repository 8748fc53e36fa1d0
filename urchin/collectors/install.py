"""`urchin install-hooks`: merge Urchin's hooks into an agent's or a shell's own config, idempotently.

`render(target)` is the snippet (the files under contrib/ are exactly these, a test checks it);
`install()` writes the merged file after a timestamped backup, or only returns the diff for
`--dry-run`. A second run changes nothing. Agent configs can hold API keys: every file written here
keeps the mode and owner of the one it replaces (temp file in the same folder, fsync, rename), and
the command installed is an absolute entry point the agent's working directory cannot shadow.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import stat
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from urchin.api_tokens import ensure_hook_token
from urchin.config import Settings
from urchin.errors import ConfigError, ValidationError
from urchin.fileio import ensure_private_dir, replacing

__all__ = ["TARGETS", "render", "default_path", "install", "InstallResult", "hook_command", "write_keeping_mode",
           "backup_path", "SHELL_BASH", "SHELL_ZSH"]

TARGETS = ("claude", "gemini", "copilot", "codex", "shell")
MARK_BEGIN = "# >>> urchin >>>"
MARK_END = "# <<< urchin <<<"

CLAUDE_EVENTS = {"UserPromptSubmit": None, "PostToolUse": "*", "PostToolUseFailure": "*", "Stop": None,
                 "SessionStart": None, "SessionEnd": None, "PreCompact": None}
GEMINI_EVENTS = ("BeforeAgent", "AfterAgent", "AfterTool", "SessionStart", "SessionEnd")
COPILOT_EVENTS = ("userPromptSubmitted", "postToolUse", "sessionStart", "sessionEnd", "errorOccurred")
# Codex: context only (recall at session start and at each prompt); its collector captures the sessions
CODEX_EVENTS = ("SessionStart", "UserPromptSubmit")

SHELL_BASH = r'''# Urchin for bash: record each command with its exit code, cwd and duration.
# Source this from ~/.bashrc (`urchin install-hooks shell` does it). The recording runs in the
# background, so the prompt never waits; commands that bash keeps out of history (a leading
# space with HISTCONTROL=ignorespace) are not recorded either. URCHIN_BIN overrides the command;
# `urchin install-hooks shell` writes its absolute path below, so the recording never looks up PATH.
[[ $- == *i* ]] || return 0
[[ -n ${__urchin_loaded:-} ]] && return 0
if [[ -n ${URCHIN_BIN:-} ]]; then __urchin_bin=("$URCHIN_BIN"); else __urchin_bin=(@COMMAND@); fi
[[ -n ${__urchin_bin[*]} ]] || return 0
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
    ( printf '%s' "$cmd" | command "${__urchin_bin[@]}" hook shell --shell bash --exit-code "$code" \
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
# is not recorded. URCHIN_BIN overrides the command; `urchin install-hooks shell` writes its
# absolute path below, so the recording never looks up PATH.
[[ -o interactive ]] || return 0
(( ${+__urchin_loaded} )) && return 0
typeset -ga __urchin_bin
if [[ -n ${URCHIN_BIN:-} ]]; then __urchin_bin=("$URCHIN_BIN"); else __urchin_bin=(@COMMAND@); fi
[[ -n ${__urchin_bin[*]} ]] || return 0
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
  ( print -rn -- "$cmd" | command "${__urchin_bin[@]}" hook shell --shell zsh --exit-code "$code" \
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


def _codex(command: str) -> dict[str, Any]:
    hook = {"type": "command", "command": f"{command} hook codex", "timeout": 10}
    return {"hooks": {event: [{"hooks": [hook]}] for event in CODEX_EVENTS}}


_FIND_ON_PATH = {"bash": '"$(type -P urchin)"', "zsh": '"$(whence -p urchin)"'}


def render(target: str, command: str = "urchin", shell: str = "bash") -> str:
    """The snippet for `target` as the contrib/ file holds it (with `command` as the entry point).

    The shell snippet of contrib/ (command "urchin") finds `urchin` on PATH once, when it is
    sourced; the one `install-hooks` writes holds the absolute command itself.
    """
    if target == "claude":
        return orjson.dumps(_claude(command), option=orjson.OPT_INDENT_2).decode() + "\n"
    if target == "gemini":
        return orjson.dumps(_gemini(command), option=orjson.OPT_INDENT_2).decode() + "\n"
    if target == "copilot":
        return orjson.dumps(_copilot(command), option=orjson.OPT_INDENT_2).decode() + "\n"
    if target == "codex":
        return orjson.dumps(_codex(command), option=orjson.OPT_INDENT_2).decode() + "\n"
    if target == "shell":
        words = _FIND_ON_PATH[shell if shell == "zsh" else "bash"] if command == "urchin" else command
        return (SHELL_ZSH if shell == "zsh" else SHELL_BASH).replace("@COMMAND@", words)
    raise ValidationError("target", f"must be one of {', '.join(TARGETS)}, got {target!r}")


def hook_command() -> str:
    """The installed entry point, as shell words: absolute, and never importing from the agent's cwd.

    `python -m urchin` puts the working directory first on sys.path, so a repository holding an
    `orjson.py` would run on every prompt. The `urchin` console script beside this interpreter
    puts its own folder there instead; without one, `python -I` leaves the cwd (and PYTHON*
    variables) out.
    """
    python = Path(sys.executable).absolute()
    script = python.parent / "urchin"
    if script.is_file() and os.access(script, os.X_OK):
        return shlex.quote(str(script))
    return shlex.join([str(python), "-I", "-m", "urchin"])


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
    if target == "codex":
        assert settings.codex_dir is not None
        return settings.codex_dir / "hooks.json"
    if target == "shell":
        return home / (".zshrc" if shell == "zsh" else ".bashrc")
    raise ValidationError("target", f"must be one of {', '.join(TARGETS)}, got {target!r}")


# A hook command Urchin installed (any entry point): `urchin hook x`, `/venv/bin/urchin hook x`,
# `'/usr/bin/python3' -m urchin hook x`, `python -I -m urchin hook x`.
_OURS = re.compile(r"(?:^|[\s/'\"])urchin['\"]? hook (?:claude|gemini|copilot|codex)\b")


def _commands(entry: Any) -> list[str]:
    if not isinstance(entry, dict):
        return []
    found = [entry[key] for key in ("command", "bash") if isinstance(entry.get(key), str)]
    hooks = entry.get("hooks")
    for hook in hooks if isinstance(hooks, list) else []:
        found += _commands(hook)
    return found


def _merge_entries(current: list[Any], entries: list[Any], marker: str) -> list[Any]:
    """Our entries replace the ones an earlier install left (an older, shadowable command is upgraded);
    an entry that mixes our command with the user's own is left alone."""
    def ours(entry: Any) -> bool:
        commands = _commands(entry)
        return bool(commands) and all(marker in c and _OURS.search(c) for c in commands)

    if marker in orjson.dumps([e for e in current if not ours(e)]).decode():
        return current
    kept = [e for e in current if not ours(e)]
    where = next((i for i, e in enumerate(current) if ours(e)), len(current))
    before = sum(1 for e in current[:where] if not ours(e))
    return kept[:before] + entries + kept[before:]


def _merge_json(existing: dict[str, Any], ours: dict[str, Any], marker: str) -> dict[str, Any]:
    """Add each of our hook entries, or bring the ones an earlier install left up to date."""
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
        hooks[event] = _merge_entries(list(current) if isinstance(current, list) else [], entries, marker)
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
    token: Path | None = None           # the hooks' token (ingest and recall), when this install created it

    def describe(self) -> str:
        token = f"; hooks send and recall with the hook token in {self.token}" if self.token else ""
        if not self.changed:
            return f"{self.target}: already installed in {self.path}{token}"
        if not self.written:
            return f"{self.target}: would change {self.path} (dry run)"
        backup = f" (backup: {self.backup})" if self.backup else ""
        return f"{self.target}: installed in {self.path}{backup}{token}"


def _new_text(target: str, path: Path, old: str, command: str, settings: Settings, shell: str) -> str:
    if target == "shell":
        if MARK_BEGIN in old:
            return old
        script = shlex.quote(str(_shell_script(settings, shell)))
        block = f"{MARK_BEGIN}\n[ -f {script} ] && . {script}\n{MARK_END}\n"
        return old + ("\n" if old and not old.endswith("\n") else "") + block
    try:
        existing = orjson.loads(old) if old.strip() else {}
    except orjson.JSONDecodeError as exc:
        raise ConfigError(f"{path}: not valid JSON ({exc}); add the hooks by hand from contrib/") from None
    if not isinstance(existing, dict):
        raise ConfigError(f"{path}: must hold a JSON object; not changed")
    ours = {"claude": _claude, "gemini": _gemini, "copilot": _copilot, "codex": _codex}[target](command)
    merged = _merge_json(existing, ours, f"hook {target}")
    if merged == existing and old.strip():
        return old
    return orjson.dumps(merged, option=orjson.OPT_INDENT_2).decode() + "\n"


def _shell_script(settings: Settings, shell: str) -> Path:
    return settings.home / "shell" / f"urchin.{shell}"


def write_keeping_mode(path: Path, data: bytes, like: os.stat_result | None = None) -> None:
    """Replace `path` atomically with `data`, keeping the mode and owner of `like` (new files: 0600).

    The temp file is born 0600 in the same folder, takes `like`'s owner and mode before any byte is
    written, is fsync'd and renamed over `path`, and the folder is fsync'd: a config holding API
    keys is never readable by more users than before, not even for a moment.
    """
    with replacing(path, sync_dir=True, private_parent=False) as new:
        try:
            if like is not None and (like.st_uid, like.st_gid) != (os.getuid(), os.fstat(new.fd).st_gid):
                os.fchown(new.fd, like.st_uid, like.st_gid)
        except PermissionError:
            raise ConfigError(f"{path}: owned by uid {like.st_uid if like else '?'}; cannot keep its owner, "
                              "so it was not changed (run install-hooks as that user)") from None
        os.fchmod(new.fd, stat.S_IMODE(like.st_mode) if like is not None else 0o600)
        new.write(data)


def _read(path: Path) -> tuple[str, os.stat_result | None]:
    try:
        with path.open("rb") as handle:
            like = os.fstat(handle.fileno())
            raw = handle.read()
    except FileNotFoundError:
        return "", None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read it ({exc.strerror}); not changed") from None
    try:
        return raw.decode("utf-8"), like
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text; not changed") from None


def backup_path(path: Path) -> Path:
    """`NAME.urchin-backup-<time>`, never one that exists (two changes in one second keep both backups)."""
    stamp = time.strftime("%Y%m%d%H%M%S")
    candidate, n = path.with_name(f"{path.name}.urchin-backup-{stamp}"), 1
    while candidate.exists() or candidate.is_symlink():
        candidate, n = path.with_name(f"{path.name}.urchin-backup-{stamp}-{n}"), n + 1
    return candidate


def _target_file(target: str, settings: Settings, path: Path | None, shell: str) -> Path:
    """The file to change: `--config` must be in an existing folder; a symlinked config is changed
    where it points (the link stays)."""
    if path is None:
        path = default_path(target, settings, shell)
        if not path.parent.exists():       # the agent's own folder (~/.claude, ~/.copilot/hooks): made 0700
            ensure_private_dir(path.parent)
    elif not path.parent.is_dir():
        raise ValidationError("--config", f"the folder {path.parent} does not exist; create it first or "
                                          "give a file in an existing folder (nothing was created)")
    return path.resolve() if path.is_symlink() else path


def install(target: str, settings: Settings, *, path: Path | None = None, dry_run: bool = False,
            command: str | None = None, shell: str | None = None) -> InstallResult:
    """Merge the hooks for `target` into `path` (default: the agent's user config)."""
    if target not in TARGETS:
        raise ValidationError("target", f"must be one of {', '.join(TARGETS)}, got {target!r}")
    shell = shell or ("zsh" if path is not None and "zsh" in path.name else "bash")
    shown = path or default_path(target, settings, shell)
    if dry_run and path is None:
        real = shown
    else:
        real = _target_file(target, settings, path, shell)
    command = command or hook_command()
    old, like = _read(real)
    new = _new_text(target, real, old, command, settings, shell)
    diff = "".join(difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(shown), str(shown)))
    script = _shell_script(settings, shell) if target == "shell" else None
    script_text = render("shell", command, shell) if script is not None else ""
    script_stale = script is not None and _read(script)[0] != script_text
    if dry_run:
        return InstallResult(target, shown, new != old or script_stale, diff)
    token, created = ensure_hook_token(settings.home)
    token_note = token if created else None
    if new == old and not script_stale:
        return InstallResult(target, shown, False, "", token=token_note)
    backup = None
    if script is not None and script_stale:
        ensure_private_dir(script.parent)
        write_keeping_mode(script, script_text.encode(), _read(script)[1])
    if new != old:
        if like is not None:
            backup = backup_path(real)
            write_keeping_mode(backup, old.encode(), like)    # never more readable than the original
        write_keeping_mode(real, new.encode(), like)
    return InstallResult(target, shown, True, diff, backup, True, token_note)
