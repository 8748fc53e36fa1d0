"""Issue 12, item 2 (workspace files): no secret in a workspace file reaches PostgreSQL or an answer.

Ordinary files (config.py, notes.md) hold the event-side secrets corpus of tests/test_privacy.py;
secret-store files (.env, keys, credentials) and ignored files are neither indexed nor served unless
the root opts in. PostgreSQL is checked twice: its tables, and the raw bytes of its data directory
(heap files and pg_wal) after a CHECKPOINT. Look-alike git SHAs and UUIDs stay untouched.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.cli_inprocess import call_urchin
from tests.conftest import run_urchin
from tests.test_privacy import CORPUS
from urchin.config import Settings
from urchin.errors import ValidationError
from urchin.facade import Memory

SHA = "3f786850e387550fdab836ed7e6dc881de23001b"
UUID = "123e4567-e89b-12d3-a456-426614174000"
STORES = [".env", ".env.production", "prod.env", "deploy.pem", "server.key", "id_rsa", "id_ed25519.pub",
          "credentials", ".netrc", ".npmrc", ".pypirc", ".pgpass", "vault.kdbx", "client.p12", ".ssh/config"]
PEM_CASE = next(text for text, _, kind in CORPUS if kind == "private_key" and "EC PRIVATE" in text)


def _probes(secret: str) -> list[bytes]:
    """The secret as written, JSON-escaped, and each long line of it (a PEM body line by line)."""
    probes = [secret.encode(), orjson.dumps(secret)[1:-1]]
    probes += [line.encode() for line in secret.splitlines() if len(line) >= 16 and "PRIVATE KEY" not in line]
    return probes


def leaked(*blobs: bytes | str) -> list[str]:
    """Kinds of the corpus secrets found in any blob."""
    data = [b.encode() if isinstance(b, str) else b for b in blobs]
    return sorted({kind for _, secret, kind in CORPUS for probe in _probes(secret) if any(probe in b for b in data)})


def _store_text(name: str) -> str:
    return f"STORE-MARKER {name}\n" + CORPUS[0][0] + "\n"


@pytest.fixture
def vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    (root / "local").mkdir(parents=True)
    (root / ".ssh").mkdir()
    half = len(CORPUS) // 2
    (root / "config.py").write_text(
        f'COMMIT = "{SHA}"\nREQUEST_ID = "{UUID}"\n\n'
        + "\n\n".join(f"# case {i}: deployment token password\n{text}" for i, (text, _, _) in enumerate(CORPUS[:half]))
        + f'\n\nPARENT_COMMIT = "{SHA}"\n')
    notes = ["# Deploy notes", "", "The deploy key, pasted by mistake:", "", PEM_CASE, "",
             "AFTER_THE_KEY marker line", ""]
    notes += [f"## Case {i}\nrotate the token password\n{text}\n" for i, (text, _, _) in enumerate(CORPUS[half:])]
    (root / "notes.md").write_text("\n".join(notes) + f"\nrelease {SHA} request {UUID}\n")
    for name in STORES:
        (root / name).write_text(_store_text(name))
    (root / ".env.example").write_text("API_URL=http://localhost:8000\n")
    (root / ".gitignore").write_text("local/\n*.log\n")
    (root / "local" / "notes.txt").write_text("IGNORED-MARKER local\n" + CORPUS[1][0] + "\n")
    (root / "debug.log").write_text("IGNORED-MARKER log\n")
    return root


def _after_key_line(root: Path) -> int:
    return (root / "notes.md").read_text().splitlines().index("AFTER_THE_KEY marker line") + 1


def _tables(url: str) -> tuple[str, list[str]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        chunks = conn.execute("SELECT path, content, coalesce(title, ''), array_to_string(heading_path, ' ') "
                              "FROM urchin_chunks WHERE doc_type = 'file'").fetchall()
        files = [r[0] for r in conn.execute("SELECT path FROM urchin_files ORDER BY path").fetchall()]
        conn.execute("CHECKPOINT")
        conn.execute("SELECT pg_switch_wal()")
    return "\n".join(" ".join(row) for row in chunks), files


def _data_dir_bytes(data: Path) -> list[bytes]:
    blobs = []
    for path in sorted(data.rglob("*")):
        try:
            if path.is_file():
                blobs.append(path.read_bytes())
        except OSError:
            continue
    return blobs


def test_cli_index_leaves_no_secret_in_postgres_tables_heap_or_wal(vault: Path, own_pg: tuple[str, Path]) -> None:
    url, data = own_pg
    env = {"URCHIN_DATABASE_URL": url, "URCHIN_DEVICE_ID": "test-device"}
    assert run_urchin("workspace", "add", str(vault), env=env).returncode == 0
    indexed = run_urchin("index", env=env)
    assert indexed.returncode == 0, indexed.stderr
    chunks, files = _tables(url)
    disk = _data_dir_bytes(data)
    assert any(b"AFTER_THE_KEY" in blob for blob in disk)                       # the grep can see plain text
    assert leaked(*disk) == []
    assert leaked(chunks) == []
    assert not any(b"STORE-MARKER" in blob or b"IGNORED-MARKER" in blob for blob in disk)
    assert "STORE-MARKER" not in chunks and "IGNORED-MARKER" not in chunks
    assert files == [".env.example", ".gitignore", "config.py", "notes.md"]     # no store, nothing ignored
    assert SHA in chunks and UUID in chunks and "AFTER_THE_KEY" in chunks        # look-alikes kept, text there
    assert "[REDACTED:" in chunks


def test_cli_answers_hold_no_secret_and_keep_line_numbers(vault: Path, pg_url: str) -> None:
    env = {"URCHIN_DATABASE_URL": pg_url, "URCHIN_DEVICE_ID": "test-device"}
    assert call_urchin("workspace", "add", str(vault), env=env).returncode == 0
    assert run_urchin("index", env=env).returncode == 0
    answers = []   # the first command in a real process, the others in this one
    for args in (("context", "deployment token password key secret", "--json", "--limit", "50"),
                 ("context", "rotate the token password", "--json", "--limit", "50", "--workspace", "vault"),
                 ("query-source", "vault", "deployment token password", "--json", "--limit", "50"),
                 ("get-file", "vault/config.py", "--max-lines", "2000"),
                 ("get-file", "notes.md", "--max-lines", "2000", "--json"),
                 ("fetch-document", "vault", "config.py"), ("fetch-document", "files", "vault/notes.md", "--json")):
        done = (call_urchin if answers else run_urchin)(*args, env=env)
        assert done.returncode == 0, (args, done.stderr)
        answers.append(done.stdout)
    assert leaked(*answers) == []
    assert all("[REDACTED:" in answer for answer in answers)
    assert all(SHA in answer for answer in answers[3:]) and all(UUID in answer for answer in answers[3:])
    window = orjson.loads(answers[4])
    numbered = {line["text"]: line["n"] for line in window["lines"]}
    assert numbered["AFTER_THE_KEY marker line"] == _after_key_line(vault)
    assert window["totalLines"] == len((vault / "notes.md").read_text().splitlines())
    _anchors_hold(vault, orjson.loads(answers[2])["results"])


def _anchors_hold(vault: Path, hits: list[dict[str, Any]]) -> None:
    """Each file passage has as many lines as its anchors say, and every unredacted line is the file's."""
    checked = 0
    for hit in hits:
        location = hit["location"]
        if "path" not in location:
            continue
        original = (vault / location["path"].split("/", 1)[1]).read_text().splitlines()
        lines = hit["content"].splitlines()
        assert len(lines) == location["endLine"] - location["startLine"] + 1, hit
        for n, line in enumerate(lines, location["startLine"]):
            if "[REDACTED:" not in line:
                assert original[n - 1] == line, (hit["citation"], n)
        checked += 1
    assert checked


