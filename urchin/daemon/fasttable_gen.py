"""Writes urchin/daemon/fasttable.py, the light clients' table, from the contract: `python -m
urchin.daemon.fasttable_gen` after changing an operation the fast path answers.

The light clients (fastclient.py, fastcalls.py) must not import the contract (its declarations cost
~0.1 s of a call that is over in ~0.05 s), so they read a copy in plain literals: each command's route
(`urchin/contract/access.py`), its positional argument, and each option it takes with its flag, wire
name, kind and default (`urchin/contract/ops.py`). What is decided here, by hand, is only which of an
operation's options the fast path takes; each other one is named, with why, and falls through to the
full CLI. An option the contract gains is neither until someone decides: `render` then refuses, and
tests/test_fasttable.py fails (as it does when the checked-in table is not what `render` writes).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from urchin.contract.access import ACCESS
from urchin.contract.ops import OPERATIONS
from urchin.contract.spec import Param

__all__ = ["LIGHT", "Light", "entry", "render", "write", "PATH"]

PATH = Path(__file__).with_name("fasttable.py")
KINDS = ("text", "int", "number")   # the options the light reader takes: `--flag VALUE`, typed as click types it
_WITHOUT_PARITY_CASE = "not taken by the fast path (no parity case in tests/test_fastclient.py)"
_FLAG = "a flag without a value: the light reader takes only `--name VALUE`"
_REPEATABLE = "repeatable: the light reader takes an option once"


@dataclass(frozen=True)
class Light:
    """What a command's light client takes of its operation: `takes`, by `Param.name`; every other
    option of the operation, in `falls`, with why it is the full CLI's."""

    takes: tuple[str, ...]
    falls: dict[str, str] = field(default_factory=dict)


LIGHT: dict[str, Light] = {
    "search": Light(("hours", "limit", "source", "workspace", "session", "kind"),
                    {"scope": "team reads the shared database; with the CLI's own --team, the full CLI's"}),
    "semantic": Light(("hours", "limit", "source", "workspace", "session", "kind"),
                      {"min_score": _WITHOUT_PARITY_CASE, "explain": _FLAG}),
    "recent": Light(("hours", "limit", "source"),
                    dict.fromkeys(("workspace", "session", "kind"), _WITHOUT_PARITY_CASE)),
    "context": Light(("limit", "workspace", "session", "hours"), {
        **dict.fromkeys(("strategy", "full_text_weight", "semantic_weight", "k", "since", "until", "memory_weight",
                         "min_score", "token_budget", "per_file_cap", "mode", "live_byte_budget"),
                        _WITHOUT_PARITY_CASE),
        **dict.fromkeys(("searches", "sources", "kinds", "tags", "devices", "accounts"), _REPEATABLE),
        **dict.fromkeys(("include_memories", "include_conversations", "explain"), _FLAG)}),
    "recall": Light(("workspace", "cwd", "session", "prompt", "budget")),
    "get": Light(()),
}


def _options(name: str) -> list[Param]:
    """The operation's options as the CLI has them (not its positional argument, nor a wire-only alias)."""
    return [p for p in OPERATIONS[name].params if not p.positional and not p.wire_only]


def _default(param: Param) -> object:
    """The default as click's type would give it (`_hours(168)` is 168.0 on the wire), None when unset."""
    if param.default is None or param.kind == "text":
        return param.default
    return float(param.default) if param.kind == "number" else int(param.default)


def _route(name: str) -> tuple[str, str]:
    """(method, path) of the operation's one route; a path ending `.+` takes the positional argument."""
    (route,) = ACCESS[name].routes
    path = route.path.removesuffix(".+")
    if any(c in path for c in ".+*?[](){}^$|\\"):
        raise ValueError(f"{name}: route {route.path!r} is not a plain path the light client can send")
    return route.method, path


