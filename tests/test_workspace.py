"""Workspace files: ignore rules, chunk anchors, ranged reads, path safety, curated memories."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from urchin.errors import NotFoundError, QueryError, ValidationError
from urchin.facade import Memory
from urchin.workspace.chunking import chunk_code, chunk_markdown
from urchin.workspace.curated import Member
from urchin.workspace.roots import walk_files

GUIDE = """Intro before any heading.

# Deploy
Run the deploy script.

```sh
# this is a comment in a fence, not a heading
./deploy.sh
```

## Rollback
Revert the release tag.

### Database
Restore the snapshot.

# Testing
make test
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "docs").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "build").mkdir()
    (root / "docs" / "guide.md").write_text(GUIDE)
    (root / "src" / "app.py").write_text("\n".join(f"def f{i}():\n    return {i}\n" for i in range(300)))
    (root / "src" / "secret.env").write_text("TOKEN=x\n")
    (root / "build" / "out.txt").write_text("generated\n")
    (root / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\0\0\0binary")
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / ".urchinignore").write_text("src/*.env\n")
    (root / "debug.log").write_text("noise\n")
    (root / "big.txt").write_text("line\n" * 300_000)
    (tmp_path / "outside.txt").write_text("do not read me\n")
    os.symlink(tmp_path / "outside.txt", root / "escape.txt")
    return root


def test_walk_honours_gitignore_and_urchinignore_and_skips_escaping_symlinks(project: Path) -> None:
    from urchin.workspace.roots import Root

    names = sorted(f.rel for f in walk_files(Root("proj", project)))
    assert names == [".gitignore", ".urchinignore", "big.txt", "docs/guide.md", "logo.png", "src/app.py"]


def test_markdown_chunks_carry_heading_paths_and_exact_line_anchors() -> None:
    chunks = chunk_markdown(GUIDE)
    got = [(c.heading_path, c.start_line, c.end_line) for c in chunks]
    assert got == [((), 1, 1), (("Deploy",), 3, 9), (("Deploy", "Rollback"), 11, 12),
                   (("Deploy", "Rollback", "Database"), 14, 15), (("Testing",), 17, 18)]
    lines = GUIDE.splitlines()
    for chunk in chunks:
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
    assert chunks[2].retrieval_text("docs/guide.md").startswith("docs/guide.md › Deploy › Rollback\n## Rollback")


def test_code_chunks_split_at_definitions_near_the_target_size() -> None:
    text = "\n".join(f"def f{i}():\n    return {i}\n" for i in range(300))
    chunks = chunk_code(text, target=400, maximum=1000)
    assert len(chunks) > 5
    lines = text.splitlines()
    for chunk in chunks:
        assert chunk.text.startswith("def ")
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
        assert len(chunk.text) <= 1000


def test_ranged_reads(memory: Memory, project: Path) -> None:
    memory.workspace_add(str(project))
    window = memory.get_file("docs/guide.md", from_line=3, max_lines=2)
    assert (window.path, window.from_line, window.to_line, window.total_lines) == ("proj/docs/guide.md", 3, 4, 18)
    assert window.lines == ["# Deploy", "Run the deploy script."]
    assert memory.get_file("proj/docs/guide.md", from_line=18).lines == ["make test"]
    with pytest.raises(QueryError, match="fromLine: 'proj/docs/guide.md' has 18 lines: fromLine 50 is past its end"):
        memory.get_file("docs/guide.md", from_line=50)
    with pytest.raises(QueryError, match="maxLines: must be from 1 to 2000"):
        memory.get_file("docs/guide.md", max_lines=5000)
    with pytest.raises(QueryError, match="fromLine: must be from 1 to 2147483648, got 0"):
        memory.get_file("docs/guide.md", from_line=0)
    with pytest.raises(ValidationError, match="binary"):
        memory.get_file("logo.png")
    with pytest.raises(NotFoundError):
        memory.get_file("docs/missing.md")


@pytest.mark.parametrize("path", ["../../etc/passwd", "/etc/passwd", "proj/../../outside.txt", "escape.txt",
                                  "docs/../../outside.txt"])
def test_paths_outside_the_roots_are_refused(memory: Memory, project: Path, path: str) -> None:
    memory.workspace_add(str(project))
    with pytest.raises(ValidationError, match="outside the workspace roots|relative to a workspace root"):
        memory.get_file(path)


