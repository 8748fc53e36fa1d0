"""Helpers shared by the MCP tests: real clients of the official SDK, talking to real processes.

`stdio_session` launches `python -m urchin mcp`; `http_server` runs `tests/mcp_http_app.py` under
uvicorn in a subprocess (the same mounting the daemon does) and `http_session` connects to it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx2
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

REPO = Path(__file__).resolve().parent.parent


def child_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """What the server process needs: the test's URCHIN_HOME and this checkout on PYTHONPATH."""
    extra = extra or {}
    return {"PYTHONPATH": str(REPO), "URCHIN_HOME": extra.get("URCHIN_HOME") or os.environ["URCHIN_HOME"], **extra}


@asynccontextmanager
async def stdio_session(extra_env: dict[str, str] | None = None,
                        errlog: Path | None = None) -> AsyncIterator[ClientSession]:
    """`urchin mcp` in a subprocess, initialized; its stderr goes to `errlog` (default: discarded)."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "urchin", "mcp"], env=child_env(extra_env))
    with open(errlog or os.devnull, "w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def http_server(token: str, extra_env: dict[str, str] | None = None) -> Iterator[str]:
    """Run the test app under uvicorn; yields its base URL once it answers."""
    port = free_port()
    env = {**os.environ, **child_env(extra_env), "URCHIN_INTAKE_TOKEN": token}
    proc = subprocess.Popen([sys.executable, "-m", "uvicorn", "--factory", "--app-dir", str(REPO / "tests"),
                             "mcp_http_app:create_app", "--host", "127.0.0.1", "--port", str(port),
                             "--log-level", "warning"], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"uvicorn exited: {proc.stderr.read().decode() if proc.stderr else ''}")
            try:
                httpx2.get(base + "/mcp", timeout=1)
                break
            except httpx2.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@asynccontextmanager
async def http_session(url: str, token: str | None, **client_args: Any) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60)) as client:
        async with streamable_http_client(url, http_client=client, **client_args) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session