def test_secret_stores_and_ignored_files_are_refused_unless_the_root_opts_in(vault: Path, urchin_home: Path) -> None:
    """Every store name, in-process (the rule); the CLI for one of each kind (its exit code and words)."""
    assert call_urchin("workspace", "add", str(vault)).returncode == 0
    memory = Memory(Settings.resolve(urchin_home))
    for name in STORES:
        for read, arg in ((memory.get_file, (f"vault/{name}",)), (memory.fetch_source_document, ("vault", name))):
            with pytest.raises(ValidationError) as refused:
                read(*arg)
            assert "secret store" in refused.value.message and "--allow-secret-files" in refused.value.message
    for run, args in ((run_urchin, ("get-file", "vault/.env")),
                      (call_urchin, ("fetch-document", "vault", "deploy.pem"))):
        done = run(*args)
        assert done.returncode == 1, (args, done.stdout)
        assert "secret store" in done.stderr and "--allow-secret-files" in done.stderr, done.stderr
        assert "STORE-MARKER" not in done.stdout and leaked(done.stdout) == []
    for name in ("local/notes.txt", "debug.log"):
        done = (call_urchin if name == "debug.log" else run_urchin)("get-file", f"vault/{name}")
        assert done.returncode == 1 and "ignored" in done.stderr and "IGNORED-MARKER" not in done.stdout, done.stderr
    assert "API_URL" in call_urchin("get-file", "vault/.env.example").stdout      # a template holds no secret
    assert call_urchin("workspace", "add", str(vault), "--allow-secret-files").returncode == 0
    assert "allowSecretFiles" in (vault.parent / "urchin-home" / "workspaces.json").read_text()
    memory = Memory(Settings.resolve(urchin_home))
    for name in STORES:
        text = "\n".join(memory.get_file(f"vault/{name}").lines)
        assert "STORE-MARKER" in text and leaked(text) == [] and "[REDACTED:" in text, name   # still redacted
    done = call_urchin("get-file", "vault/server.key")
    assert done.returncode == 0 and "STORE-MARKER" in done.stdout and leaked(done.stdout) == [], done.stderr
    assert call_urchin("get-file", "vault/local/notes.txt").returncode == 1    # ignored stays ignored
    assert call_urchin("workspace", "add", str(vault)).returncode == 0          # withdrawn again
    assert call_urchin("get-file", "vault/.env").returncode == 1


