"""`urchin search|semantic|recent` beside a running daemon, without click, httpx or orjson
(and `context|recall|get` through urchin/daemon/fastcalls.py, on the same rules).

The daemon holds the hot index, so the whole cost of such a command is the client's start-up:
`urchin/__main__.py` calls `run(argv)` before it imports click, and this module answers with the
standard library alone (`_json`, `_socket`, fcntl: urchin/wire.py; no `json`, whose import compiles
regular expressions): one HTTP/1.1 request over the daemon's Unix socket or loopback port, found
through `$URCHIN_HOME/daemon.json` exactly as `client.find_daemon` finds it. Each command's route, the
options it takes, their wire names, types and defaults are the contract's, read from the generated
urchin/daemon/fasttable.py (the contract itself is too heavy an import for this path).

It answers only what it can answer byte for byte as the full CLI would (`tests/test_fastclient.py`
runs both): any other flag, `--help`, a repeated option, a config file or environment setting it
does not resolve itself, no daemon, a refused connection and every non-200 answer return None, and
`__main__` runs the full CLI, which then prints the same output, error text and exit code it always
did. Nothing here writes anywhere (but `recall --session`, whose audit event the daemon records as
it would for the full CLI); an error answer costs one extra request, never a different one.
"""

from __future__ import annotations

import os
import sys

from urchin.daemon.fasttable import COMMANDS
from urchin.wire import loads

TYPE_CHECKING = False   # not `typing`'s: a fast path pays for every import
if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping
    from typing import Any

__all__ = ["run", "LISTINGS", "locate", "home_option", "option_value", "read_args", "typed", "quote",
           "request_body", "Fallback"]

LISTINGS = ("search", "semantic", "recent")   # the commands answered here: a list of events (fastcalls: the rest)
_SCORED = ("semantic",)                        # its lines show each hit's score
_TYPES = {"text": str, "int": int, "number": float}   # click's STRING, INT and FLOAT
# Settings.resolve validates these (and config.toml): when any is present, it resolves them itself.
# URCHIN_EMBEDDER_URL/MODEL too: the full CLI then says whether the daemon's own settings answered.
_VALIDATED_ENV = ("URCHIN_DURABILITY", "URCHIN_EMBEDDER_API", "URCHIN_SOFT_CAP_BYTES", "URCHIN_EMBEDDER_TIMEOUT",
                  "URCHIN_PORT", "URCHIN_SHELL_HISTORY", "URCHIN_GIT_ROOTS", "URCHIN_EMBEDDER_URL",
                  "URCHIN_EMBEDDER_MODEL")
_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_TIMEOUT_S = 30.0
_EVENTS_PREFIX = '{"events":['


class Fallback(Exception):
    """Not ours to answer: the full CLI will."""


Answer = tuple[list[str], list[str]]     # the lines for stdout, then those for stderr


def run(argv: list[str], commands: Mapping[str, Callable[[str | None, str, list[str]], Answer]] | None = None
        ) -> int | None:
    """Answer `argv` (without the program name) through the daemon, or None for the full CLI.
    `commands`: the answers of other commands on these rules (`fastcalls.run` passes its own)."""
    commands = commands or dict.fromkeys(LISTINGS, _listing)
    try:
        if not all(_utf8(stream) for stream in (sys.stdout, sys.stderr)):
            raise Fallback  # click re-wraps a misconfigured stream; only it knows how
        home, args = home_option(argv)
        if not args or args[0] not in commands:
            raise Fallback
        lines, notes = commands[args[0]](home, args[0], args[1:])
    except Fallback:
        return None
    return _emit(lines, notes)


def _listing(home: str | None, command: str, args: list[str]) -> Answer:
    """`search`, `semantic` or `recent`: one GET, its query string the positional argument, then each option
    given or with a default (`--hours 1e9` as `hours=1000000000.0`)."""
    method, path, positional, options, _ = COMMANDS[command]
    values, given, as_json = read_args(args, options, 1 if positional else 0)
    token, address, _ = locate(home)
    sent = [(positional, given[0])] if positional else []
    for flag, (wire, kind, default) in options.items():
        value = typed(kind, values[flag]) if flag in values else default
        if value is not None:
            sent.append((wire, str(value)))
    body = request_body(address, token, method, f"{path}?{_query(sent)}")
    return _format(body, as_json, with_score=command in _SCORED), _older(body, sent) if command == "search" else []


