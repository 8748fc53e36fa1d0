"""Routes added by an extension (how the MCP server mounts /mcp) sit behind the same guard."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from urchin.config import Settings
from urchin.daemon.server import Daemon
from urchin.facade import Memory


def test_extension_routes_are_guarded_and_share_the_hot_memory(tmp_path: Path) -> None:
    settings = Settings.resolve(tmp_path / "home", env={"URCHIN_INTAKE_TOKEN": "ext-token"})
    seen: dict[str, object] = {}

    def extend(memory: Memory) -> tuple[list[Mount], list]:  # type: ignore[type-arg]
        async def echo(request: Request) -> JSONResponse:
            body = await request.json() if request.method == "POST" else None
            return JSONResponse({"same_memory": seen["memory"] is memory, "body": body})

        @asynccontextmanager
        async def lifespan(app: Starlette) -> AsyncIterator[None]:
            seen["entered"] = True
            yield
            seen["left"] = True

        seen["memory"] = memory
        return [Mount("/ext", app=Starlette(routes=[Route("/echo", echo, methods=["GET", "POST"])]))], [lifespan]

    daemon = Daemon(settings, port=0, extensions=[extend])
    thread = threading.Thread(target=daemon.run)
    thread.start()
    try:
        assert daemon.ready.wait(30)
        url = daemon.address
        ok = {"authorization": "Bearer ext-token"}
        with httpx.Client(base_url=url, trust_env=False) as client:
            assert client.get("/ext/echo", headers=ok).json() == {"same_memory": True, "body": None}
            assert client.post("/ext/echo", headers=ok, json={"a": 1}).json()["body"] == {"a": 1}
            assert client.get("/ext/echo").status_code == 401
            assert client.get("/ext/echo", headers={**ok, "host": "evil.example"}).status_code == 403
            assert client.post("/ext/echo", headers=ok, content=b"a=1").status_code == 415
        assert seen.get("entered") is True
    finally:
        daemon.stop()
        thread.join(10)
    assert seen.get("left") is True
    assert not settings.daemon_file.exists()
