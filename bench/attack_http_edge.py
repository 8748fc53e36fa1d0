"""Hostile local clients against a real daemon: what they hold, and whether `/health` and `POST /ingest`
are still answered while they hold it (daemon/edge.py's rule).

    python bench/attack_http_edge.py [--repo CHECKOUT] [--nofile 1024] [--hold 12] [--body-hold 35]

Starts `python -m urchin serve --port 0 --no-index --no-collect --no-mcp` from `--repo` (default: this
checkout; give the base's checkout for an A/B) with its descriptor limit set to `--nofile` (1,024 is what
most systems give a process), then, one after another: `--idle` connections that send nothing; slowloris
heads (a header line a second); slow bodies (a byte a second); one 10 MB header; 20,000 pipelined GETs in
one send. For each: how many of the hostile connections the daemon still holds after `--hold` seconds,
what answered, the daemon's RSS growth, and `/health` and `POST /ingest` answered meanwhile (share, p50).
"""

from __future__ import annotations

import argparse
import os
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parent.parent


def start(repo: Path, home: Path, nofile: int) -> tuple[subprocess.Popen[bytes], int, str]:
    env = {**os.environ, "PYTHONPATH": str(repo), "URCHIN_HOME": str(home)}
    env.pop("URCHIN_NO_DAEMON", None)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    proc = subprocess.Popen([sys.executable, "-m", "urchin", "serve", "--port", "0", "--log-level", "error",
                             "--no-index", "--no-collect", "--no-mcp"], env=env, cwd=repo, preexec_fn=limit)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            info = orjson.loads((home / "daemon.json").read_bytes())
            if info["pid"] == proc.pid:
                return proc, int(info["address"].rsplit(":", 1)[1]), (home / "token").read_text().strip()
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("daemon did not start")


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def exchange(port: int, request: bytes, timeout: float = 5.0) -> int:
    """The status of one request on a new connection; 0 when none came within `timeout`."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
            sock.sendall(request)
            data = b""
            while b"\r\n" not in data:
                chunk = sock.recv(4096)
                if not chunk:
                    return 0
                data += chunk
            return int(data.split()[1])
    except OSError:
        return 0


class Probe(threading.Thread):
    """`/health` and `POST /ingest`, alternately, every 0.2 s while an attack runs."""

    def __init__(self, port: int, token: str) -> None:
        super().__init__(daemon=True)
        self.port, self.stop = port, threading.Event()
        event = orjson.dumps({"content": "probe during the attack", "source": "test"})
        self.requests = [b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                         (f"POST /ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                          f"Content-Type: application/json\r\nContent-Length: {len(event)}\r\n\r\n").encode() + event]
        self.results: list[tuple[bool, float]] = []

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            started = time.perf_counter()
            ok = exchange(self.port, self.requests[i % 2]) == 200
            self.results.append((ok, time.perf_counter() - started))
            i += 1
            self.stop.wait(0.2)

    def summary(self) -> str:
        if not self.results:
            return "no probe"
        ok = [s for good, s in self.results if good]
        p50 = f"{statistics.median(ok) * 1000:.1f} ms" if ok else "-"
        return f"{len(ok)}/{len(self.results)} answered, p50 {p50}"


def statuses(socks: list[socket.socket]) -> dict[str, int]:
    seen: dict[str, int] = {}
    for sock in socks:
        try:
            sock.setblocking(False)
            data = sock.recv(4096, socket.MSG_PEEK)
            key = data.split()[1].decode() if data else "closed"
        except BlockingIOError:
            key = "open"
        except (OSError, IndexError):
            key = "reset"
        seen[key] = seen.get(key, 0) + 1
    return seen


def attack(name: str, proc: subprocess.Popen[bytes], port: int, token: str, hold: float, count: int,
           opening: bytes, trickle: bytes | None) -> None:
    probe = Probe(port, token)
    rss = rss_kib(proc.pid)
    socks: list[socket.socket] = []
    refused = 0
    probe.start()
    for _ in range(count):
        try:
            sock = socket.create_connection(("127.0.0.1", port), timeout=2)
            if opening:
                sock.sendall(opening)
            socks.append(sock)
        except OSError:
            refused += 1
    started = time.monotonic()
    while time.monotonic() - started < hold:
        if trickle:
            for sock in socks:
                try:
                    sock.send(trickle)
                except OSError:
                    pass
        time.sleep(1.0)
    probe.stop.set()
    probe.join()
    seen = statuses(socks)
    print(f"{name:12} {count} opened ({refused} failed); after {hold:g} s held {seen.get('open', 0)}, "
          f"{seen}; RSS +{(rss_kib(proc.pid) - rss) / 1024:.1f} MiB; probes: {probe.summary()}", flush=True)
    for sock in socks:
        sock.close()


def big_head(proc: subprocess.Popen[bytes], port: int) -> None:
    rss = rss_kib(proc.pid)
    sent, answer = 0, b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        try:
            sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
            for _ in range(160):                # 10 MiB
                sent += sock.send(b"a" * 65536)
            sock.sendall(b"\r\n\r\n")
            answer = sock.recv(4096)
        except OSError as exc:
            answer = answer or type(exc).__name__.encode()
    grown = (rss_kib(proc.pid) - rss) / 1024
    print(f"10MiB head   {sent >> 10} KiB taken; answer {answer[:12]!r}; RSS +{grown:.1f} MiB", flush=True)


def pipelined(proc: subprocess.Popen[bytes], port: int) -> None:
    rss = rss_kib(proc.pid)
    answers = 0
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" * 20000)
        peak = rss_kib(proc.pid)
        try:
            while chunk := sock.recv(1 << 20):
                answers += chunk.count(b"HTTP/1.1 200")
                peak = max(peak, rss_kib(proc.pid))
        except OSError:
            pass
    grown = (peak - rss) / 1024
    print(f"pipelined    20000 sent in one write; {answers} answered; RSS peak +{grown:.1f} MiB", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repo", type=Path, default=REPO)
    parser.add_argument("--nofile", type=int, default=1024)
    parser.add_argument("--idle", type=int, default=1200)
    parser.add_argument("--slow", type=int, default=300)
    parser.add_argument("--hold", type=float, default=12.0)
    parser.add_argument("--body-hold", type=float, default=35.0, help="slow bodies: past the 30 s body bound")
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    with tempfile.TemporaryDirectory(prefix="urchin-attack-") as tmp:
        proc, port, token = start(args.repo.resolve(), Path(tmp) / "home", args.nofile)
        try:
            print(f"daemon from {args.repo} (pid {proc.pid}), RLIMIT_NOFILE {args.nofile}", flush=True)
            body_head = (f"POST /ingest HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
                         "Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{").encode()
            attack("idle", proc, port, token, args.hold, args.idle, b"", None)
            attack("slowloris", proc, port, token, args.hold, args.slow, b"GET /health HTTP/1.1\r\n", b"X: y\r\n")
            attack("slow body", proc, port, token, args.body_hold, args.slow, body_head, b"a")
            big_head(proc, port)
            pipelined(proc, port)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)


if __name__ == "__main__":
    main()