def test_a_symlink_to_a_secret_store_or_an_ignored_file_is_refused(memory: Memory, vault: Path) -> None:
    (vault / "innocent.txt").symlink_to(vault / ".env")
    (vault / "harmless.md").symlink_to(vault / "local" / "notes.txt")
    memory.workspace_add(str(vault))
    with pytest.raises(ValidationError, match="secret store"):
        memory.get_file("vault/innocent.txt")
    with pytest.raises(ValidationError, match="ignored"):
        memory.get_file("vault/harmless.md")
    from urchin.workspace.roots import walk_files

    walked = {f.rel for f in walk_files(memory.workspace_list()[0])}
    assert walked == {".env.example", ".gitignore", "config.py", "notes.md"}


def test_http_answers_hold_no_secret(vault: Path, pg_url: str, urchin_home: Path) -> None:
    from tests.daemon_fixture import DaemonProcess

    env = {"URCHIN_DATABASE_URL": pg_url, "URCHIN_DEVICE_ID": "test-device"}
    assert call_urchin("workspace", "add", str(vault), env=env).returncode == 0
    assert run_urchin("index", env=env).returncode == 0
    daemon = DaemonProcess(urchin_home, env=env).start()
    try:
        with daemon.client() as client:
            bodies = [client.get("/files/vault/config.py", params={"maxLines": 2000}),
                      client.get("/files/vault/notes.md", params={"maxLines": 2000}),
                      client.get("/sources/vault/documents/config.py"),
                      client.get("/sources/files/documents/vault/notes.md"),
                      client.get("/sources/vault/search", params={"query": "deployment token password", "limit": 50}),
                      client.post("/context", json={"query": "rotate the token password", "limit": 50})]
            refused = [client.get("/files/vault/.env"), client.get("/sources/vault/documents/id_rsa"),
                       client.get("/files/vault/local/notes.txt")]
    finally:
        daemon.stop()
    assert [r.status_code for r in bodies] == [200] * 6, [r.text for r in bodies]
    assert leaked(*(r.text for r in bodies)) == []
    assert SHA in bodies[0].text and UUID in bodies[2].text
    assert all(400 <= r.status_code < 500 and "error" in r.json() for r in refused), [r.text for r in refused]
    assert not any("STORE-MARKER" in r.text or "IGNORED-MARKER" in r.text for r in refused)


