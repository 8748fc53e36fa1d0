"""The browser viewer, driven in a real headless Chromium (Playwright) against a real daemon with the
hybrid index on the embedded PostgreSQL: sign-in by one-time URL, timeline, search in each mode,
session, event and file views, ephemeral mode, forgetting, XSS as text, and a page closed to
anyone not signed in. One daemon and one browser for the module; every request the page makes is
recorded, and so is every console error and dialog."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from tests.daemon_fixture import REPO, DaemonProcess
from urchin.config import Settings
from urchin.facade import Memory

playwright_sync = pytest.importorskip("playwright.sync_api", reason="the `dev` extra (playwright) is not installed")
expect = playwright_sync.expect  # waits by locator: the page's CSP forbids the eval that wait_for_function needs

CHROMIUM = os.environ.get("URCHIN_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
XSS = "<img src=x onerror=alert(1)>"
SECRET_MARK = "[REDACTED:github_token]"
EVENTS = [
    {"id": "ev-plan", "content": "Plan: deploy the shop with blue-green switches", "source": "claude",
     "kind": "decision", "workspace": "shop", "session": "sess-a", "tags": ["deploy"],
     "timestamp": "2026-01-10T09:00:00Z"},
    {"id": "ev-reply", "content": "ok, the load balancer flips after health checks", "source": "copilot",
     "kind": "conversation", "workspace": "shop", "session": "sess-a", "timestamp": "2026-01-10T09:01:00Z"},
    {"id": "ev-xss", "content": XSS, "source": "shell", "kind": "command", "session": "sess-b",
     "timestamp": "2026-01-11T10:00:00Z",
     "meta": {"exit_code": 2, XSS: XSS, "files": ["a.py", "b.py"], "nested": {"deep": {"rows": [{"n": 1}]}}}},
    {"id": "ev-secret", "content": "token ghp_" + "a1B2" * 9 + " pushed", "source": "git", "kind": "commit",
     "timestamp": "2026-01-11T11:00:00Z"},
    {"id": "ev-doomed", "content": "a scratch note about zebra crossings to forget", "source": "manual", "kind": "note",
     "timestamp": "2026-01-11T12:00:00Z"},
]
DOC = ("# Operations\n\n## Deploy\n\nWe deploy with blue-green switches behind the load balancer.\n"
       "Rollback is one flip.\n")


def _env(home: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(REPO), "URCHIN_HOME": str(home),
            "URCHIN_USER_HOME": str(home.parent / "user-home")}


@pytest.fixture(scope="module")
def module_pg_url(pg_server: Any, pg_server_url: str) -> Iterator[str]:
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"urchin_viewer_{uuid.uuid4().hex[:10]}"
    admin = pg_server.url() if pg_server is not None else pg_server_url
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield make_conninfo(pg_server_url, dbname=name)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def daemon(tmp_path_factory: pytest.TempPathFactory, module_pg_url: str) -> Iterator[DaemonProcess]:
    base = tmp_path_factory.mktemp("viewer")
    home, root = base / "home", base / "shop"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "ops.md").write_text(DOC)
    home.mkdir()
    Memory(Settings.resolve(home)).workspace_add(str(root))
    proc = DaemonProcess(home, "--with-index", "--no-collect",
                         env={"URCHIN_DATABASE_URL": module_pg_url, "URCHIN_USER_HOME": str(base / "user-home")})
    proc.start()
    try:    # stopped even when the setup below fails (a loaded machine's timeout)
        with proc.client() as client:
            assert client.post("/ingest/batch", json={"events": EVENTS}).status_code == 200
            _wait(lambda: any(r.get("location", {}).get("path") for r in client.post(
                "/context", json={"query": "how do we deploy with blue-green", "limit": 5}).json().get("results", [])),
                60)
        yield proc
    finally:
        proc.stop()


def _wait(check: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


class Recorder:
    def __init__(self) -> None:
        self.urls: list[str] = []
        self.errors: list[str] = []
        self.dialogs: list[str] = []

    def attach(self, context: Any) -> None:
        context.on("request", lambda request: self.urls.append(request.url))
        context.on("console", lambda msg: self.errors.append(msg.text) if msg.type == "error" else None)
        context.on("weberror", lambda err: self.errors.append(str(err.error)))
        context.on("dialog", lambda dialog: (self.dialogs.append(dialog.message), dialog.dismiss()))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run scripts/browser.sh (apt-get install chromium); "
                    "the viewer tests need a real browser")
    with playwright_sync.sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield instance
        instance.close()


@pytest.fixture(scope="module")
def recorder() -> Recorder:
    return Recorder()


def _login_url(daemon: DaemonProcess) -> str:
    out = subprocess.run([sys.executable, "-m", "urchin", "open", "--no-browser"], env=_env(daemon.home),
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def page(browser: Any, daemon: DaemonProcess, recorder: Recorder) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1366, "height": 768})
    recorder.attach(context)
    tab = context.new_page()
    tab.set_default_timeout(10_000)
    url = _login_url(daemon)
    tab.goto(url)
    tab.wait_for_selector("#timeline li.event")
    tab.login_url = url  # type: ignore[attr-defined]
    yield tab
    context.close()


def _api(page: Any, method: str, path: str, body: Any = None, csrf: bool = True) -> dict[str, Any]:
    """A fetch from inside the signed-in page (its cookie), with or without the CSRF header."""
    return page.evaluate("""async ([method, path, body, csrf]) => {
        const session = await (await fetch('/auth/session')).json();
        const headers = {'Content-Type': 'application/json'};
        if (csrf) headers['X-Urchin-CSRF'] = session.csrf;
        const r = await fetch(path, {method, headers, body: body === null ? undefined : JSON.stringify(body)});
        return {status: r.status, body: await r.json()};
    }""", [method, path, body, csrf])


# ---- sign-in --------------------------------------------------------------------------------
def test_login_through_the_one_time_url_and_the_code_works_once(page: Any, browser: Any, daemon: DaemonProcess) -> None:
    assert page.url == daemon.url + "/"  # the code left the address bar
    cookies = page.context.cookies()
    assert len(cookies) == 1 and cookies[0]["httpOnly"] and cookies[0]["sameSite"] == "Strict"
    assert cookies[0]["name"].endswith(str(urlsplit(daemon.url).port))
    assert daemon.token not in page.content()
    other = browser.new_context()
    try:
        again = other.new_page().goto(page.login_url)
        assert again is not None and again.status == 401
        assert other.cookies() == []
    finally:
        other.close()
    assert daemon.token not in daemon.log()


def test_page_headers_forbid_framing_and_inline_script(daemon: DaemonProcess) -> None:
    response = httpx.get(daemon.url + "/", timeout=30)
    csp = response.headers["content-security-policy"]
    assert response.status_code == 200 and "default-src 'self'" in csp and "unsafe-inline" not in csp
    assert response.headers["x-frame-options"] == "DENY"
    assert "<script>" not in response.text and " style=" not in response.text and "onclick" not in response.text
    assert httpx.get(daemon.url + "/timeline", timeout=30).headers["x-frame-options"] == "DENY"
    rebound = httpx.get(daemon.url + "/", headers={"host": "evil.example"},
                        timeout=30)  # DNS rebinding: refused, page too
    assert rebound.status_code == 403 and "<html" not in rebound.text
    for other in ("/static/app.py", "/static/..%2F__init__.py", "/static/index.html%00"):  # only the listed assets
        assert httpx.get(daemon.url + other, timeout=30).status_code == 404, other
    assert httpx.get(daemon.url + "/static/app.js", headers={"origin": "http://evil.example"},
                     timeout=30).status_code == 403


def test_controls_are_labelled_and_reachable_by_keyboard(page: Any) -> None:
    page.goto(page.url.split("#")[0] + "#/search")
    for label in ("Query", "Mode", "Source", "Kind", "Workspace", "Session", "Time range"):
        assert page.locator("#search-form").get_by_label(label, exact=True).count() == 1, label
    page.goto(page.url.split("#")[0] + "#/timeline")
    page.reload()
    page.wait_for_selector("#timeline li.event")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Tab")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.getAttribute('href')") == "#/timeline"


# ---- reading --------------------------------------------------------------------------------
def test_timeline_shows_events_newest_first_grouped_by_day(page: Any) -> None:
    ids = page.eval_on_selector_all("#timeline li.event", "nodes => nodes.map(n => n.dataset.id)")
    assert ids == ["ev-doomed", "ev-secret", "ev-xss", "ev-reply", "ev-plan"]
    days = page.eval_on_selector_all("#timeline li.day h3", "nodes => nodes.map(n => n.textContent)")
    assert days == ["2026-01-11", "2026-01-10"]
    assert page.locator("#timeline .badge").first.text_content() == "manual"


def test_an_xss_payload_renders_as_text(page: Any, recorder: Recorder) -> None:
    card = page.locator('#timeline li.event[data-id="ev-xss"] .content')
    assert card.text_content() == XSS
    assert page.locator("#timeline img").count() == 0
    page.goto(page.url.split("#")[0] + "#/event/ev-xss")
    expect(page.locator("#event-content")).to_have_text(XSS)
    assert page.locator("#event-content").text_content() == XSS and page.locator("main img").count() == 0
    assert recorder.dialogs == []


def test_event_metadata_reads_as_a_key_value_list_of_text(page: Any, recorder: Recorder) -> None:
    """Not a raw JSON dump: one row per (dotted) key, plain lists joined, deeper values compact; every
    key and value is text, so markup in either stays inert."""
    page.goto(page.url.split("#")[0] + "#/event/ev-xss")
    expect(page.locator("#event-meta dt").first).to_be_visible()
    rows = page.evaluate("""() => [...document.querySelectorAll('#event-meta dt')]
        .map((dt) => [dt.textContent, dt.nextElementSibling.textContent])""")
    got = dict(rows)
    assert got["meta.exit_code"] == "2" and got["meta.files"] == "a.py, b.py"
    assert got["meta.nested.deep.rows"] == '[{"n":1}]'
    assert got[f"meta.{XSS}"] == XSS and got["actor.device"]
    assert page.locator("main img").count() == 0 and recorder.dialogs == []


def test_event_view_shows_redaction_marks_citation_and_copies_json(page: Any) -> None:
    page.goto(page.url.split("#")[0] + "#/event/ev-secret")
    page.wait_for_selector("#event-content .redacted")
    assert page.locator("#event-content .redacted").text_content() == SECRET_MARK
    assert "ghp_" not in page.locator("main").text_content()
    assert "urchin://events/ev-secret" in page.locator("#event-fields").text_content()
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.click("#copy-json")
    expect(page.locator("#notice")).to_contain_text("Copied")
    assert '"id": "ev-secret"' in page.evaluate("navigator.clipboard.readText()")


def _search(page: Any, query: str, mode: str) -> None:
    page.goto(page.url.split("#")[0] + "#/search")
    page.fill("#q", query)
    page.select_option("#mode", mode)
    page.keyboard.press("Enter")  # the form submits from the keyboard
    expect(page.locator("#search-status")).to_contain_text("result")


def test_search_literal_highlights_the_match(page: Any) -> None:
    _search(page, "Blue-Green", "literal")
    assert page.eval_on_selector_all("#results li.event", "n => n.map(x => x.dataset.id)") == ["ev-plan"]
    assert page.locator("#results mark").first.text_content() == "blue-green"
    # a result list has no day headings: each card carries its date
    assert page.locator("#results li.event time").first.text_content() == "2026-01-10 09:00:00"


def test_search_semantic_ranks_events(page: Any) -> None:
    _search(page, "load balancer health checks", "semantic")
    ids = page.eval_on_selector_all("#results li.event", "n => n.map(x => x.dataset.id)")
    assert ids and ids[0] == "ev-reply"
    assert page.locator("#results mark").count() > 0


def test_search_hybrid_context_cites_a_file_that_opens_ranged(page: Any) -> None:
    _search(page, "how do we deploy with blue-green", "context")
    link = page.locator("#results a.citation", has_text="docs/ops.md")
    assert "Deploy" in link.first.text_content()  # the heading path
    link.first.click()
    page.wait_for_selector("#file-lines li.hit")
    hits = page.locator("#file-lines li.hit").all_text_contents()
    assert any("blue-green switches" in line for line in hits)
    assert "ops.md" in page.locator("#file-title").text_content()


def test_session_view_reads_as_a_conversation(page: Any) -> None:
    page.goto(page.url.split("#")[0] + "#/session/sess-a")
    page.wait_for_selector("#conversation li.event")
    ids = page.eval_on_selector_all("#conversation li.event", "n => n.map(x => x.dataset.id)")
    assert ids == ["ev-plan", "ev-reply"]
    times = page.eval_on_selector_all("#conversation li.event time", "n => n.map(x => x.textContent)")
    assert times == ["2026-01-10 09:00:00", "2026-01-10 09:01:00"]   # a session may span days


def test_overview_draws_activity_and_roots(page: Any, daemon: DaemonProcess) -> None:
    with daemon.client() as client:  # one event today (the seeded ones are older than the chart's 30 days)
        today = client.post("/ingest", json={"id": "ev-today", "content": "fresh", "source": "gemini"})
        assert today.status_code == 200
    page.goto(page.url.split("#")[0] + "#/overview")
    page.wait_for_selector("#chart svg")
    expect(page.locator("#roots")).to_contain_text("shop")
    expect(page.locator("#index-state")).to_contain_text("behind journal")
    expect(page.locator("#index-state")).to_contain_text("chunks")
    assert page.locator("#chart svg rect").count() == 1
    assert page.locator("#chart svg rect title").text_content().endswith(": gemini 1")
    expect(page.locator("#legend")).to_have_text("gemini")


# ---- control --------------------------------------------------------------------------------
def test_ephemeral_toggle_shows_a_banner(page: Any, daemon: DaemonProcess) -> None:
    page.goto(page.url.split("#")[0] + "#/timeline")
    assert page.locator("#banner").is_hidden()
    page.click("#ephemeral")
    page.wait_for_selector("#banner", state="visible")
    with daemon.client() as client:
        assert client.get("/ephemeral").json()["on"] is True
        assert client.post("/ingest", json={"content": "during ephemeral"}).json()["status"].startswith("suppressed")
    page.click("#ephemeral")
    page.wait_for_selector("#banner", state="hidden")
    with daemon.client() as client:
        assert client.get("/ephemeral").json()["on"] is False


def test_state_changes_need_the_csrf_header(page: Any, recorder: Recorder) -> None:
    errors_before = len(recorder.errors)
    refused = _api(page, "POST", "/ephemeral", {"action": "on"}, csrf=False)
    assert refused["status"] == 403 and refused["body"]["field"] == "csrf"
    assert _api(page, "DELETE", "/events/ev-plan", None, csrf=False)["status"] == 403
    assert _api(page, "GET", "/ephemeral", None, csrf=False)["body"]["on"] is False
    # Chromium logs each refused call as a console error: those two are this test's own doing.
    refusals = recorder.errors[errors_before:]
    assert len(refusals) == 2 and all("403" in e for e in refusals)
    del recorder.errors[errors_before:]


def test_live_updates_take_their_place_and_keep_the_readers_place(page: Any, daemon: DaemonProcess) -> None:
    page.set_viewport_size({"width": 1366, "height": 300})
    try:
        page.goto(page.url.split("#")[0] + "#/timeline")
        anchor = page.locator('#timeline li.event[data-id="ev-plan"]')
        anchor.scroll_into_view_if_needed()
        top = anchor.bounding_box()["y"]
        assert page.evaluate("window.scrollY") > 0
        with daemon.client() as client:
            client.post("/ingest", json={"id": "ev-live", "content": "arrived while reading", "source": "codex",
                                         "timestamp": "2026-01-12T08:00:00Z"})
        page.wait_for_selector('#timeline li.event[data-id="ev-live"]', state="attached", timeout=10_000)
        ids = page.eval_on_selector_all("#timeline li.event", "nodes => nodes.map(n => n.dataset.id)")
        assert ids.index("ev-today") < ids.index("ev-live") < ids.index("ev-doomed")    # in its place by time
        assert abs(anchor.bounding_box()["y"] - top) <= 2  # what the reader was looking at did not move
    finally:
        page.set_viewport_size({"width": 1366, "height": 768})


def _timeline_order(page: Any) -> tuple[list[str], list[str]]:
    ids = page.eval_on_selector_all("#timeline li.event", "nodes => nodes.map(n => n.dataset.id)")
    stamps = page.eval_on_selector_all("#timeline li.event",
                                       "nodes => nodes.map(n => n.dataset.ts + ' ' + n.dataset.id)")
    days = page.eval_on_selector_all("#timeline li.day h3", "nodes => nodes.map(n => n.textContent)")
    assert stamps == sorted(stamps, reverse=True), stamps     # newest first by time, across days
    assert days == sorted(set(days), reverse=True), days      # each day heading once, newest first
    return ids, days


def test_a_backfilled_event_takes_its_place_by_time_live_and_after_a_reload(page: Any, daemon: DaemonProcess) -> None:
    """A collector's backfill (or `urchin import`) appends events older than those shown: a live
    update places each by its time, not on top, and a fresh page pages them in time order too."""
    page.goto(page.url.split("#")[0] + "#/timeline")
    page.wait_for_selector('#timeline li.event[data-id="ev-plan"]')
    with daemon.client() as client:
        assert client.post("/ingest/batch", json={"events": [
            {"id": "ev-back", "content": "backfilled by a collector", "source": "git", "kind": "commit",
             "timestamp": "2026-01-10T09:00:30Z"},
            {"id": "ev-back-day", "content": "an older day, imported late", "source": "git", "kind": "commit",
             "timestamp": "2026-01-09T18:00:00Z"}]}).status_code == 200
    page.wait_for_selector('#timeline li.event[data-id="ev-back"]', state="attached", timeout=10_000)
    page.wait_for_selector('#timeline li.event[data-id="ev-back-day"]', state="attached", timeout=10_000)
    ids, days = _timeline_order(page)
    assert ids.index("ev-reply") < ids.index("ev-back") < ids.index("ev-plan") < ids.index("ev-back-day")
    assert days[-1] == "2026-01-09"
    page.reload()
    page.wait_for_selector('#timeline li.event[data-id="ev-back-day"]', state="attached")
    assert _timeline_order(page)[0] == ids


def test_forget_an_event_and_watch_it_disappear(page: Any, daemon: DaemonProcess) -> None:
    page.goto(page.url.split("#")[0] + "#/timeline")
    page.wait_for_selector('#timeline li.event[data-id="ev-doomed"]')
    page.goto(page.url.split("#")[0] + "#/event/ev-doomed")
    expect(page.locator("#event-title")).to_contain_text("ev-doomed")
    page.click("#forget-event")
    assert "ev-doomed" in page.locator("#confirm-text").text_content()  # the confirmation names what goes
    page.click("#confirm-ok")
    page.wait_for_selector('#timeline li.event[data-id="ev-doomed"]', state="detached")
    assert page.locator("#view-timeline").is_visible()
    with daemon.client() as client:
        assert client.get("/events/ev-doomed").status_code == 404
    page.reload()
    page.wait_for_selector("#timeline li.event")
    assert page.locator('#timeline li.event[data-id="ev-doomed"]').count() == 0


def test_forget_a_session_after_a_confirmation_naming_it(page: Any, daemon: DaemonProcess) -> None:
    page.goto(page.url.split("#")[0] + "#/session/sess-b")
    page.wait_for_selector('#conversation li.event[data-id="ev-xss"]')
    page.click("#forget-session")
    expect(page.locator("#confirm-text")).to_contain_text("sess-b: 1 event?")
    page.click("#confirm-cancel")  # cancelling keeps it
    with daemon.client() as client:
        assert client.get("/events/ev-xss").status_code == 200
    page.click("#forget-session")
    page.click("#confirm-ok")
    expect(page.locator("#notice")).to_contain_text("Forgot session sess-b")
    assert page.locator('#timeline li.event[data-id="ev-xss"]').count() == 0
    with daemon.client() as client:
        assert client.get("/events/ev-xss").status_code == 404


# ---- closed to strangers ----------------------------------------------------------------------
def test_without_login_the_page_shows_no_events_and_the_api_answers_401(browser: Any, daemon: DaemonProcess) -> None:
    context = browser.new_context()
    try:
        stranger = context.new_page()
        stranger.goto(daemon.url + "/")
        stranger.wait_for_selector("#view-signin", state="visible")
        text = stranger.locator("body").text_content()
        assert "blue-green" not in text and stranger.locator("li.event").count() == 0
        status = stranger.evaluate("fetch('/timeline').then(r => r.status)")
        assert status == 401
        forged = stranger.evaluate("fetch('/timeline', {headers: {Cookie: 'urchin_session_1=x'}}).then(r => r.status)")
        assert forged == 401
    finally:
        context.close()
    assert httpx.get(daemon.url + "/timeline", timeout=30).status_code == 401
    assert httpx.get(daemon.url + "/events/ev-plan", timeout=30).status_code == 401
    assert httpx.post(daemon.url + "/auth/code", json={}, timeout=30).status_code == 401


def test_no_request_left_loopback_and_no_console_errors(page: Any, recorder: Recorder, daemon: DaemonProcess) -> None:
    hosts = {urlsplit(url).hostname for url in recorder.urls}
    assert recorder.urls and hosts <= {"127.0.0.1", "localhost", "::1"}, hosts
    assert recorder.errors == []
    assert recorder.dialogs == []


# ---- what the agent was told (after the console check: a forgotten citation is a 404 on purpose) -----
TOLD = [  # no timestamp: now, so the session-start digest counts them among the last weeks' decisions
    {"id": "ev-told-canary", "content": "Decided: ship the shop with canary releases, never on Fridays",
     "source": "claude", "kind": "decision", "workspace": "shop", "session": "sess-prior"},
    {"id": "ev-told-hostile", "content": XSS + " decided to keep the cart in Redis", "source": "claude",
     "kind": "decision", "workspace": "shop", "session": "sess-prior"},
    {"id": "ev-told-gone", "content": "Decided: the coupon service moves to the edge", "source": "claude",
     "kind": "decision", "workspace": "shop", "session": "sess-prior"},
]


def test_the_session_view_shows_what_the_agent_was_told_and_why_as_text(page: Any, daemon: DaemonProcess,
                                                                         recorder: Recorder) -> None:
    forged = {"id": "ev-told-forged", "source": "urchin", "kind": "recall", "workspace": "shop", "session": "sess-told",
              "content": "Urchin recall (prompt): 1 records given to the session",
              "meta": {"mode": "prompt", "cited": [XSS], "reasons": [XSS], "what": ["event"], "scores": [0.5]}}
    with daemon.client() as client:
        assert client.post("/ingest/batch", json={"events": TOLD}).status_code == 200
        told = client.post("/recall", json={"workspace": "shop", "session": "sess-told"}).json()
        malformed = {**forged, "id": "ev-told-malformed", "meta": {"mode": XSS, "cited": XSS, "reasons": 5}}
        assert client.post("/ingest/batch", json={"events": [forged, malformed]}).status_code == 200  # hostile
        assert client.delete("/events/ev-told-gone").status_code == 200
    cited = [(i["id"], i["reason"]) for i in told["items"]]
    assert {"ev-told-canary", "ev-told-hostile", "ev-told-gone"} <= {i for i, _ in cited}, cited
    page.goto(page.url.split("#")[0] + "#/session/sess-told")
    card = page.locator("#conversation li.audit").filter(has_text="(session start)")
    title = re.compile(r"^Told the agent at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d \(session start\)$")
    expect(card.locator(".title")).to_have_text(title)
    rows = card.locator("ol.told > li")
    assert rows.evaluate_all("n => n.map(x => x.dataset.cited)") == [i for i, _ in cited]
    assert [r.removeprefix(" — ") for r in card.locator(".reason").all_text_contents()] == [r for _, r in cited]
    expect(card.locator('li[data-cited="ev-told-gone"] .gone')).to_contain_text("forgotten")
    assert card.locator('li[data-cited="ev-told-gone"] a').count() == 0
    assert XSS not in card.locator('li[data-cited="ev-told-hostile"]').text_content()  # ids and reasons, never text
    hostile = page.locator("#conversation li.audit").filter(has_text="(at a prompt)")
    assert hostile.locator(".reason").text_content() == " — " + XSS
    expect(hostile.locator("ol.told li")).to_contain_text(XSS + " — " + XSS)
    malformed_card = page.locator('#conversation li.audit[data-id="ev-told-malformed"]')
    expect(malformed_card.locator("ol.told")).to_have_text("no records listed")
    expect(malformed_card.locator(".title")).to_contain_text(f"(mode {XSS})")
    assert [e for e in recorder.errors if "Failed to load resource" not in e] == []   # only the forgotten ids' 404s
    assert page.locator("main img").count() == 0 and recorder.dialogs == []
    card.locator('li[data-cited="ev-told-canary"] a').click()
    expect(page.locator("#event-content")).to_have_text(TOLD[0]["content"])
