"""The daemon client is driven by the contract's table: each routed method of `RemoteMemory` names its
operation (`self._send("search", ...)`) and the route comes from `ACCESS` (urchin/contract/routes.py); no
operation's path or method is written in urchin/daemon/client.py, and every operation the daemon routes
is either sent by the client or named in its `IN_PROCESS`, with why. AST only: no process, no daemon."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import urchin
from urchin.contract.access import ACCESS
from urchin.contract.routes import request, template
from urchin.daemon.client import IN_PROCESS

CLIENT = Path(urchin.__file__).parent / "daemon" / "client.py"
METHODS = {"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD"}
ROUTED = {name for name, access in ACCESS.items() if access.routes}


def _docstrings(tree: ast.AST) -> set[int]:
    return {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)}


def _is_route(text: str) -> bool:
    """`text` is an operation's path, or the start of one (`"/events/" + id`)."""
    for access in ACCESS.values():
        for route in access.routes:
            literal = re.split(r"\[\^/\]\+|\.\+", route.path)[0]
            if re.fullmatch(route.path, text) or re.fullmatch(route.path, text + "x") or \
                    (len(text) > 1 and literal.startswith(text) and text.startswith("/")):
                return True
    return False


def hand_written(source: str) -> list[str]:
    """Each operation's path written in `source`, and each HTTP method not beside a path that is no
    operation's (`_call("POST", "/auth/code")`, the viewer's login: no operation's route)."""
    tree = ast.parse(source)
    skip = _docstrings(tree)
    found: list[tuple[int, int, str]] = []
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            texts = [a for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
            if any(t.value.startswith("/") and not _is_route(t.value) for t in texts):
                allowed.update(id(t) for t in texts if t.value in METHODS)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or not isinstance(node.value, str) or id(node) in skip:
            continue
        if node.value.startswith("/") and _is_route(node.value):
            found.append((node.lineno, node.col_offset, f"path {node.value!r}"))
        elif node.value in METHODS and id(node) not in allowed:
            found.append((node.lineno, node.col_offset, f"method {node.value!r}"))
    return [f"line {line}: {what}" for line, _, what in sorted(found)]


def sent(source: str) -> set[str]:
    """The operations `source` sends: the first argument of each `_send(...)`."""
    return {node.args[0].value for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "_send"
            and node.args and isinstance(node.args[0], ast.Constant)}


def test_no_route_of_an_operation_is_written_by_hand_in_the_client() -> None:
    assert hand_written(CLIENT.read_text()) == []


def test_every_routed_operation_is_sent_by_the_client_or_run_in_process_with_why() -> None:
    served = sent(CLIENT.read_text())
    assert served & set(IN_PROCESS) == set(), "both sent and run in-process"
    assert served | set(IN_PROCESS) == ROUTED, (
        f"not decided: {sorted(ROUTED - served - set(IN_PROCESS))}; "
        f"not routed by the contract: {sorted((served | set(IN_PROCESS)) - ROUTED)}")
    assert all(len(why.split()) >= 5 for why in IN_PROCESS.values()), "say why, in IN_PROCESS"
    for operation in served:   # each is a path the client can fill, and answers a request
        assert template(operation)[0] in METHODS


def test_the_finder_finds_routes_written_by_hand() -> None:
    source = '''
def get(self, p):
    return self._call("GET", "/events/" + quote(p.id, safe=""), parse=parse, fallback=fallback)
def search(self, p):
    return self._call("GET", "/search", params=to_wire(p))
def forget(self, p, path):
    return self._call("POST", path, json={})
def login(remote):
    return remote._call("POST", "/auth/code", json={})
def ingest(self):
    """Sent as `POST /ingest/batch` names it (a docstring may say so)."""
    return self._call("POST", f"/ingest/{'batch'}", json={})
'''
    assert [f.split(": ", 1)[1] for f in hand_written(source)] == [
        "method 'GET'", "path '/events/'", "method 'GET'", "path '/search'", "method 'POST'", "method 'POST'",
        "path '/ingest/'"]


def test_the_contract_fills_path_parameters_and_picks_the_batch_route() -> None:
    from urchin.params.reading import GetParams

    assert request("get", GetParams("a/b c")) == ("GET", "/events/a%2Fb%20c", {}, None)
    assert request("ingest", {"events": []}, "batch") == ("POST", "/ingest/batch", None, {"events": []})
    assert request("status") == ("GET", "/status", {}, None)
