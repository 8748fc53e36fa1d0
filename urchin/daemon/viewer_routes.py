"""The browser viewer's routes: its static page, sign-in by one-time code, and the few API calls the
page needs that the API lacked (timeline pages, activity per day, ephemeral on/off, index status).

Each API route is one `Memory` call; the page reads events only through these and the routes every
other client uses (`/search`, `/semantic`, `/context`, `/events/{id}`, `/forget`, `/overview`, ...).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from importlib import resources
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from urchin.daemon.browser import CODE_TTL_S, SESSION_TTL_S, BrowserSession, BrowserSessions, cookie_name
from urchin.daemon.security import SESSION, VIA
from urchin.errors import QueryError, UrchinError, ValidationError
from urchin.value_checks import check_number, unknown_parameter

__all__ = ["viewer_routes", "STATIC_FILES"]

STATIC_FILES = {  # the page's whole surface: nothing else under /static is served
    "app.js": "text/javascript; charset=utf-8",
    "app.css": "text/css; charset=utf-8",
    "icon.svg": "image/svg+xml",
}
_TIMELINE_PARAMS = ("before", "after", "limit", "source", "workspace", "session", "kind")
_LOGIN_FAILED = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Urchin: this login link no longer works</title>
<link rel="icon" href="/favicon.ico"></head>
<body>
<h1>This login link no longer works</h1>
<p>A viewer login link works once, within {CODE_TTL_S:.0f} seconds of being made: this one was already used,
has expired, or belongs to a daemon that has since restarted.</p>
<p>For a new link, run this in a terminal on this machine:</p>
<pre>urchin open</pre>
<p>It opens the viewer signed in (<code>urchin open --no-browser</code> prints the link instead).</p>
</body></html>
""".encode()


class Unauthorised(UrchinError):
    status = 401


class Forbidden(UrchinError):
    status = 403


def _asset(name: str) -> bytes:
    return resources.files("urchin.daemon").joinpath("static", name).read_bytes()


