"""A route whose app is built in a thread once the daemon starts, not before it is ready.

The MCP SDK's import (pydantic models for two protocol versions) is 0.8 s of a 1.4 s daemon start:
the daemon takes requests without it, and a request to `/mcp` made before it is built waits for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, cast

import anyio
from starlette.responses import JSONResponse
from starlette.routing import BaseRoute, Route

if TYPE_CHECKING:
    from urchin.facade.api import Facade

__all__ = ["DeferredApp", "mcp_extension"]

log = logging.getLogger("urchin.daemon")


class Built(Protocol):
    """What the builder returns: an ASGI app and the lifespan it needs (as `McpHttp` has)."""

    app: Any

    def lifespan(self, app: Any = None) -> AbstractAsyncContextManager[None]: ...


class DeferredApp:
    """An ASGI app built by `build` in a worker thread when the daemon's lifespan starts; requests
    wait until it is built, then pass through. A build that fails is logged, and answered 503."""

    def __init__(self, name: str, build: Callable[[], Built]) -> None:
        self.name = name
        self._build = build
        self._app: Any = None
        self._failed = ""
        self._done: anyio.Event | None = None

    @asynccontextmanager
    async def lifespan(self, app: Any = None) -> AsyncIterator[None]:
        self._done = anyio.Event()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(self._run)
            try:
                yield
            finally:
                tasks.cancel_scope.cancel()

    async def _run(self) -> None:
        assert self._done is not None
        started = time.perf_counter()
        try:
            built = await self._built_off_the_loop()
            async with built.lifespan():
                self._app = built.app
                self._done.set()
                log.info("%s ready in %.2fs", self.name, time.perf_counter() - started)
                await anyio.sleep_forever()
        except Exception as exc:     # noqa: BLE001 - the rest of the daemon serves on without it
            log.error("%s did not start: %s", self.name, exc)
            self._failed = f"{self.name} did not start: {exc}"
        finally:
            self._app = None
            self._done.set()         # nobody waits for a build that will not come

    async def _built_off_the_loop(self) -> Built:
        """`build()` in a daemon thread: a daemon stopped while it runs (the SDK's import takes
        seconds) exits at once. anyio's worker threads are joined at exit, so a test or a user that
        stopped a daemon just started waited for an import whose result nobody would use."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Built] = loop.create_future()

        def settle(value: Built | None, error: BaseException | None) -> None:
            if future.done():       # cancelled: the daemon is stopping
                return
            if error is not None:
                future.set_exception(error)
            else:
                future.set_result(cast(Built, value))

        def work() -> None:
            value, error = None, None
            try:
                value = self._build()
            except BaseException as exc:    # noqa: BLE001 - handed to the awaiting task, which logs it
                error = exc
            with contextlib.suppress(RuntimeError):    # the loop is closed: the daemon stopped meanwhile
                loop.call_soon_threadsafe(settle, value, error)

        threading.Thread(target=work, name=f"build {self.name}", daemon=True).start()
        return await future

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if self._done is not None:
            await self._done.wait()
        app = self._app
        if app is None:
            error = self._failed or f"{self.name} is not running (the daemon is stopping)"
            await JSONResponse({"error": error}, status_code=503)(scope, receive, send)
            return
        await app(scope, receive, send)


def mcp_extension(memory: Facade) -> tuple[list[BaseRoute], list[Any]]:
    """The MCP tools over streamable HTTP at `/mcp`, on the daemon's one `Memory` (the daemon already
    checks the token and Host, so the SDK's own Host check is off)."""

    def build() -> Built:
        from urchin.mcp_server.server import streamable_http_app

        return streamable_http_app(memory, host_check=False)

    deferred = DeferredApp("the MCP endpoint (/mcp)", build)
    return [Route("/mcp", endpoint=deferred)], [deferred.lifespan]
