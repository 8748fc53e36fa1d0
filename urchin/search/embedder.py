"""Client of a remote embedding server: OpenAI-compatible (`/v1/embeddings`) or Ollama
(`/api/embed`).

One shared httpx client; batches of at most 64 texts, a few requests in flight, retries with
exponential backoff on connection errors and 5xx, and an `EmbedderError` quoting the server on 4xx.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import httpx
import numpy as np

from urchin.config import Settings
from urchin.errors import EmbedderError

__all__ = ["Embedder", "Api", "fingerprint", "configured_embedder"]

Api = Literal["openai", "ollama"]
APIS: tuple[Api, ...] = ("openai", "ollama")
MAX_BATCH = 64


def fingerprint(api: str, model: str, dim: int) -> str:
    """Names a vector space: same api, model and dimension -> same folder, whatever the server URL.

    The URL is left out on purpose: a team moving its server keeps its cache, and servers behind
    a load balancer share one.
    """
    digest = hashlib.sha256(f"{api}\0{model}\0{dim}".encode()).hexdigest()[:16]
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in model)[:40]
    return f"{safe}-{dim}-{digest}"


class Embedder:
    """Embeds texts through one server; thread-safe, construction does no I/O."""

    def __init__(
        self,
        url: str,
        model: str,
        api: Api | None = None,
        *,
        timeout: float = 10.0,
        batch_size: int = MAX_BATCH,
        workers: int = 3,
        retries: int = 2,
        backoff: float = 0.2,
        max_chars: int | None = 8192,
        query_cache_size: int = 256,
        cooldown: float = 10.0,
        client: httpx.Client | None = None,
    ) -> None:
        if not url.strip():
            raise EmbedderError("embedder url: must not be empty")
        if not model.strip():
            raise EmbedderError("embedder model: must not be empty")
        if api is not None and api not in APIS:
            raise EmbedderError(f"embedder api: must be one of {', '.join(APIS)}, got {api!r}")
        if not 1 <= batch_size <= MAX_BATCH:
            raise EmbedderError(f"embedder batch_size: must be 1..{MAX_BATCH}, got {batch_size}")
        root = url.strip().rstrip("/")
        # Accept `http://host:port/v1` as well as the bare server URL, never doubling `/v1`.
        self._root = root[:-3] if root.endswith("/v1") else root
        self.url = url
        self.model = model
        self._api: Api | None = api
        self._checked = False
        self.timeout = timeout
        self.batch_size = batch_size
        self.workers = max(1, workers)
        self.retries = max(0, retries)
        self.backoff = backoff
        # Models read a few hundred tokens at most; sending 64 KiB events only costs bandwidth
        # (and infinity rejects inputs over 122,880 characters).
        self.max_chars = max_chars
        self._client = client or httpx.Client(
            timeout=timeout,
            limits=httpx.Limits(max_connections=self.workers + 1,
                                max_keepalive_connections=self.workers + 1),
        )
        self._owns_client = client is None
        self._pool: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()
        self._dim: int | None = None
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._query_cache_size = query_cache_size
        # After the server proved unreachable, fail at once for `cooldown` seconds: a search that
        # falls back to token-cosine should not pay the retries again on every query.
        self.cooldown = cooldown
        self._down_until = 0.0
        self._down_reason = ""

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> Embedder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what the server is ----------------------------------------------------------------

    @property
    def api(self) -> Api:
        """The API spoken by the server: as configured, else probed once and remembered."""
        if self._api is None:
            with self._lock:
                if self._api is None:
                    self._api = self._probe()
        return self._api

    @property
    def dim(self) -> int:
        """Vector dimension, learned from the first embedding (one tiny request if none yet)."""
        if self._dim is None:
            self.embed(["dimension probe"])
        assert self._dim is not None
        return self._dim

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.api, self.model, self.dim)

    def _probe(self) -> Api:
        """OpenAI (`GET /v1/models`), then Ollama (`GET /api/tags`): two cheap GETs at most."""
        answers: list[str] = []
        for api, path, key in (("openai", "/v1/models", "data"), ("ollama", "/api/tags", "models")):
            response = self._request("GET", path)
            if response.status_code == 200:
                body = _json(response)
                if isinstance(body, dict) and isinstance(body.get(key), list):
                    if api == "openai":
                        self._check_openai_model(body[key])
                    return api  # type: ignore[return-value]
            answers.append(f"{path} -> {response.status_code}")
        raise EmbedderError(
            f"embedder at {self._root} speaks neither the OpenAI nor the Ollama API "
            f"({'; '.join(answers)}); set the API explicitly or check the URL"
        )

    def _check_openai_model(self, models: list[Any]) -> None:
        # Some servers (infinity with one model) answer any model name with their only model:
        # catching a typo here keeps vectors of a model we did not ask for out of the cache.
        self._checked = True
        names = [m.get("id") for m in models if isinstance(m, dict)]
        if names and self.model not in names:
            raise EmbedderError(
                f"embedder model {self.model!r} is not served at {self._root}; "
                f"it serves {', '.join(map(str, names))}"
            )

    def _ensure_checked(self) -> None:
        if self._checked or self.api != "openai":
            return
        response = self._request("GET", "/v1/models")
        body = _json(response) if response.status_code == 200 else None
        if isinstance(body, dict) and isinstance(body.get("data"), list):
            self._check_openai_model(body["data"])
        self._checked = True  # a server without /v1/models is taken at its word

    # -- embedding -------------------------------------------------------------------------

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """float32 matrix, one row per text, in order. Raises EmbedderError on any failure."""
        if isinstance(texts, str):
            raise EmbedderError("embedder input: must be a list of texts, not one string")
        if not texts:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        self._ensure_checked()
        prepared = [self._prepare(t) for t in texts]
        size = self.batch_size
        batches = [prepared[i:i + size] for i in range(0, len(prepared), size)]
        if len(batches) == 1:
            parts = [self._embed_batch(batches[0])]
        else:
            parts = list(self._executor().map(self._embed_batch, batches))
        matrix: np.ndarray = np.vstack(parts)
        with self._lock:
            if self._dim is None:
                self._dim = int(matrix.shape[1])
        if matrix.shape[1] != self._dim:
            raise EmbedderError(
                f"embedder returned {matrix.shape[1]}-dim vectors, expected {self._dim}"
            )
        return matrix

    def embed_query(self, text: str) -> np.ndarray:
        """One vector, remembered in a small LRU: the same search typed twice costs one request."""
        with self._lock:
            hit = self._queries.get(text)
            if hit is not None:
                self._queries.move_to_end(text)
                return hit
        vector: np.ndarray = self.embed([text])[0]
        vector.setflags(write=False)
        with self._lock:
            self._queries[text] = vector
            while len(self._queries) > self._query_cache_size:
                self._queries.popitem(last=False)
        return vector

    def _prepare(self, text: str) -> str:
        if not isinstance(text, str):
            raise EmbedderError(f"embedder input: texts must be strings, got {type(text).__name__}")
        if self.max_chars is not None and len(text) > self.max_chars:
            text = text[: self.max_chars]
        # Blank input is refused by some servers; one space embeds as "nothing" everywhere.
        return text if text.strip() else " "

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="urchin-embed")
            return self._pool

    def _embed_batch(self, texts: list[str]) -> np.ndarray:
        if self.api == "openai":
            payload = {"model": self.model, "input": texts}
            response = self._request("POST", "/v1/embeddings", payload)
            body = self._ok_json(response)
            try:
                rows = sorted(body["data"], key=lambda item: item["index"])
                vectors = [row["embedding"] for row in rows]
            except (KeyError, TypeError) as exc:
                raise EmbedderError(f"embedder answer lacks data[i].embedding: {exc!r}") from None
        else:
            response = self._request("POST", "/api/embed", {"model": self.model, "input": texts})
            body = self._ok_json(response)
            found = body.get("embeddings") if isinstance(body, dict) else None
            if not isinstance(found, list):
                raise EmbedderError("embedder answer lacks embeddings[i]")
            vectors = found
        if len(vectors) != len(texts):
            raise EmbedderError(f"embedder returned {len(vectors)} vectors for {len(texts)} texts")
        try:
            matrix = np.asarray(vectors, dtype=np.float32)
        except (ValueError, TypeError):
            raise EmbedderError("embedder returned ragged or non-numeric vectors") from None
        if matrix.ndim != 2 or matrix.shape[1] == 0:
            raise EmbedderError(f"embedder returned an array of shape {matrix.shape}")
        return matrix

    # -- HTTP ------------------------------------------------------------------------------

    def _request(self, method: str, path: str, payload: Any = None) -> httpx.Response:
        """Retries connection errors and 5xx with exponential backoff; returns any other answer."""
        url = self._root + path
        if time.monotonic() < self._down_until:
            raise EmbedderError(self._down_reason)
        for attempt in range(self.retries + 1):
            try:
                response = self._client.request(method, url, json=payload, timeout=self.timeout)
            except httpx.TimeoutException as exc:
                # A timeout already cost `timeout` seconds: retrying would multiply the wait.
                if isinstance(exc, httpx.ConnectTimeout) and attempt < self.retries:
                    self._sleep(attempt)
                    continue
                raise EmbedderError(
                    f"embedder at {self._root} timed out after {self.timeout:g} s ({method} {path})"
                ) from None
            except httpx.TransportError as exc:
                if attempt < self.retries:
                    self._sleep(attempt)
                    continue
                self._down_reason = f"embedder unreachable at {self._root}: {exc or type(exc).__name__}"
                self._down_until = time.monotonic() + self.cooldown
                raise EmbedderError(self._down_reason) from None
            if response.status_code >= 500 and attempt < self.retries:
                self._sleep(attempt)
                continue
            return response
        raise AssertionError("unreachable")  # pragma: no cover

    def _sleep(self, attempt: int) -> None:
        time.sleep(self.backoff * (2**attempt))

    def _ok_json(self, response: httpx.Response) -> Any:
        if response.status_code >= 400:
            raise EmbedderError(
                f"embedder refused the request ({response.status_code} from {response.request.method}"
                f" {response.request.url.path}): {_server_message(response)}"
            )
        body = _json(response)
        if body is None:
            raise EmbedderError(f"embedder answered non-JSON: {response.text[:200]!r}")
        return body


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _server_message(response: httpx.Response) -> str:
    """The server's own words: OpenAI `error.message`, Ollama `error`, FastAPI `detail`."""
    body = _json(response)
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str) and error:
            return error
        detail = body.get("detail")
        if isinstance(detail, str):
            return detail
        if isinstance(detail, list) and detail:
            return "; ".join(str(d.get("msg", d)) if isinstance(d, dict) else str(d)
                             for d in detail)
        if body.get("message"):
            return str(body["message"])
    text = response.text.strip()
    return text[:300] if text else response.reason_phrase


def configured_embedder(settings: Settings) -> Embedder | None:
    """The one embedder factory: URCHIN_EMBEDDER_URL/MODEL/API (no I/O until it is used), or None when
    either of URL and model is unset (then ranked search is token-cosine)."""
    if not (settings.embedder_url and settings.embedder_model):
        return None
    return Embedder(settings.embedder_url, settings.embedder_model, settings.embedder_api,  # type: ignore[arg-type]
                    timeout=settings.embedder_timeout_s)