# ---- the command line, as click would read it ------------------------------------------------------
def read_args(args: list[str], flags: Collection[str], positionals: int) -> tuple[dict[str, str], list[str], bool]:
    """(options by flag, positional arguments, --json) as click reads them, or Fallback for anything
    else: another flag, a repeated option, the wrong number of arguments."""
    values: dict[str, str] = {}
    positional: list[str] = []
    as_json = False
    while args:
        arg = args[0]
        if arg == "--json":
            if as_json:
                raise Fallback
            as_json, args = True, args[1:]
        elif arg.startswith("--") and arg.partition("=")[0] in flags:
            flag = arg.partition("=")[0]
            if flag in values:
                raise Fallback
            values[flag], args = option_value(args, flag)
        elif arg.startswith("-") and arg != "-":
            raise Fallback  # --help, -h, --, an unknown flag: click's own message
        else:
            positional.append(arg)
            args = args[1:]
    if len(positional) != positionals:
        raise Fallback
    return values, positional, as_json


def home_option(argv: list[str]) -> tuple[str | None, list[str]]:
    """The group's `--home` (the only group option a fast path takes), and the arguments after it."""
    args = list(argv)
    home = None
    while args and args[0].startswith("--home"):
        home, args = option_value(args, "--home")
    return home, args


def option_value(args: list[str], flag: str) -> tuple[str, list[str]]:
    name, eq, inline = args[0].partition("=")
    if name != flag:
        raise Fallback
    if eq:
        if not inline:
            raise Fallback
        return inline, args[1:]
    if len(args) < 2 or not args[1] or args[1].startswith("-"):
        raise Fallback
    return args[1], args[2:]


def typed(kind: str, text: str) -> str | int | float:
    """An option's value as click's type for its kind reads it (`int(" 3 ")`, `float("1_000")`), or Fallback:
    click then says what is wrong with it."""
    try:
        return _TYPES[kind](text)
    except ValueError:
        raise Fallback from None


# ---- finding the daemon, as client.find_daemon does -------------------------------------------------
def locate(home: str | None) -> tuple[str, str, str]:
    """(token, address, home folder) of the live daemon for this home, when the full CLI would use it
    with these very settings (else Fallback: a config file or setting only `Settings.resolve` reads)."""
    env = os.environ
    home = home or env.get("URCHIN_HOME") or None
    if home is not None and os.path.isfile(home):
        raise Fallback  # click.Path(file_okay=False) reports it
    if home is None:
        import platformdirs

        home = platformdirs.user_data_dir("urchin")
    root = os.path.abspath(os.path.expanduser(home))
    if os.path.exists(os.path.join(root, "config.toml")) or any(env.get(name) for name in _VALIDATED_ENV):
        raise Fallback  # Settings.resolve reads and checks these; the full CLI goes through it
    if env.get("URCHIN_NO_DAEMON", "").lower() in ("1", "true", "yes"):
        raise Fallback
    from urchin.wire import daemon_address

    address = daemon_address(root)
    if address is None:
        raise Fallback
    token = env.get("URCHIN_INTAKE_TOKEN") or _token_file(root)
    return token, address, root


def _token_file(root: str) -> str:
    try:
        with open(os.path.join(root, "token"), encoding="utf-8") as handle:
            token = handle.read().strip()
    except OSError:
        raise Fallback from None
    if not token:
        raise Fallback
    return token


# ---- one request ------------------------------------------------------------------------------------
def quote(text: str) -> str:
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:  # an undecodable argv byte: let the full CLI deal with it
        raise Fallback from None
    return "".join(chr(b) if b in _UNRESERVED else f"%{b:02X}" for b in raw)


def _query(params: list[tuple[str, str]]) -> str:
    return "&".join(f"{quote(k)}={quote(v)}" for k, v in params)