def test_mcp_answers_hold_no_secret(vault: Path, pg_url: str) -> None:
    import anyio

    from tests.mcp_harness import stdio_session

    env = {"URCHIN_DATABASE_URL": pg_url, "URCHIN_DEVICE_ID": "test-device"}
    assert call_urchin("workspace", "add", str(vault), env=env).returncode == 0
    assert run_urchin("index", env=env).returncode == 0
    texts: list[str] = []

    async def main() -> None:
        async with stdio_session(env) as session:
            for tool, args in (("get_file", {"path": "vault/config.py", "maxLines": 2000}),
                               ("get_file", {"path": "notes.md", "maxLines": 2000}),
                               ("fetch_source_document", {"source": "vault", "id": "config.py"}),
                               ("query_source", {"source": "vault", "query": "deployment token password", "limit": 50}),
                               ("search_context", {"query": "rotate the token password", "limit": 50}),
                               ("get_memory", {"slug": "secrets"})):
                result = await session.call_tool(tool, args)
                text = " ".join(getattr(c, "text", "") for c in result.content)
                assert not result.is_error, (tool, text)
                texts.append(text + json.dumps(result.structured_content))
            refused = await session.call_tool("get_file", {"path": "vault/deploy.pem"})
            assert refused.is_error and "--allow-secret-files" in refused.content[0].text  # type: ignore[union-attr]

    memory = Memory(Settings.resolve(database_url=pg_url))
    from urchin.workspace.curated import Member

    memory.memory_create("secrets", "never", [Member("file", path="vault/config.py"), Member("folder", path="vault")])
    anyio.run(main)
    assert leaked(*texts) == []
    assert SHA in texts[0] and UUID in texts[2] and "STORE-MARKER" not in texts[5]


def test_live_mode_reads_are_redacted(vault: Path, pg_url: str) -> None:
    """A file over the 1 MiB size cap is only cataloged; `mode: live` reads it at query time, redacted."""
    filler = "".join(f"# filler line {i} of a generated table\n" for i in range(32_000))
    (vault / "big_settings.py").write_text(filler + (vault / "config.py").read_text())
    env = {"URCHIN_DATABASE_URL": pg_url, "URCHIN_DEVICE_ID": "test-device"}
    assert call_urchin("workspace", "add", str(vault), env=env).returncode == 0
    indexed = run_urchin("index", env=env)
    assert indexed.returncode == 0 and "1 cataloged" in indexed.stdout, indexed.stdout
    done = run_urchin("context", "deployment token password", "--mode", "live", "--workspace", "vault",
                      "--source", "files", "--limit", "50", "--json", env=env)
    assert done.returncode == 0, done.stderr
    result = orjson.loads(done.stdout)
    assert result["coverage"]["live"]["read"] == ["vault/big_settings.py"]
    live = [hit for hit in result["results"] if hit.get("live")]
    assert live and leaked(done.stdout) == []
    _anchors_hold(vault, live)
