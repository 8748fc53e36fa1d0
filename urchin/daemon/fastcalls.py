"""`urchin context|recall|get` beside a running daemon, on fastclient.py's rules: the standard library
(and, for `context`, its one render from `urchin.contract.render`), one request, the full CLI's bytes.

Each takes the options people type most (`fastclient.COMMANDS`, generated from the contract, names
them, with their routes, wire names and types); any other flag is the full CLI's. Values are typed as
click types them (INT, FLOAT), sent as the full CLI sends them (`RemoteMemory`: a JSON body for
`/context` and `/recall`, the quoted id for `/events/`), and checked by the daemon with the one
validator: any answer but 200 goes to the full CLI, which then reports it as it always did.
"""

from __future__ import annotations

from urchin.daemon import fastclient
from urchin.daemon.fastclient import COMMANDS, Fallback, locate, quote, read_args, request_body, typed
from urchin.daemon_http import dumps, loads

TYPE_CHECKING = False   # not `typing`'s: a fast path pays for every import
if TYPE_CHECKING:
    from typing import Any

__all__ = ["run", "answer", "CALLS"]

CALLS = ("context", "recall", "get")   # the commands answered here (fastclient: the lists of events)


def run(argv: list[str]) -> int | None:
    """Answer `argv` (without the program name) through the daemon, or None for the full CLI."""
    return fastclient.run(argv, dict.fromkeys(CALLS, answer))


def answer(home: str | None, command: str, args: list[str]) -> tuple[list[str], list[str]]:
    """The lines the full CLI prints for `command args` (stdout, stderr), or Fallback."""
    method, path, positional, options, _ = COMMANDS[command]
    values, given, as_json = read_args(args, options, 1 if positional else 0)
    params: dict[str, Any] = {positional: given[0]} if positional else {}
    params.update((options[flag][0], typed(options[flag][1], value)) for flag, value in values.items())
    token, address, _ = locate(home)
    if path.endswith("/"):       # GET /events/<id>
        body = request_body(address, token, method, path + quote(params.pop(positional)))
    else:
        try:
            payload = dumps(params).encode("utf-8")
        except (ValueError, UnicodeEncodeError):
            raise Fallback from None     # nan, an undecodable argv byte: the full CLI says what is wrong
        body = request_body(address, token, method, path, payload)
    return _lines(command, body, as_json), []


def _lines(command: str, body: str, as_json: bool) -> list[str]:
    """The full CLI's output: with --json the result object (the daemon's body, which is it, written
    by the same orjson), else `render_context`, the recall block (nothing when empty), the event."""
    try:
        result = loads(body)
        if command == "context":
            if not body.startswith('{"query":') or list(result) != ["query", "results", "coverage", "truncated",
                                                                    "tokensUsed"]:
                raise Fallback
            if as_json:
                return [body.rstrip("\n")]
            from urchin.contract.render import render_context

            return [render_context(result)]
        if command == "recall":
            if not isinstance(result, dict) or not isinstance(result.get("text"), str):
                raise Fallback
            return [body.rstrip("\n")] if as_json else [result["text"]] if result["text"] else []
        if not isinstance(result, dict) or not body.startswith('{"id":'):
            raise Fallback
        import orjson  # the event's text is orjson's indented form; its import is a third of this path

        event = orjson.loads(body)
        return [orjson.dumps(event).decode()] if as_json else [orjson.dumps(event, option=orjson.OPT_INDENT_2).decode()]
    except (ValueError, IndexError, KeyError, TypeError, AttributeError):
        raise Fallback from None
