"""The light clients' table: what urchin/daemon/fastclient.py and fastcalls.py take of each operation they
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
    "search": ("GET", "/search", "query", {
        "--hours": ("hours", "number", 168.0),
        "--limit": ("limit", "int", 20),
        "--source": ("source", "text", None),
        "--workspace": ("workspace", "text", None),
        "--session": ("session", "text", None),
        "--kind": ("kind", "text", None),
    }, (
        "--scope",   # team reads the shared database; with the CLI's own --team, the full CLI's
    )),
    "semantic": ("GET", "/semantic", "query", {
        "--hours": ("hours", "number", 168.0),
        "--limit": ("limit", "int", 10),
        "--source": ("source", "text", None),
        "--workspace": ("workspace", "text", None),
        "--session": ("session", "text", None),
        "--kind": ("kind", "text", None),
    }, (
        "--min-score",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
        "--explain",   # a flag without a value: the light reader takes only `--name VALUE`
    )),
    "recent": ("GET", "/recent", "", {
        "--hours": ("hours", "number", 24.0),
        "--limit": ("limit", "int", 20),
        "--source": ("source", "text", None),
    }, (
        "--workspace",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
        "--session",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
        "--kind",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
    )),
    "context": ("POST", "/context", "query", {
        "--workspace": ("workspace", "text", None),
        "--session": ("session", "text", None),
        "--hours": ("hours", "number", None),
        "--limit": ("limit", "int", 10),
    }, (
        "--strategy",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
        "--search",   # repeatable: the light reader takes an option once
        "--full-text-weight",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
        "--semantic-weight",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
        "--k",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
        "--source",   # repeatable: the light reader takes an option once
        "--kind",   # repeatable: the light reader takes an option once
        "--tag",   # repeatable: the light reader takes an option once
        "--device",   # repeatable: the light reader takes an option once
        "--account",   # repeatable: the light reader takes an option once
        "--since",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
        "--until",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
        "--include-memories",   # a flag without a value: the light reader takes only `--name VALUE`
        "--include-conversations",   # a flag without a value: the light reader takes only `--name VALUE`
        "--memory-weight",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
        "--min-score",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
        "--token-budget",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
        "--explain",   # a flag without a value: the light reader takes only `--name VALUE`
        "--per-file-cap",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
        "--mode",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
        "--live-byte-budget",   # not taken by the fast path (no parity case in tests/test_fastclient.py)
    )),
    "recall": ("POST", "/recall", "", {
        "--workspace": ("workspace", "text", None),
        "--cwd": ("cwd", "text", None),
        "--session": ("session", "text", None),
        "--prompt": ("prompt", "text", None),
        "--budget": ("budget", "int", None),
    }, ()),
    "get": ("GET", "/events/", "id", {}, ()),
}
