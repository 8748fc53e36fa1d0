"""The official MCP Inspector (CLI mode, from the npm registry) against `urchin mcp`.

The first run downloads the Inspector into npm's cache (~45 s); later runs use `--prefer-offline`
and take a few seconds each. The current Inspector needs Node >= 22.19; on Node 20 npm resolves
the newest release that supports it (0.15.0).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from urchin.facade import Memory

REPO = Path(__file__).resolve().parent.parent
NPX = shutil.which("npx")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(NPX is None, reason="npx not found: install Node.js to run the MCP Inspector check")]


@functools.cache
def _inspector_bin() -> str:
    """The Inspector's own executable, fetched (or found in npm's cache) by npx once per worker: npx's
    resolution costs ~0.9 s of a core a call, the Inspector itself ~0.2 s."""
    assert NPX is not None
    done = subprocess.run([NPX, "-y", "--prefer-offline", "-p", "@modelcontextprotocol/inspector", "-c",
                           "command -v mcp-inspector"], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "npm_config_update_notifier": "false"})
    assert done.returncode == 0 and done.stdout.strip(), f"npx failed ({done.returncode}): {done.stderr[-2000:]}"
    return done.stdout.strip().splitlines()[-1]


def inspector(*method_args: str) -> Any:
    command = [_inspector_bin(), "--cli",
               "-e", f"URCHIN_HOME={os.environ['URCHIN_HOME']}", "-e", f"PYTHONPATH={REPO}",
               sys.executable, "-m", "urchin", "mcp", *method_args]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "npm_config_update_notifier": "false"})
    assert done.returncode == 0, f"inspector failed ({done.returncode}): {done.stderr[-2000:]}"
    return json.loads(done.stdout)


def test_inspector_lists_the_tools_with_strict_schemas() -> None:
    tools = {tool["name"]: tool for tool in inspector("--method", "tools/list")["tools"]}
    assert {"urchin_search", "urchin_semantic_search", "urchin_status", "urchin_ingest"} <= set(tools)
    for tool in tools.values():
        assert tool["inputSchema"]["additionalProperties"] is False
        assert tool["outputSchema"]["type"] == "object"
    assert tools["urchin_search"]["inputSchema"]["required"] == ["query"]


def test_inspector_calls_a_tool_and_sees_clean_errors(memory: Memory) -> None:
    stored = memory.ingest_one({"content": "inspector finds this line", "source": "claude"})
    found = inspector("--method", "tools/call", "--tool-name", "urchin_search",
                      "--tool-arg", "query=inspector finds", "--tool-arg", "limit=5")
    assert found["isError"] is False
    assert [e["id"] for e in found["structuredContent"]["events"]] == [stored.id]
    assert found["content"][0]["text"].endswith("claude — inspector finds this line")
    failed = inspector("--method", "tools/call", "--tool-name", "urchin_search",
                       "--tool-arg", "query=x", "--tool-arg", "hours=-1")
    assert failed["isError"] is True
    assert failed["content"][0]["text"] == "hours: must be greater than 0, got -1"
