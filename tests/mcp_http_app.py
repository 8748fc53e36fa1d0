"""A minimal ASGI app serving the MCP endpoint at /mcp behind a bearer token, run by uvicorn in tests.

It mounts `streamable_http_app(memory)` exactly as the daemon does: the route from `routes()` and
the session manager's `lifespan()` entered in the app's own lifespan (a mounted sub-app's lifespan
never runs on its own).
"""

from __future__ import annotations

import hmac
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.responses import JSONResponse

from urchin.config import Settings
from urchin.facade import Memory
from urchin.mcp_server import streamable_http_app


class BearerToken:
    """Refuses any request without `Authorization: Bearer <token>` (stands in for the daemon's check)."""

    def __init__(self, app: Any, token: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            given = dict(scope["headers"]).get(b"authorization", b"")
            if not hmac.compare_digest(given, self.expected):
                await JSONResponse({"error": "missing or wrong bearer token"}, 401)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def create_app() -> Starlette:
    settings = Settings.resolve()
    assert settings.intake_token, "set URCHIN_INTAKE_TOKEN"
    mcp_http = streamable_http_app(Memory(settings))

    return Starlette(routes=mcp_http.routes("/mcp"), lifespan=mcp_http.lifespan,
                     middleware=[Middleware(BearerToken, token=settings.intake_token)])
