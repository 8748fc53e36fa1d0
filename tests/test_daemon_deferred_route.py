"""The daemon's deferred routes (`/mcp`): built in a thread after start-up, so the daemon is ready
without the MCP SDK's 0.8 s import; a request made first waits for the build, a failed build is a
503 naming it and the daemon serves on. The real `/mcp` is exercised in test_mcp_daemon.py."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from starlette.testclient import TestClient

from urchin.daemon.deferred_route import DeferredApp


@dataclass
class _Built:
    events: list[str] = field(default_factory=list)

    async def app(self, scope: Any, receive: Any, send: Any) -> None:
        await PlainTextResponse("built")(scope, receive, send)

    @asynccontextmanager
    async def lifespan(self, app: Any = None) -> AsyncIterator[None]:
        self.events.append("entered")
        try:
            yield
        finally:    # left by cancellation when the daemon stops, as the SDK's session manager is
            self.events.append("left")


def _serve(deferred: DeferredApp) -> TestClient:
    return TestClient(Starlette(routes=[Route("/x", endpoint=deferred)], lifespan=deferred.lifespan))


def test_a_request_made_before_the_build_waits_for_it_and_the_lifespan_is_run() -> None:
    built, gate = _Built(), threading.Event()

    def build() -> _Built:
        gate.wait(10)
        return built

    with _serve(DeferredApp("slow", build)) as client:
        threading.Timer(0.3, gate.set).start()
        started = time.monotonic()
        answer = client.get("/x")
        assert (answer.status_code, answer.text) == (200, "built") and time.monotonic() - started >= 0.25
        assert built.events == ["entered"]
    assert built.events == ["entered", "left"]


def test_a_failed_build_is_a_503_naming_it_and_the_app_serves_on() -> None:
    def build() -> _Built:
        raise ImportError("No module named 'mcp'")

    deferred = DeferredApp("the MCP endpoint (/mcp)", build)
    app = Starlette(routes=[Route("/x", endpoint=deferred), Route("/ok", lambda r: PlainTextResponse("ok"))],
                    lifespan=deferred.lifespan)
    with TestClient(app) as client:
        answer = client.get("/x")
        assert answer.status_code == 503
        assert answer.json() == {"error": "the MCP endpoint (/mcp) did not start: No module named 'mcp'"}
        assert client.get("/ok").text == "ok"


def test_the_daemon_starts_without_importing_the_mcp_sdk() -> None:
    """What the deferral is for: `urchin serve`'s start-up path imports no MCP SDK module."""
    import subprocess

    code = ("import sys; import urchin.cli.serve, urchin.daemon.server, urchin.daemon.deferred_route; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('mcp', 'mcp_types')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "[]"


def test_a_daemon_stopped_during_the_build_exits_without_waiting_for_it() -> None:
    """A daemon stopped seconds after it started (a test, a user's Ctrl-C) while the SDK's import runs
    exits at once: the build's thread is not joined. Before, stopping waited out the whole import
    (4.6 s per stop measured under load; every daemon a test started paid it)."""
    import subprocess

    script = (
        "import time, anyio\n"
        "from urchin.daemon.deferred_route import DeferredApp\n"
        "def build():\n"
        "    time.sleep(30)\n"
        "async def main():\n"
        "    async with DeferredApp('slow', build).lifespan():\n"
        "        await anyio.sleep(0.2)\n"
        "anyio.run(main)\n"
    )
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 10, "the process waited for a build nobody will use"