def test_two_roots_need_a_prefix_when_both_hold_the_path(memory: Memory, project: Path, tmp_path: Path) -> None:
    other = tmp_path / "other" / "docs"
    other.mkdir(parents=True)
    (other / "guide.md").write_text("# Other guide\n")
    memory.workspace_add(str(project))
    memory.workspace_add(str(other.parent))
    with pytest.raises(ValidationError, match="several roots"):
        memory.get_file("docs/guide.md")
    assert memory.get_file("other/docs/guide.md").lines == ["# Other guide"]


def test_memories_with_files_folders_queries_and_a_missing_member(memory: Memory, project: Path) -> None:
    memory.workspace_add(str(project))
    memory.ingest_one({"content": "release 1.2 tagged after the checklist", "source": "claude"})
    created = memory.memory_create("release-checklist", "cutting a release", [
        Member("file", path="docs/guide.md"), Member("folder", path="src"), Member("query", query="release 1.2"),
        Member("file", path="docs/gone.md")])
    assert created.path is not None and created.path.stat().st_mode & 0o777 == 0o600
    assert [m.summary() for m in memory.memory_list()] == [
        {"slug": "release-checklist", "title": "Release checklist", "useWhen": "cutting a release", "members": 4}]
    got = memory.memory_get("release-checklist")
    assert [p["member"] for p in got["members"]] == ["proj/docs/guide.md", "proj/src/app.py",
                                                      "query:release 1.2"]
    assert got["members"][0]["content"] == GUIDE
    assert "release 1.2 tagged" in got["members"][2]["content"]
    assert got["coverage"] == [{"member": "docs/gone.md", "status": "unreadable",
                                "reason": "no file 'docs/gone.md' in the workspace roots"}]
    small = memory.memory_get("release-checklist", token_budget=20)
    assert small["truncated"] and small["tokensUsed"] <= 20


def test_memory_validation(memory: Memory) -> None:
    with pytest.raises(ValidationError, match="slug"):
        memory.memory_create("Bad Slug", "x", [Member("query", query="q")])
    with pytest.raises(ValidationError, match="useWhen"):
        memory.memory_create("ok", " ", [Member("query", query="q")])
    with pytest.raises(ValidationError, match="members"):
        memory.memory_create("ok", "when", [])
    with pytest.raises(NotFoundError):
        memory.memory_get("nothing-here")


def test_overview_shows_index_state_sources_and_memories(project: Path, pg_settings) -> None:  # type: ignore[no-untyped-def]
    memory = Memory(pg_settings)
    memory.workspace_add(str(project))
    try:
        before = memory.overview()
        assert before["index"]["roots"]["proj"] == {"indexed": 0, "cataloged": 0, "failed": 0, "pending": 5}
        memory.index_files()
        after = memory.overview()
        state = after["index"]["roots"]["proj"]
        assert state["pending"] == 0 and state["cataloged"] == 1 and state["indexed"] >= 3  # big.txt is over the cap
        assert {s["name"] for s in after["sources"]} >= {"claude", "codex", "shell", "git"}
        assert after["roots"][0]["files"] == 6
    finally:
        memory.close()


def test_overview_says_when_the_index_is_unavailable(memory: Memory, project: Path, tmp_path: Path) -> None:
    from urchin.config import Settings

    broken = Memory(Settings.resolve(memory.settings.home, database_url="postgresql://127.0.0.1:9/none"))
    broken.workspace_add(str(project))
    info = broken.overview()
    assert info["index"]["available"] is False and info["index"]["reason"]
    assert info["roots"][0]["name"] == "proj"


def test_memory_edit_and_delete_through_the_cli(memory: Memory, project: Path) -> None:
    from tests.cli_inprocess import call_urchin
    from tests.conftest import run_urchin

    memory.workspace_add(str(project), "proj")
    # create in a real process; edit and delete in this one (call_urchin: the same entry point)
    assert run_urchin("memory", "create", "notes", "--use-when", "reading notes", "--query", "alpha").returncode == 0
    edited = call_urchin("memory", "edit", "notes", "--title", "Release notes", "--file", "proj/README.md")
    assert edited.returncode == 0, edited.stderr
    definition = memory.memory_list()[0]
    assert (definition.title, definition.use_when) == ("Release notes", "reading notes")   # the rest stays
    assert [m.type for m in definition.members] == ["file"]
    assert call_urchin("memory", "edit", "notes").returncode == 2                 # nothing to change: usage
    outside = call_urchin("memory", "edit", "notes", "--file", "/etc/passwd")
    assert outside.returncode == 1 and "members[0].path" in outside.stderr
    assert memory.memory_list()[0].members == definition.members                 # a refused edit changes nothing
    deleted = call_urchin("memory", "delete", "notes")
    assert deleted.returncode == 0 and deleted.stdout.strip() == "deleted notes"
    assert memory.memory_list() == []
    missing = call_urchin("memory", "delete", "notes")
    assert missing.returncode == 1 and "no memory named 'notes'" in missing.stderr


