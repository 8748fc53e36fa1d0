"""Issue 12, item 1: nothing outside a workspace root is readable, by any path.

A root holds a symlink to a deeper folder; `..` after it means one place to the kernel and another
to a lexical normaliser. Each escape is tried through the CLI, the HTTP API (also percent-encoded)
and the MCP tools, and must be refused with a clear error and no byte of the target.
"""

from __future__ import annotations

import http.client
import json
import os
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

from tests.cli_inprocess import call_urchin
from tests.conftest import run_urchin
from urchin.errors import ValidationError
from urchin.facade import Memory
from urchin.workspace.curated import Member

OUTSIDE_TEXT = "TOP SECRET OUTSIDE THE ROOT"
DECOY_TEXT = "decoy inside the root"
PASSWD_LINE = next((line for line in Path("/etc/passwd").read_text().splitlines() if line.strip()), "root:x:0:0")


@dataclass(frozen=True)
class Escape:
    root: Path
    paths: list[str]          # `<root>/<path>` forms that escape on the code before issue 12

    def rel(self, path: str) -> str:
        return path.split("/", 1)[1]


@pytest.fixture
def escape(tmp_path: Path) -> Escape:
    """`shop` with `deepN -> a/b/...` (N folders) and `deep2 -> a/b`, decoys where `..` lands physically."""
    root = tmp_path / "shop"
    depth = len(root.resolve().parts)        # enough `..` for the lexical path to reach `/`
    chain = root.joinpath(*[f"d{i}" for i in range(depth)])
    chain.mkdir(parents=True)
    (root / "deepN").symlink_to(chain.relative_to(root))
    (root / "etc").mkdir()
    (root / "etc" / "passwd").write_text(DECOY_TEXT + "\n")
    (root / "d0" / "d1" / "outside").mkdir()
    (root / "deep2").symlink_to("d0/d1")
    (root / "outside").mkdir()
    (root / "outside" / "secret.txt").write_text(DECOY_TEXT + "\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text(OUTSIDE_TEXT + "\n")
    (root / "README.md").write_text("# Shop\nhello\n")
    return Escape(root, [
        "shop/deepN/" + "../" * depth + "etc/passwd",       # lexically /etc/passwd, physically shop/etc/passwd
        "shop/deep2/../../outside/secret.txt",              # lexically ../outside, physically shop/outside
        "shop/deep2/./../../outside/secret.txt",
    ])


def _clean(text: str) -> None:
    assert PASSWD_LINE not in text and OUTSIDE_TEXT not in text and DECOY_TEXT not in text, text


def test_the_escapes_are_real_on_disk(escape: Escape) -> None:
    """The kernel and a lexical normaliser disagree about these paths: the test attacks the right thing."""
    for path in escape.paths[:2]:
        rel = escape.rel(path)
        assert (escape.root / rel).read_text() == DECOY_TEXT + "\n"
        lexical = Path(os.path.normpath(escape.root / rel))
        assert not lexical.is_relative_to(escape.root)


def test_cli_get_file_and_fetch_document_refuse_symlink_dotdot_escapes(escape: Escape) -> None:
    """Each command form once in a real process (the first path), then in this one."""
    assert call_urchin("workspace", "add", str(escape.root)).returncode == 0
    assert "hello" in call_urchin("get-file", "shop/README.md").stdout
    for n, path in enumerate(escape.paths):
        for args in (("get-file", path), ("get-file", escape.rel(path)), ("fetch-document", "files", path),
                     ("fetch-document", "shop", escape.rel(path))):
            done = (call_urchin if n else run_urchin)(*args)
            assert done.returncode == 1, (args, done.stdout, done.stderr)
            assert "contains '..'" in done.stderr and "Traceback" not in done.stderr, done.stderr
            _clean(done.stdout + done.stderr)


def test_memory_api_refuses_every_escape_and_symlinks_out(memory: Memory, escape: Escape, tmp_path: Path) -> None:
    memory.workspace_add(str(escape.root))
    (escape.root / "link.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    (escape.root / "linkdir").symlink_to(tmp_path / "outside")
    for path in [*escape.paths, "shop/link.txt", "link.txt", "shop/linkdir/secret.txt", "shop//etc/../etc/passwd",
                 "/etc/passwd", "shop/\x00/passwd"]:
        with pytest.raises(ValidationError, match="outside the workspace roots|contains '..'|NUL"):
            memory.get_file(path)
        with pytest.raises(ValidationError):
            memory.fetch_source_document("files", path)


def _raw_get(url: str, token: str, path: str) -> tuple[int, str]:
    """GET with the path sent byte for byte (httpx would remove dot segments before sending)."""
    host, port = url.removeprefix("http://").rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", path, headers={"Authorization": f"Bearer {token}"})
        response = conn.getresponse()
        return response.status, response.read().decode("utf-8", "replace")
    finally:
        conn.close()


def _encodings(path: str) -> list[str]:
    return [path, path.replace("..", "%2e%2e"), path.replace("..", "%2E%2E"), path.replace("..", ".%2e"),
            path.replace("../", "..%2f")]


def test_http_files_and_documents_refuse_escapes_also_percent_encoded(escape: Escape, urchin_home: Path) -> None:
    from tests.daemon_fixture import DaemonProcess

    assert call_urchin("workspace", "add", str(escape.root)).returncode == 0
    daemon = DaemonProcess(urchin_home).start()
    try:
        status, body = _raw_get(daemon.url, daemon.token, "/files/shop/README.md")
        assert status == 200 and "hello" in body
        for path in escape.paths:
            for sent in _encodings(path):
                for url in (f"/files/{sent}", f"/sources/files/documents/{sent}",
                            f"/sources/shop/documents/{sent.split('/', 1)[1]}"):
                    status, body = _raw_get(daemon.url, daemon.token, url)
                    assert 400 <= status < 500, (url, status, body)
                    assert "error" in json.loads(body), body
                    _clean(body)
    finally:
        daemon.stop()


def test_mcp_get_file_and_fetch_source_document_refuse_escapes(escape: Escape) -> None:
    from tests.mcp_harness import stdio_session

    assert call_urchin("workspace", "add", str(escape.root)).returncode == 0

    async def main() -> None:
        async with stdio_session() as session:
            ok = await session.call_tool("get_file", {"path": "shop/README.md"})
            assert not ok.is_error and "hello" in ok.content[0].text  # type: ignore[union-attr]
            for path in escape.paths:
                for tool, args in (("get_file", {"path": path}),
                                   ("fetch_source_document", {"source": "files", "id": path}),
                                   ("fetch_source_document", {"source": "shop", "id": escape.rel(path)})):
                    result = await session.call_tool(tool, args)
                    text = " ".join(getattr(c, "text", "") for c in result.content)
                    assert result.is_error, (tool, args, text)
                    assert "contains '..'" in text
                    _clean(text + json.dumps(result.structured_content))

    anyio.run(main)


def test_memory_members_outside_the_roots_are_refused_at_create_time(escape: Escape, urchin_home: Path,
                                                                     tmp_path: Path) -> None:
    assert call_urchin("workspace", "add", str(escape.root)).returncode == 0
    (escape.root / "link.txt").symlink_to(tmp_path / "outside" / "secret.txt")
    for flag, path in (("--file", "../../etc/passwd"), ("--file", escape.paths[0]), ("--folder", "shop/deep2/../.."),
                       ("--file", "/etc/passwd"), ("--file", "shop/link.txt"), ("--folder", "../outside")):
        run = run_urchin if path == "../../etc/passwd" else call_urchin    # one real process, the rest here
        done = run("memory", "create", "escape", "--use-when", "never", "--file", "shop/README.md", flag, path)
        assert done.returncode == 1, (path, done.stdout, done.stderr)
        assert "members[1].path" in done.stderr and "Traceback" not in done.stderr, done.stderr
        assert not (urchin_home / "memories" / "escape.toml").exists()
    kept = call_urchin("memory", "create", "fine", "--use-when", "always", "--file", "shop/README.md",
                      "--file", "docs/later.md")                      # may not exist yet: read when shown
    assert kept.returncode == 0, kept.stderr


def test_memory_show_reads_members_through_the_resolver(memory: Memory, escape: Escape, tmp_path: Path) -> None:
    """A member written into the TOML by hand (or before this check) is still refused when read."""
    memory.workspace_add(str(escape.root))
    memory.memory_create("ok", "always", [Member("file", path="shop/README.md")])
    path = memory.settings.home / "memories" / "ok.toml"
    path.write_text(path.read_text() + f'\n[[members]]\ntype = "file"\npath = "{escape.paths[1]}"\n'
                    f'\n[[members]]\ntype = "folder"\npath = "shop/deep2/../.."\n')
    got = memory.memory_get("ok")
    assert [p["member"] for p in got["members"]] == ["shop/README.md"]
    assert [c["status"] for c in got["coverage"]] == ["unreadable", "unreadable"]
    _clean(json.dumps(got))


def test_a_file_swapped_after_the_check_is_not_read(memory: Memory, escape: Escape, tmp_path: Path) -> None:
    """Open exactly what was checked: the same real path, not a symlink, the same inode."""
    memory.workspace_add(str(escape.root))
    files = memory.files
    target = escape.root / "README.md"
    swapped_link = files.locate("shop/README.md")
    target.unlink()
    target.symlink_to(tmp_path / "outside" / "secret.txt")
    with pytest.raises(ValidationError, match="cannot be opened"):
        files.read_text(swapped_link)
    target.unlink()
    target.write_text("# Shop\nhello\n")
    swapped_file = files.locate("shop/README.md")
    replacement = escape.root / "new.md"
    replacement.write_text(OUTSIDE_TEXT)
    os.replace(replacement, target)
    with pytest.raises(ValidationError, match="changed while it was opened"):
        files.read_text(swapped_file)


def test_redaction_of_file_text_keeps_every_line_break() -> None:
    from tests.test_privacy import CORPUS
    from urchin.redact import Redactor
    from urchin.workspace.access import redact_file_text

    sha, uuid = "3f786850e387550fdab836ed7e6dc881de23001b", "123e4567-e89b-12d3-a456-426614174000"
    text = "\r\n".join(t for t, _, _ in CORPUS) + f"\x0bcommit {sha}\u2028id {uuid}\n"
    redacted = redact_file_text(Redactor(), text)
    assert redacted.splitlines() != text.splitlines()
    assert len(redacted.splitlines()) == len(text.splitlines())
    assert redacted.count("\n") == text.count("\n") and redacted.count("\r") == text.count("\r")
    assert sha in redacted and uuid in redacted
    assert not [kind for _, secret, kind in CORPUS if secret in redacted]


@pytest.mark.parametrize(("rel", "rule"), [
    (".env", ".env"), ("app/.env.local", ".env.*"), ("PROD.ENV", "*.env"), ("certs/site.pem", "*.pem"),
    ("id_rsa", "id_rsa*"), ("home/.ssh/known_hosts", ".ssh/"), ("aws/credentials", "credentials"),
    (".netrc", ".netrc"), ("pw.kdbx", "*.kdbx"), (".env.example", None), ("src/env.py", None),
    ("docs/keys.md", None), ("credentials.py", None)])
def test_secret_store_names(rel: str, rule: str | None) -> None:
    from urchin.workspace.policy import secret_rule

    assert secret_rule(rel) == rule


def test_the_walker_and_the_reader_agree_on_secret_folders(memory: Memory, tmp_path: Path) -> None:
    from urchin.workspace.roots import walk_files

    root = tmp_path / "app"
    (root / "credentials").mkdir(parents=True)
    (root / "credentials" / "loader.py").write_text("def load(): ...\n")
    (root / ".ssh").mkdir()
    (root / ".ssh" / "config").write_text("Host db\n  IdentityFile ~/.ssh/id_ed25519\n")
    memory.workspace_add(str(root))
    assert [f.rel for f in walk_files(memory.workspace_list()[0])] == ["credentials/loader.py"]
    assert memory.get_file("app/credentials/loader.py").lines == ["def load(): ..."]
    with pytest.raises(ValidationError, match=r"secret store \(\.ssh/\)"):
        memory.get_file("app/.ssh/config")


def test_a_private_key_across_a_read_block_boundary_is_redacted_whole(memory: Memory, tmp_path: Path) -> None:
    from tests.test_privacy import CORPUS

    pem_text, secret, _ = next(case for case in CORPUS if case[2] == "private_key" and "EC PRIVATE" in case[0])
    root = tmp_path / "big"
    root.mkdir()
    lines = [f"filler {i}" for i in range(2040)] + pem_text.splitlines() + ["tail line"]
    (root / "dump.txt").write_text("\n".join(lines * 3) + "\n")
    memory.workspace_add(str(root))
    window = memory.get_file("big/dump.txt", max_lines=2000, from_line=2001)
    body = "\n".join(window.lines)
    assert window.total_lines == 3 * len(lines)
    assert not [line for line in secret.splitlines() if len(line) >= 16 and line in body]
    assert "[REDACTED:private_key]" in body and window.lines[len(lines) - 2001] == "tail line"
    whole = memory.fetch_source_document("big", "dump.txt")["content"]
    assert whole.count("[REDACTED:private_key]") == 3 and whole.splitlines()[len(lines) - 1] == "tail line"