def request_body(address: str, token: str, method: str, target: str, body: bytes | None = None) -> str:
    """The 200 answer's body to one request; anything else is the full CLI's to report."""
    from urchin.wire import WireError, request

    try:
        status, _, answer = request(address, token, method, target, body, timeout=_TIMEOUT_S)
        if status != 200:
            raise Fallback
        return answer.decode("utf-8")
    except (WireError, UnicodeDecodeError):
        raise Fallback from None


# ---- the full CLI's output --------------------------------------------------------------------------
def _older(body: str, options: list[tuple[str, str]]) -> list[str]:
    """`contract.render.older_note` when the search found nothing and an older match exists (imported
    only then: the rare case pays for it)."""
    if '"olderMatch"' not in body:
        return []
    try:
        result = loads(body)
        older, hours = result["olderMatch"], float(dict(options)["hours"])
        if result["events"]:
            return []
        from urchin.contract.render import older_note

        return [older_note(hours, older)]
    except (ValueError, KeyError, TypeError):
        raise Fallback from None


def _format(body: str, as_json: bool, *, with_score: bool) -> list[str]:
    """What the full CLI prints: with --json the result object HTTP and MCP return (the daemon's body,
    which is that object), else `contract.render.render_events`: for ranked results a `mode:` line,
    `note:` and `hint:` lines, then one line per hit."""
    if not body.startswith(_EVENTS_PREFIX):
        raise Fallback
    try:
        result = loads(body)
        records = result["events"]
        if not all(isinstance(record, dict) for record in records):
            raise Fallback
        mode = str(result.get("mode", "substring"))
        lines = [_one_line(record, with_score) for record in records]
        if as_json:
            return [body.rstrip("\n")]
        if mode not in ("substring", "recent", "session"):
            hint = [f"hint: {result['hint']}"] if result.get("weak") and result.get("hint") else []
            lines[:0] = [f"mode: {mode}", *(f"note: {note}" for note in result.get("notes", [])), *hint]
    except (ValueError, IndexError, KeyError, TypeError, AttributeError):
        raise Fallback from None
    return lines


def _one_line(record: dict[str, Any], with_score: bool, width: int = 200) -> str:
    """`urchin.search.query.one_line`, on the record the daemon sent."""
    text = " ".join(record["content"].split())
    if len(text) > width:
        text = text[: width - 1] + "…"
    prefix = f"[{record['timestamp'][:19]}Z] {record['source']}"
    score = record.get("score")
    if with_score and score is not None:
        prefix += f" ({float(score):.3f})"
    return f"{prefix} — {text}"


def _emit(lines: list[str], notes: list[str]) -> int:
    """Print as click.echo does: one flushed write per line, ANSI codes stripped off a non-terminal;
    notes on stderr after the results, as the full CLI writes them."""
    try:
        for line in lines:
            _echo(sys.stdout, line)
        for note in notes:
            _echo(sys.stderr, note)
    except BrokenPipeError:
        sys.stderr.close()
    return 0


# C0 (but tab and newline), DEL and C1: shown as U+FFFD on a terminal, as the full CLI's stdout does
_CONTROL = "".join(chr(c) for c in (*range(0x00, 0x09), *range(0x0b, 0x20), *range(0x7f, 0xa0)))
_ON_TERMINAL = str.maketrans(dict.fromkeys(_CONTROL, "\ufffd"))


def _echo(stream: Any, text: str) -> None:
    if stream is sys.stdout and _isatty(stream):
        text = text.translate(_ON_TERMINAL)   # a stored escape sequence must not drive the terminal
    text += "\n"
    if "\x1b" in text and not _isatty(stream):
        import re

        text = re.sub(r"\033\[[0-?]*[ -/]*[@-~]", "", text)
    stream.write(text)
    stream.flush()


def _utf8(stream: Any) -> bool:
    return str(getattr(stream, "encoding", "") or "").lower().replace("-", "").replace("_", "") == "utf8"


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except Exception:  # noqa: BLE001 - click's isatty
        return False
