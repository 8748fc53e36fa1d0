"""config.toml answers back: keys and sections no setting reads are named, with the nearest known key,
by `urchin doctor` and in the daemon's start-up log (never a refusal to start); and every key read
anywhere is declared once, in `urchin.config_keys.SCHEMA`."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_urchin
from tests.daemon_fixture import DaemonProcess
from urchin.config import Settings
from urchin.config_keys import ANY, SCHEMA, Table, UndeclaredSetting, declared_keys, unknown_keys
from urchin.daemon.app import sse_idle_seconds
from urchin.recall.policy import Policy
from urchin.redact import Redactor

TYPOS = '''durabilty = "batch"
[urchin]
durabilty = "batch"
[deamon]
sse_idle_timeout_s = 30
[recall]
prompt_budjet = 300
[recall.workspaces.api]
enabeld = false
[collectors.git]
root = ["~/code"]
'''


def test_unknown_keys_and_sections_are_named_with_the_nearest_known_key(urchin_home: Path) -> None:
    urchin_home.mkdir()
    (urchin_home / "config.toml").write_text(TYPOS)
    found = {u.key: u.nearest for u in unknown_keys(Settings.resolve(urchin_home).config.raw)}  # type: ignore[attr-defined]
    assert found == {"durabilty": "urchin.durability", "urchin.durabilty": "urchin.durability", "deamon": "daemon",
                     "recall.prompt_budjet": "recall.prompt_budget",
                     "recall.workspaces.api.enabeld": "recall.workspaces.api.enabled",
                     "collectors.git.root": "collectors.git.roots"}


def _leaves() -> list[str]:
    return [k for k in declared_keys() if ANY not in k and not isinstance(_node(k), dict)]


def _node(path: str) -> object:
    node: object = SCHEMA
    for part in path.split("."):
        assert isinstance(node, dict)
        node = node[part]
    return node


def _nest(path: str, value: object) -> dict[str, object]:
    head, _, rest = path.partition(".")
    return {head: _nest(rest, value) if rest else value}


@pytest.mark.parametrize("path", _leaves())
def test_a_typo_of_any_declared_key_points_back_to_it(path: str) -> None:
    section, _, leaf = path.rpartition(".")
    typo = leaf[:-1] + leaf[-1] * 2          # a doubled last letter: `port` -> `portt`
    (found,) = unknown_keys(_nest(f"{section}.{typo}" if section else typo, 1))
    assert found.nearest == path


def test_a_file_of_declared_keys_only_is_clean_and_every_reader_accepts_it(urchin_home: Path) -> None:
    """Every declared key, with a valid value; every reader of config.toml run on it: no key read is
    undeclared (the guard would raise) and none written is unknown."""
    urchin_home.mkdir()
    (urchin_home / "config.toml").write_text('''
[urchin]
durability = "batch"
soft_cap_bytes = 4096
embedder_timeout_s = 5
host = "127.0.0.1"
port = 18799
no_daemon = true
[identity]
account = "ada"
device = "laptop"
[collectors]
claude_dir = "~/.claude"
[collectors.shell]
histories = ["~/.bash_history"]
[collectors.git]
roots = []
[redact]
allow = ["harmless"]
[redact.extra]
ticket = "TCK-[0-9]{6}"
[daemon]
sse_idle_timeout_s = 60
[recall]
enabled = true
session_budget = 1000
prompt_budget = 500
exclude_sources = ["shell"]
no_daemon_deadline_ms = 500
[recall.workspaces.api]
enabled = false
''')
    settings = Settings.resolve(urchin_home)
    assert settings.unknown_keys() == []
    Redactor.from_config(settings.section("redact"))
    assert Policy.of(settings.config, "api").enabled is False
    assert sse_idle_seconds(settings.section("daemon")) == 60
    from urchin.hooks import _deadline_s

    assert _deadline_s(settings) == 0.5


def test_reading_an_undeclared_key_is_a_programming_error() -> None:
    settings = Settings.resolve(Path("/nonexistent-home"), env={})
    with pytest.raises(UndeclaredSetting, match="recall.no_such_key"):
        settings.section("recall").get("no_such_key")
    with pytest.raises(UndeclaredSetting, match="nope"):
        _ = "nope" in settings.config
    assert Table({"redact": {"extra": {"any-name": "x"}}})["redact"]["extra"]["any-name"] == "x"


def test_every_section_named_in_the_code_is_declared() -> None:
    """`settings.section("x")` and `config.get("x")` with a literal: x is a declared section."""
    named = set()
    for path in Path(__file__).resolve().parent.parent.joinpath("urchin").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args \
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str) \
                    and (node.func.attr == "section" or (node.func.attr == "get" and ast.unparse(
                        node.func.value).split(".")[-1] == "config")):
                named.add(node.args[0].value)
    assert named and named <= set(SCHEMA), named - set(SCHEMA)


def test_doctor_names_the_unknown_keys(urchin_home: Path) -> None:
    urchin_home.mkdir()
    (urchin_home / "config.toml").write_text(TYPOS)
    out = run_urchin("doctor", env={"URCHIN_NO_DAEMON": "1"})
    assert "urchin.durabilty (did you mean urchin.durability?)" in out.stdout
    assert "deamon (did you mean daemon?)" in out.stdout


def test_the_daemon_starts_and_logs_the_unknown_keys(urchin_home: Path) -> None:
    urchin_home.mkdir()
    (urchin_home / "config.toml").write_text(TYPOS)
    daemon = DaemonProcess(urchin_home).start()
    try:
        assert daemon.client().get("/health").status_code == 200
        log = daemon.log()
        assert "recall.prompt_budjet (did you mean recall.prompt_budget?)" in log and "deamon" in log
    finally:
        daemon.stop()


def test_every_key_the_file_holds_reads_back_whatever_its_spelling(urchin_home: Path) -> None:
    """Code that walks the user's file (reload, compare, copy) never trips on a typo; only a key read in
    code that is neither declared nor in the file is refused."""
    urchin_home.mkdir()
    (urchin_home / "config.toml").write_text(TYPOS)
    config = Settings.resolve(urchin_home).config

    def walk(table: Any) -> Any:
        return {k: walk(v) if isinstance(v, Mapping) else v for k, v in table.items()}

    assert walk(config)["deamon"] == {"sse_idle_timeout_s": 30} and config.get("durabilty") == "batch"
    with pytest.raises(UndeclaredSetting):
        config.get("never_declared_anywhere")


def test_the_readme_configuration_names_every_variable_and_key() -> None:
    """The README's configuration reference is complete: every `URCHIN_*` variable the package reads
    and every key `config.toml` may hold (SCHEMA) is named in it."""
    import re
    from pathlib import Path

    from urchin.config_keys import SCHEMA

    repo = Path(__file__).resolve().parent.parent
    readme = (repo / "README.md").read_text()
    section = readme.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    variables = {name for path in (repo / "urchin").rglob("*.py")
                 for name in re.findall(r'"(URCHIN_[A-Z_]+)"', path.read_text())}
    assert variables and {v for v in variables if f"`{v}`" not in section} == set()

    def leaves(table: dict, prefix: str) -> list[tuple[str, str]]:
        out = []
        for key, child in table.items():
            if isinstance(child, dict):
                out += leaves(child, f"{prefix}.{key}" if prefix else key)
            elif key != "*":
                out.append((prefix, key))
        return out

    missing = [f"{table}.{key}" for table, key in leaves(SCHEMA, "") if f"{key}" not in section
               or f"[{table.split('.*')[0].replace('.workspaces', '')}" not in section]
    assert missing == []
