"""The ready-made MCP client configs under contrib/ parse, and each starts `urchin mcp`."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_urchin

CONTRIB = Path(__file__).resolve().parent.parent / "contrib"
# file -> the key holding the servers (VS Code alone says "servers")
JSON_CONFIGS = {"claude-code/.mcp.json": "mcpServers", "claude-desktop/claude_desktop_config.json": "mcpServers",
                "cursor/mcp.json": "mcpServers", "vscode/mcp.json": "servers",
                "gemini-cli/mcp-settings.json": "mcpServers"}


def _check_entry(entry: dict[str, Any]) -> None:
    assert entry["command"] == "urchin" and entry["args"] == ["mcp"]
    assert entry.get("type", "stdio") == "stdio"


@pytest.mark.parametrize("name", sorted(JSON_CONFIGS))
def test_json_config_starts_urchin_mcp(name: str) -> None:
    config = json.loads((CONTRIB / name).read_text())
    assert set(config) == {JSON_CONFIGS[name]}
    _check_entry(config[JSON_CONFIGS[name]]["urchin"])


def test_vscode_config_names_its_transport() -> None:
    assert json.loads((CONTRIB / "vscode/mcp.json").read_text())["servers"]["urchin"]["type"] == "stdio"


def test_codex_config_is_toml_for_urchin_mcp() -> None:
    config = tomllib.loads((CONTRIB / "codex/config.toml").read_text())
    _check_entry(config["mcp_servers"]["urchin"])


def test_the_configured_command_exists() -> None:
    done = run_urchin("mcp", "--help")
    assert done.returncode == 0 and "stdin/stdout" in done.stdout


def test_the_readme_tool_table_names_every_mcp_tool() -> None:
    """Each tool the MCP server lists has its row in the README's tool table (a tool added later too)."""
    import re

    from urchin.mcp_server.schemas import TOOL_DOCS

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    rows = [line for line in readme.splitlines() if line.startswith("| `")]
    listed = {name for row in rows for name in re.findall(r"`([a-z_]+)`", row.split("|")[1])}
    assert set(TOOL_DOCS) - listed == set()


def test_no_client_config_is_told_to_carry_the_admin_token() -> None:
    """contrib/ shows scoped tokens: no example reads $URCHIN_HOME/token into a client's config."""
    contrib = Path(__file__).resolve().parent.parent / "contrib"
    for path in contrib.rglob("*"):
        if path.is_file():
            text = path.read_text(errors="replace")
            assert "urchin/token)" not in text and "cat ~/.local/share/urchin/token" not in text, path


def test_the_readme_reads_in_a_users_order_and_its_links_resolve() -> None:
    """What it is, install, a tour, agents, what they are told, search, privacy, team, configuration,
    removal; contributors' and maintainers' material lives in docs/, linked; the contents list is true."""
    import re

    repo = Path(__file__).resolve().parent.parent
    readme = (repo / "README.md").read_text()
    prose = re.sub(r"```.*?```", "", readme, flags=re.S)
    headings = re.findall(r"^## (.+)$", prose, re.M)
    wanted = ["Contents", "Install", "A quick tour", "Connect your agent (MCP)", "What your agent is told",
              "Search and recall", "Privacy", "Team setup", "Configuration", "Uninstall"]
    assert [h for h in headings if h in wanted] == wanted, headings
    assert not {"Develop", "Development", "Threat model"} & set(headings)
    assert prose.index("Urchin is a local memory daemon") < prose.index("## Install")
    listed = re.findall(r"^- \[([^\]]+)\]\(#([^)]+)\)$", prose.split("## Contents", 1)[1].split("\n## ", 1)[0], re.M)
    titles = [title for title, _ in listed]
    assert titles == [h for h in headings if h in titles] and set(wanted) - {"Contents"} <= set(titles)
    for title, anchor in listed:
        assert anchor == re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-"), title
    for page in [repo / "README.md", *(repo / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(((?:\.\./|docs/)[^)#]+)", page.read_text()):
            assert (page.parent / target).exists(), (page.name, target)
    assert (repo / "docs" / "development.md").read_text().count("make test") >= 2