def _params(request: Request, allowed: tuple[str, ...]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in request.query_params.multi_items():
        if key not in allowed:
            raise unknown_parameter(key, allowed)
        out[key] = value
    return out


def _int(value: str | None, name: str, default: int) -> int:
    return default if value is None else int(check_number(value, name, whole=True, from_text=True))


def viewer_routes(json: Callable[..., Response], memory_of: Callable[[Request], Any],
                  sessions: BrowserSessions) -> list[Route]:
    """`json(obj)` makes an API response; `memory_of(request)` is the daemon's Memory."""

    async def page(request: Request) -> Response:
        return Response(_asset("index.html"), media_type="text/html; charset=utf-8",
                        headers={"cache-control": "no-store"})

    async def static(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in STATIC_FILES:
            return json({"error": f"path: no such asset: {name}", "field": "path"}, status_code=404)
        return Response(_asset(name), media_type=STATIC_FILES[name], headers={"cache-control": "no-cache"})

    async def icon(request: Request) -> Response:
        return Response(_asset("icon.svg"), media_type=STATIC_FILES["icon.svg"])

    async def login(request: Request) -> Response:
        """Exchange a one-time code for a session cookie, then land on `/` (the code leaves the URL)."""
        granted = sessions.exchange(request.query_params.get("code", ""))
        if granted is None:   # a person followed this link: a page that says what to do, not a JSON error
            return Response(_LOGIN_FAILED, status_code=401, media_type="text/html; charset=utf-8",
                            headers={"cache-control": "no-store"})
        session_id, _ = granted
        # Count the activity chart's journal pass now, while the page loads its first timeline page.
        threading.Thread(target=memory_of(request).activity, kwargs={"days": 1}, name="urchin-activity",
                         daemon=True).start()
        response = RedirectResponse("/", status_code=303, headers={"cache-control": "no-store"})
        response.set_cookie(_cookie(request), session_id, max_age=int(SESSION_TTL_S),
                            path="/", httponly=True, samesite="strict")
        return response

    async def new_code(request: Request) -> Response:
        """A one-time login code, for `urchin open` (only with the bearer token, never a cookie)."""
        _by_token(request)
        code, ttl = sessions.new_code()
        return json({"code": code, "expiresInS": ttl, "path": f"/login?code={code}"})

    async def session(request: Request) -> Response:
        """Who the page is: its CSRF token (the page sends it back on every state-changing call)."""
        return json({"csrf": _page_session(sessions, request).csrf})

    async def logout(request: Request) -> Response:
        sessions.end(request.scope.get(SESSION))
        response = json({"signedOut": True})
        response.delete_cookie(_cookie(request), path="/", httponly=True, samesite="strict")
        return response

    async def timeline(request: Request) -> Response:
        params: dict[str, Any] = _params(request, _TIMELINE_PARAMS)
        params["limit"] = _int(params.get("limit"), "limit", 50)
        page = await run_in_threadpool(lambda: memory_of(request).timeline(**params))
        return json(page.to_dict())

    async def activity(request: Request) -> Response:
        params = _params(request, ("days",))
        days = _int(params.get("days"), "days", 30)
        return json(await run_in_threadpool(lambda: memory_of(request).activity(days=days)))

    async def ephemeral(request: Request) -> Response:
        memory = memory_of(request)
        if request.method == "GET":
            _params(request, ())
            return json((await run_in_threadpool(memory.ephemeral, "status")).to_dict())
        action, minutes = _ephemeral_change(await _body(request))
        state = await run_in_threadpool(memory.ephemeral, action, minutes)
        return json(state.to_dict())

    async def index_status(request: Request) -> Response:
        _params(request, ())
        return json(await run_in_threadpool(memory_of(request).index_status))

    return [
        Route("/", page, methods=["GET"]),
        Route("/favicon.ico", icon, methods=["GET"]),
        Route("/static/{name}", static, methods=["GET"]),
        Route("/login", login, methods=["GET"]),
        Route("/auth/code", new_code, methods=["POST"]),
        Route("/auth/session", session, methods=["GET"]),
        Route("/auth/logout", logout, methods=["POST"]),
        Route("/timeline", timeline, methods=["GET"]),
        Route("/activity", activity, methods=["GET"]),
        Route("/ephemeral", ephemeral, methods=["GET", "POST"]),
        Route("/index/status", index_status, methods=["GET"]),
    ]


def _by_token(request: Request) -> None:
    if request.scope.get(VIA) != "token":
        raise Forbidden("authorization: only the bearer token may mint login codes")


def _page_session(sessions: BrowserSessions, request: Request) -> BrowserSession:
    """The signed-in browser page's session (not for the bearer token; 401 once signed out)."""
    if request.scope.get(VIA) != "cookie":
        raise Forbidden("session: this is for a signed-in browser page")
    found = sessions.session(request.scope.get(SESSION))
    if found is None:
        raise Unauthorised("session: signed out")
    return found


def _cookie(request: Request) -> str:
    """The session cookie's name for the port this request came in on."""
    server = request.scope.get("server")
    return cookie_name(server[1] if server else None)


def _ephemeral_change(body: Mapping[str, Any]) -> tuple[str, Any]:
    """(action, minutes) of a POST /ephemeral body, checked."""
    for key in body:
        if key not in ("action", "minutes"):
            raise unknown_parameter(key, ("action", "minutes"))
    action = body.get("action")
    if action not in ("on", "off", "start", "end"):
        raise QueryError("action", f"must be on or off, got {action!r}")
    return action, body.get("minutes")


async def _body(request: Request) -> Mapping[str, Any]:
    import orjson

    try:
        body = orjson.loads(await request.body() or b"{}")
    except orjson.JSONDecodeError as exc:
        raise QueryError("body", f"not valid JSON: {exc}") from None
    if not isinstance(body, Mapping):
        raise ValidationError("body", "must be a JSON object")
    return body