def _repo(root: Path, exclude: str) -> Path:
    (root / ".git" / "info").mkdir(parents=True)
    (root / ".git" / "info" / "exclude").write_text("# git ls-files --others --exclude-from=.git/info/exclude\n"
                                                    + exclude)
    return root


def test_git_info_exclude_is_honoured_by_every_reader(memory: Memory, tmp_path: Path) -> None:
    """As git does: a repository's `info/exclude` hides files like `.gitignore` (patterns relative to
    the repository's top, overridden by `.gitignore` below), for a root that is the top, a worktree
    (`.git` a file naming a git folder whose `commondir` holds `info/exclude`), a folder inside a
    repository, and a repository nested in a root."""
    from urchin.workspace.roots import Root

    shop = _repo(tmp_path / "shop", "private.md\nscratch/\n/src/local_*.py\n")
    for rel in ("README.md", "private.md", "docs/private.md", "scratch/notes.md", "src/app.py",
                "src/local_hack.py", "docs/kept.md"):
        (shop / rel).parent.mkdir(parents=True, exist_ok=True)
        (shop / rel).write_text(f"# {rel}\n")
    (shop / "docs" / ".gitignore").write_text("!private.md\n")          # a .gitignore below overrides it
    main = _repo(tmp_path / "main", "wip.md\n")
    (main / ".git" / "worktrees" / "wt").mkdir(parents=True)
    (main / ".git" / "worktrees" / "wt" / "commondir").write_text("../..\n")
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {main / '.git' / 'worktrees' / 'wt'}\n")
    for rel in ("wip.md", "done.md"):
        (worktree / rel).write_text(f"# {rel}\n")
    outer = _repo(tmp_path / "outer", "sub/hidden.md\n")
    (outer / "sub" / "inner").mkdir(parents=True)
    for rel in ("sub/hidden.md", "sub/shown.md", "sub/inner/draft.md", "sub/draft.md"):
        (outer / rel).write_text(f"# {rel}\n")
    _repo(outer / "sub" / "inner", "draft.md\n")
    for root in (shop, worktree, outer / "sub"):
        memory.workspace_add(str(root))
    memory.memory_create("all", "always", [Member("folder", path="shop"), Member("folder", path="wt"),
                                           Member("folder", path="sub")])

    walked = {r.name: sorted(f.rel for f in walk_files(r)) for r in memory.workspace_list()}
    assert walked == {"shop": ["README.md", "docs/.gitignore", "docs/kept.md", "docs/private.md", "src/app.py"],
                      "wt": ["done.md"], "sub": ["draft.md", "shown.md"]}
    for path in ("shop/private.md", "shop/scratch/notes.md", "shop/src/local_hack.py", "wt/wip.md",
                 "sub/hidden.md", "sub/inner/draft.md"):
        with pytest.raises(ValidationError, match=r"ignored \(.gitignore, .git/info/exclude"):
            memory.get_file(path)
        with pytest.raises(ValidationError, match="ignored"):
            memory.fetch_source_document("files", path)
    assert memory.get_file("shop/docs/private.md").lines == ["# docs/private.md"]
    got = memory.memory_get("all")
    assert sorted(p["member"] for p in got["members"]) == sorted(
        f"{name}/{rel}" for name, rels in walked.items() for rel in rels)
    from urchin.workspace.overview import root_overview
    overview = {r.name: root_overview(r, memory.files)["files"] for r in memory.workspace_list()}
    assert overview == {name: len(rels) for name, rels in walked.items()}
    assert sorted(f.rel for f in walk_files(Root("plain", shop / "docs"))) == [".gitignore", "kept.md", "private.md"]
