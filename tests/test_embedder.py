"""Embedder client: the OpenAI API against a real infinity server, the Ollama API against a fake."""

from __future__ import annotations

import socket
import time

import httpx
import numpy as np
import pytest

from tests.ollama_fake import DIM, fake_ollama, vector
from urchin.errors import EmbedderError
from urchin.search.embedder import Embedder, fingerprint

MODEL = "all-MiniLM-L6-v2"


def counting_client() -> tuple[httpx.Client, list[str]]:
    calls: list[str] = []
    client = httpx.Client(event_hooks={"request": [lambda r: calls.append(f"{r.method} {r.url.path}")]})
    return client, calls


def cosine(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


# -- OpenAI API, real server -------------------------------------------------------------------

@pytest.mark.slow
def test_openai_server_is_probed_and_gives_384_dim_vectors(embedder_url: str) -> None:
    with Embedder(embedder_url, MODEL) as embedder:
        m = embedder.embed(["the cat sat on the mat", "a cat was sitting on a rug",
                            "quarterly tax filing deadline"])
        assert embedder.api == "openai"
        assert m.shape == (3, 384) and m.dtype == np.float32
        assert embedder.dim == 384
        assert cosine(m[0], m[1]) > cosine(m[0], m[2]) + 0.2


@pytest.mark.slow
def test_more_than_64_texts_go_in_batches_and_keep_their_order(embedder_url: str) -> None:
    client, calls = counting_client()
    texts = [f"note {i}: we decided to use token {i * 7} for the cache" for i in range(150)]
    with Embedder(embedder_url, MODEL, api="openai", client=client) as embedder:
        m = embedder.embed(texts)
        alone = embedder.embed([texts[0], texts[99], texts[149]])
    assert calls.count("POST /v1/embeddings") == 3 + 1  # 64 + 64 + 22, then the check
    assert m.shape == (150, 384)
    np.testing.assert_allclose(m[[0, 99, 149]], alone, atol=1e-4)


@pytest.mark.slow
def test_url_ending_in_v1_is_not_doubled(embedder_url: str) -> None:
    client, calls = counting_client()
    with Embedder(embedder_url + "/v1/", MODEL, client=client) as embedder:
        assert embedder.embed(["hello"]).shape == (1, 384)
    assert "POST /v1/embeddings" in calls and not any("/v1/v1" in c for c in calls)


@pytest.mark.slow
def test_unknown_model_is_refused_naming_what_the_server_serves(embedder_url: str) -> None:
    # infinity with one model answers any model name with it: the client must catch the typo.
    with Embedder(embedder_url, "all-MiniLM-L12-v2", api="openai") as embedder:
        with pytest.raises(EmbedderError, match="'all-MiniLM-L12-v2' is not served.*all-MiniLM-L6-v2"):
            embedder.embed(["hello"])


@pytest.mark.slow
def test_server_4xx_is_reported_with_the_servers_message(embedder_url: str) -> None:
    with Embedder(embedder_url, MODEL, max_chars=None) as embedder:
        with pytest.raises(EmbedderError, match=r"422 .*at most 122880 characters"):
            embedder.embed(["word " * 30000])


@pytest.mark.slow
def test_long_texts_are_cut_before_sending(embedder_url: str) -> None:
    with Embedder(embedder_url, MODEL) as embedder:
        assert embedder.embed(["word " * 30000, "   "]).shape == (2, 384)


@pytest.mark.slow
def test_query_embeddings_are_remembered(embedder_url: str) -> None:
    client, calls = counting_client()
    with Embedder(embedder_url, MODEL, api="openai", client=client) as embedder:
        first = embedder.embed_query("decisions about authentication")
        second = embedder.embed_query("decisions about authentication")
    assert first is second
    assert calls.count("POST /v1/embeddings") == 1


def test_unreachable_server_fails_quickly_with_a_clear_error() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed on exit: nothing listens there
    started = time.monotonic()
    with Embedder(f"http://127.0.0.1:{port}", MODEL) as embedder:
        with pytest.raises(EmbedderError, match=f"unreachable at http://127.0.0.1:{port}"):
            embedder.embed(["hello"])
        assert time.monotonic() - started < 3
        started = time.monotonic()  # known down: the next call fails at once, no retries
        with pytest.raises(EmbedderError, match="unreachable"):
            embedder.embed_query("again")
        assert time.monotonic() - started < 0.05


def test_server_back_after_the_cooldown_is_used_again() -> None:
    with fake_ollama() as server:
        port = server.url.rsplit(":", 1)[1]
    # The fake is gone: the port refuses until a new server takes it (same port, same URL).
    with Embedder(f"http://127.0.0.1:{port}", "all-minilm", api="ollama", retries=0,
                  cooldown=0.2) as embedder:
        with pytest.raises(EmbedderError, match="unreachable"):
            embedder.embed(["x"])
        with fake_ollama(port=int(port)) as server:
            with pytest.raises(EmbedderError, match="unreachable"):
                embedder.embed(["x"])  # still cooling down
            time.sleep(0.25)
            assert embedder.embed(["x"]).shape == (1, DIM)


# -- Ollama API, local fake --------------------------------------------------------------------

def test_ollama_server_is_probed_and_batched() -> None:
    with fake_ollama() as server, Embedder(server.url, "all-minilm") as embedder:
        m = embedder.embed([f"text {i}" for i in range(130)])
        assert embedder.api == "ollama"
        assert m.shape == (130, DIM)
        np.testing.assert_allclose(m[129], vector("text 129"), rtol=1e-6)
        # sent concurrently, so they may arrive in any order
        assert sorted(len(b["input"]) for b in server.embed_calls()) == [2, 64, 64]  # type: ignore[index]


def test_ollama_5xx_is_retried_then_succeeds() -> None:
    with fake_ollama(fail_next=2) as server:
        with Embedder(server.url, "all-minilm", api="ollama", retries=2, backoff=0.01) as embedder:
            assert embedder.embed(["x"]).shape == (1, DIM)
        assert len(server.embed_calls()) == 3


def test_ollama_5xx_that_persists_names_the_servers_message() -> None:
    with fake_ollama(fail_next=10) as server:
        with Embedder(server.url, "all-minilm", api="ollama", retries=1, backoff=0.01) as embedder:
            with pytest.raises(EmbedderError, match="500 .*llama runner process has terminated"):
                embedder.embed(["x"])
        assert len(server.embed_calls()) == 2


def test_ollama_unknown_model_quotes_the_server() -> None:
    with fake_ollama() as server, Embedder(server.url, "nomic-embed-text") as embedder:
        with pytest.raises(EmbedderError, match='404 .*model "nomic-embed-text" not found'):
            embedder.embed(["x"])


def test_slow_server_times_out_without_retrying() -> None:
    with fake_ollama(delay=1.5) as server:
        with Embedder(server.url, "all-minilm", api="ollama", timeout=0.3) as embedder:
            started = time.monotonic()
            with pytest.raises(EmbedderError, match="timed out after 0.3 s"):
                embedder.embed(["x"])
            assert time.monotonic() - started < 1.2
        assert len(server.embed_calls()) == 1


def test_server_speaking_neither_api_is_named() -> None:
    with fake_ollama(tags=False) as server, Embedder(server.url, "m") as embedder:
        with pytest.raises(EmbedderError, match=r"neither the OpenAI nor the Ollama API .*/api/tags -> 404"):
            embedder.embed(["x"])


def test_bad_settings_are_refused_naming_the_field() -> None:
    with pytest.raises(EmbedderError, match="embedder api: must be one of openai, ollama"):
        Embedder("http://127.0.0.1:1", "m", api="cohere")  # type: ignore[arg-type]
    with pytest.raises(EmbedderError, match="embedder url: must not be empty"):
        Embedder(" ", "m")
    with pytest.raises(EmbedderError, match="batch_size: must be 1..64"):
        Embedder("http://127.0.0.1:1", "m", batch_size=65)


def test_fingerprint_names_api_model_and_dim_but_not_the_url() -> None:
    base = fingerprint("openai", MODEL, 384)
    assert base == fingerprint("openai", MODEL, 384)
    assert len({base, fingerprint("ollama", MODEL, 384), fingerprint("openai", "other", 384),
                fingerprint("openai", MODEL, 768)}) == 4
    assert "/" not in fingerprint("openai", "org/model:tag", 8)
