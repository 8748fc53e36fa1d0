"""The light clients' table (the generated block `COMMANDS` of urchin/daemon/fastclient.py) is what the
contract makes of it: regenerated here, it equals the checked-in block; every option the contract declares
for a fast command is taken by the fast path from the table or falls through to the full CLI by name; and
the light reader takes exactly the table's options. In process, no daemon: the answers themselves are
tests/test_fastclient.py's and tests/test_fastcalls.py's byte-for-byte comparisons with the full CLI."""

from __future__ import annotations

import ast
from dataclasses import replace

import pytest

from urchin.contract import OPERATIONS
from urchin.contract.access import ACCESS
from urchin.daemon import fastcalls, fastclient
from urchin.daemon.fastclient import COMMANDS, Fallback, read_args
from urchin.daemon.fasttable_gen import LIGHT, PATH, entry, rewrite


def test_the_checked_in_table_is_what_the_contract_makes() -> None:
    text = PATH.read_text(encoding="utf-8")
    assert text == rewrite(text), \
        "the contract changed: run `python -m urchin.daemon.fasttable_gen` and commit urchin/daemon/fastclient.py"


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_option_the_contract_declares_is_taken_or_falls_through(command: str) -> None:
    method, path, positional, takes, falls = COMMANDS[command]
    op = OPERATIONS[command]
    declared = {p.flag_name: p for p in op.params if not p.positional and not p.wire_only}
    assert set(takes).isdisjoint(falls)
    assert set(takes) | set(falls) == set(declared)
    for flag, (wire, kind, default) in takes.items():
        param = declared[flag]
        assert (wire, kind) == (param.wire_name, param.kind) and default == param.default, flag
        assert kind in ("text", "int", "number"), flag   # `--flag VALUE`, read once
    assert positional == "".join(p.wire_name for p in op.params if p.positional)
    (route,) = ACCESS[command].routes
    assert (method, path) == (route.method, route.path.removesuffix(".+"))
    assert path.endswith("/") == route.path.endswith(".+")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_the_light_reader_takes_the_tables_options_and_no_other(command: str) -> None:
    _, _, positional, takes, falls = COMMANDS[command]
    given = ["x"] if positional else []
    for flag in takes:
        assert read_args([*given, flag, "7"], takes, len(given)) == ({flag: "7"}, given, False)
        assert read_args([f"{flag}=7", "--json", *given], takes, len(given)) == ({flag: "7"}, given, True)
    for flag in falls:
        with pytest.raises(Fallback):
            read_args([*given, flag, "7"], takes, len(given))


def test_the_fast_paths_answer_the_tables_commands_and_main_sends_them_there() -> None:
    assert sorted(fastclient.LISTINGS + fastcalls.CALLS) == sorted(COMMANDS)
    assert all(COMMANDS[c][0] == "GET" and not COMMANDS[c][1].endswith("/") for c in fastclient.LISTINGS)
    main = ast.parse((PATH.parents[1] / "__main__.py").read_text(encoding="utf-8"))
    tuples = {tuple(ast.literal_eval(node)) for node in ast.walk(main)
              if isinstance(node, ast.Tuple) and node.elts and all(isinstance(e, ast.Constant) for e in node.elts)}
    assert {fastclient.LISTINGS, fastcalls.CALLS} <= tuples


def test_an_option_nobody_decided_on_stops_the_generator() -> None:
    """An option added to a fast command's operation must be taken or named as falling through."""
    light = LIGHT["search"]
    with pytest.raises(ValueError, match=r"not decided \['scope'\]"):
        entry("search", replace(light, falls={}))
    with pytest.raises(ValueError, match=r"not the contract's \['colour'\]"):
        entry("search", replace(light, takes=(*light.takes, "colour")))
    with pytest.raises(ValueError, match="cannot take"):
        entry("semantic", replace(light, takes=(*light.takes, "explain"), falls={"min_score": "-"}))
