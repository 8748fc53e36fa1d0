"""Screenshots of the viewer's main views at laptop (1366x768) and phone (390x844) widths into docs/.

Starts a real daemon on a throw-away home with a few days of demo events, signs a headless
Chromium in through `urchin open --no-browser`, and saves docs/viewer-<view>-<width>.png.

    python scripts/screenshots.py [--chromium /usr/bin/chromium]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import orjson
from playwright.sync_api import expect, sync_playwright

REPO = Path(__file__).resolve().parent.parent
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]
SIZES = {"laptop": (1366, 768), "phone": (390, 844)}
LINES = [
    ("claude", "decision", "shop", "Use blue-green deploys behind the load balancer; rollback is one flip."),
    ("claude", "conversation", "shop", "The checkout test flakes because the fixture reuses a port."),
    ("copilot", "tool_use", "shop", "pytest -q tests/test_checkout.py  →  14 passed in 2.31s"),
    ("shell", "command", "shop", "git rebase -i origin/main"),
    ("git", "commit", "shop", "Fix: checkout fixture picks a free port (closes #212)"),
    ("gemini", "conversation", "infra", "Postgres 18 needs pgvector 0.8 for halfvec HNSW indexes."),
    ("codex", "agent", "infra", "Renamed settings.port to settings.http_port across 9 files."),
    ("manual", "note", "infra", "Token for the staging registry rotated: [REDACTED:github_token]"),
    ("shell", "error", "infra", "psql: error: connection refused (is the server running on 5432?)"),
]


def demo_events() -> list[dict[str, object]]:
    now = datetime.now(UTC).replace(microsecond=0)
    out = []
    for day in range(14):
        for k, (source, kind, workspace, text) in enumerate(LINES):
            if (day + k) % 3 == 0 and day % 4 != 1:
                continue
            at = now - timedelta(days=day, minutes=7 * k)
            out.append({"id": f"demo-{day:02d}-{k}", "timestamp": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                        "source": source, "kind": kind, "workspace": workspace, "content": text,
                        "session": f"{workspace}-day{day}", "tags": [workspace] if k % 2 else []})
    out.sort(key=lambda e: str(e["timestamp"]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--out", type=Path, default=REPO / "docs")
    args = parser.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="urchin-shots-"))
    env = {**os.environ, "URCHIN_HOME": str(home), "PYTHONPATH": str(REPO), "URCHIN_USER_HOME": str(home / "user")}
    daemon = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--port", "0", "--no-index", "--no-collect"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        address = wait_for_daemon(home)
        token = (home / "token").read_text().strip()
        events = demo_events()
        httpx.post(address + "/ingest/batch", json={"events": events}, headers={"authorization": f"Bearer {token}"},
                   trust_env=False).raise_for_status()
        url = subprocess.run([sys.executable, "-m", "urchin", "open", "--no-browser"], env=env, check=True,
                             capture_output=True, text=True).stdout.strip().splitlines()[-1]
        shoot(args.chromium, url, address, args.out, session=str(events[-1]["session"]))
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(20)
    return 0


def wait_for_daemon(home: Path) -> str:
    for _ in range(600):
        try:
            return str(orjson.loads((home / "daemon.json").read_bytes())["address"])
        except (OSError, ValueError, KeyError):
            time.sleep(0.05)
    raise SystemExit("the daemon did not start")


def shoot(chromium: str, url: str, address: str, out: Path, session: str) -> None:
    out.mkdir(exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=ARGS, headless=True)
        context = browser.new_context()
        page = context.new_page()
        page.goto(url)
        page.wait_for_selector("#timeline li.event")
        for size, (width, height) in SIZES.items():
            page.set_viewport_size({"width": width, "height": height})
            views = {
                "timeline": ("#/timeline", "#timeline li.event"),
                "search": ("#/search", None),
                "event": ("#/event/demo-00-7", "#event-content .redacted"),
                "session": (f"#/session/{session}", "#conversation li.event"),
                "overview": ("#/overview", "#chart svg rect"),
            }
            for name, (hash_, ready) in views.items():
                page.goto(address + "/" + hash_)
                if name == "search":
                    page.fill("#q", "deploy")
                    page.keyboard.press("Enter")
                    expect(page.locator("#search-status")).to_contain_text("result")
                elif ready:
                    page.wait_for_selector(ready)
                page.evaluate("window.scrollTo(0, 0)")
                page.screenshot(path=str(out / f"viewer-{name}-{size}.png"))
                print(out / f"viewer-{name}-{size}.png")
        browser.close()


if __name__ == "__main__":
    raise SystemExit(main())
