"""A small stand-in for Ollama's HTTP API (`/api/embed`, `/api/tags`) in a stdlib server thread.

Follows the documented shapes (github.com/ollama/ollama docs/api.md): `{"model", "input"}` ->
`{"model", "embeddings": [[...]]}`, unknown model -> 404 `{"error": ...}`. Scriptable failures.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

__all__ = ["FakeOllama", "fake_ollama"]

DIM = 8


def vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [(b - 128) / 128 for b in digest[:DIM]]


@dataclass
class FakeOllama:
    url: str = ""
    models: tuple[str, ...] = ("all-minilm:latest",)
    fail_next: int = 0          # answer this many embed requests with 500 first
    delay: float = 0.0          # seconds to sleep before answering an embed request
    tags: bool = True           # serve /api/tags (False: a server speaking neither API)
    requests: list[tuple[str, str, object]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def embed_calls(self) -> list[object]:
        return [body for method, path, body in self.requests if path == "/api/embed"]


def _handler(state: FakeOllama) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def _send(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            with state.lock:
                state.requests.append(("GET", self.path, None))
            if self.path == "/api/tags" and state.tags:
                self._send(200, {"models": [
                    {"name": m, "model": m, "modified_at": "2024-06-04T14:38:31Z", "size": 45960996,
                     "digest": "1b226e2802db", "details": {"format": "gguf", "family": "bert"}}
                    for m in state.models]})
            else:
                self._send(404, {"error": "404 page not found"} if state.tags else "nope")

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            with state.lock:
                state.requests.append(("POST", self.path, body))
                fail = state.fail_next > 0
                state.fail_next -= int(fail)
            if self.path != "/api/embed":
                return self._send(404, {"error": "404 page not found"})
            if state.delay:
                time.sleep(state.delay)
            if fail:
                return self._send(500, {"error": "llama runner process has terminated"})
            model = body.get("model", "")
            if model not in state.models and f"{model}:latest" not in state.models:
                return self._send(404, {"error": f'model "{model}" not found, try pulling it first'})
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            self._send(200, {"model": model, "embeddings": [vector(t) for t in texts],
                             "total_duration": 14143917, "load_duration": 1019500,
                             "prompt_eval_count": len(texts)})

    return Handler


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gave up (timeout test) breaks the pipe; that is the point


@contextmanager
def fake_ollama(port: int = 0, **options: object) -> Iterator[FakeOllama]:
    state = FakeOllama(**options)  # type: ignore[arg-type]
    server = _Server(("127.0.0.1", port), _handler(state))
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
