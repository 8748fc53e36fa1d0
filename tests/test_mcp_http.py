"""The MCP tools over streamable HTTP at /mcp, served by uvicorn in a subprocess, with the SDK's HTTP client.

The app (tests/mcp_http_app.py) mounts `streamable_http_app(memory)` the way the daemon does,
behind a bearer token; the same scenarios as over stdio run against it.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.mcp_harness import http_server, http_session
from tests.mcp_scenarios import (
    check_errors,
    check_large_output,
    check_read_tools,
    check_tool_list,
    check_write_tools,
)
from tests.test_mcp_stdio_wire import MALFORMED
from urchin.config import Settings
from urchin.facade import Memory

pytestmark = pytest.mark.anyio
TOKEN = secrets.token_urlsafe(16)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def url(memory: Memory) -> Iterator[str]:
    with http_server(TOKEN) as base:
        yield base + "/mcp"


async def test_every_tool_over_http(url: str, memory: Memory) -> None:
    async with http_session(url, TOKEN) as session:
        assert session.initialize_result and session.initialize_result.server_info.name == "urchin"
        await check_tool_list(session)
        await check_read_tools(session, memory)
        await check_errors(session, memory)
    # A second client (a new connection, as after a daemon restart) sees the same journal.
    async with http_session(url, TOKEN) as session:
        await check_write_tools(session, memory)


async def test_large_results_over_http_with_default_client_limits(url: str, memory: Memory) -> None:
    # ~10 MB of structuredContent: plain JSON responses are not subject to the client's 1 MiB SSE cap.
    async with http_session(url, TOKEN) as session:
        await check_large_output(session, memory)


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Memory]]:
    """One server for the tests that store nothing (each case is one request; none may store anything)."""
    home = tmp_path_factory.mktemp("mcp-http-malformed") / "urchin-home"
    with http_server(TOKEN, {"URCHIN_HOME": str(home)}) as base:
        yield base + "/mcp", Memory(Settings.resolve(home))


def test_http_endpoint_refuses_without_token_and_foreign_hosts(shared: tuple[str, Memory]) -> None:
    url, memory = shared
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                  "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                             "clientInfo": {"name": "raw", "version": "1"}}}
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    assert httpx2.post(url, json=initialize, headers=accept).status_code == 401
    wrong = {**accept, "Authorization": "Bearer wrong"}
    assert httpx2.post(url, json=initialize, headers=wrong).status_code == 401
    good = {**accept, "Authorization": f"Bearer {TOKEN}"}
    ok = httpx2.post(url, json=initialize, headers=good)
    assert ok.status_code == 200 and ok.json()["result"]["serverInfo"]["name"] == "urchin"
    rebinding = httpx2.post(url, json=initialize, headers={**good, "Host": "evil.example:80"})
    assert rebinding.status_code in (403, 421)
    assert memory.recent().events == []


@pytest.mark.parametrize(("body", "code", "echo"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_a_malformed_body_gets_the_same_json_rpc_error_as_over_stdio(shared: tuple[str, Memory], body: bytes,
                                                                      code: int, echo: Any) -> None:
    """One rule for both transports: a body that is not one JSON-RPC 2.0 message is answered 400 with
    -32700 (id null) or -32600 (its id echoed when readable), never 202-and-silence."""
    url, memory = shared
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
               "Authorization": f"Bearer {TOKEN}"}
    response = httpx2.post(url, content=body, headers=headers)
    assert response.status_code == 400, response.text
    error = response.json()
    assert error["jsonrpc"] == "2.0" and error["id"] == echo and error["error"]["code"] == code, error
    assert memory.recent().events == []