def entry(name: str, light: Light) -> tuple[str, str, str, dict[str, tuple[str, str, object]], dict[str, str]]:
    """(method, path, positional, {flag: (wire name, kind, default)} taken, {flag: why} falling through),
    in the contract's order; ValueError when `light` does not decide every option, or cannot take one."""
    options = {p.name: p for p in _options(name)}
    undecided = sorted(set(options) - set(light.takes) - set(light.falls))
    unknown = sorted((set(light.takes) | set(light.falls)) - set(options))
    both = sorted(set(light.takes) & set(light.falls))
    if undecided or unknown or both:
        raise ValueError(f"{name}: decide in LIGHT whether the fast path takes each option: not decided {undecided}, "
                         f"not the contract's {unknown}, both taken and falling through {both}")
    odd = [n for n in light.takes if options[n].kind not in KINDS or not options[n].flag_name.startswith("--")]
    if odd:
        raise ValueError(f"{name}: the light reader cannot take {odd} (`--name VALUE` of a kind in {KINDS})")
    positional = [p.wire_name for p in OPERATIONS[name].params if p.positional]
    method, path = _route(name)
    if len(positional) > 1:
        raise ValueError(f"{name}: the light client sends one positional argument at most, not {positional}")
    takes: dict[str, tuple[str, str, object]] = {
        p.flag_name: (p.wire_name, p.kind, _default(p)) for n, p in options.items() if n in light.takes}
    falls = {p.flag_name: light.falls[n] for n, p in options.items() if n in light.falls}
    return method, path, "".join(positional), takes, falls


def render() -> str:
    """The text of fasttable.py for the contract as it is now."""
    lines = []
    for name in LIGHT:
        method, path, positional, takes, falls = entry(name, LIGHT[name])
        taken = _block("{", [f"{_lit(flag)}: {_lit(option)}," for flag, option in takes.items()], "}")
        falling = _block("(", [f"{_lit(flag)},   # {why}" for flag, why in falls.items()], ")")
        lines.append(f"    {_lit(name)}: ({_lit(method)}, {_lit(path)}, {_lit(positional)}, {taken}, {falling}),")
    return _HEAD + "\n".join(lines) + "\n}\n"


_HEAD = '''"""The light clients' table: what urchin/daemon/fastclient.py and fastcalls.py take of each operation they
answer, in plain literals (their start-up cannot pay for importing the contract).

Generated from the contract by `python -m urchin.daemon.fasttable_gen` (urchin/daemon/fasttable_gen.py says
which options are taken, and why each other one falls through to the full CLI); do not edit:
tests/test_fasttable.py fails when this file is not what the contract makes.
"""

from __future__ import annotations

TYPE_CHECKING = False   # not `typing`'s: a fast path pays for every import
if TYPE_CHECKING:
    from typing import TypeAlias

    Option: TypeAlias = tuple[str, str, str | int | float | None]   # (wire name, kind, default or None)

__all__ = ["COMMANDS"]

# command -> (method, path, the positional argument's wire name or "", {flag: option taken}, flags falling through);
# a path ending in "/" takes the positional argument (quoted), a GET the options as its query string, a POST as a
# JSON object; a GET also sends each default (None: none)
COMMANDS: dict[str, tuple[str, str, str, dict[str, Option], tuple[str, ...]]] = {
'''


def _block(opening: str, rows: list[str], closing: str) -> str:
    """A dict or tuple literal, one row a line (empty: on one line)."""
    return opening + "".join("\n        " + row for row in rows) + ("\n    " if rows else "") + closing


def _lit(value: object) -> str:
    """A literal as the house writes it (double quotes)."""
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, tuple):
        return "(" + ", ".join(map(_lit, value)) + ("," if len(value) == 1 else "") + ")"
    return repr(value)


def write(path: Path = PATH) -> bool:
    """Rewrite the table; True when it changed."""
    text = render()
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return False
    path.write_text(text, encoding="utf-8")
    return True


if __name__ == "__main__":
    print(f"{PATH}: {'rewritten' if write() else 'unchanged'}", file=sys.stderr)
