"""Issue 34, item A: no read of a workspace file leaves its root, whatever runs concurrently.

A root holds a real folder `d/` and a symlink `dl` to a folder outside; another process swaps the
two names with `renameat2(RENAME_EXCHANGE)` as fast as it can while the daemon and the in-process
reader (both strategies: `openat2` and the component walk) read `d/shadow` in a loop. No answer
may ever hold the outside bytes. The resolver itself is checked on every kind of symlink, both ways.
"""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from urchin.errors import NotFoundError, UrchinError, ValidationError
from urchin.facade import Memory
from urchin.workspace import beneath
from urchin.workspace.beneath import Dangling, Outside, Tree

OUTSIDE = "OUTSIDE-THE-ROOT heron-8f3a"
INSIDE = "inside the root"
RACE_SECONDS = 2.5

SWAPPER = r"""
import ctypes, os, sys, time
libc = ctypes.CDLL(None, use_errno=True)
a, b, seconds = sys.argv[1].encode(), sys.argv[2].encode(), float(sys.argv[3])
end = time.monotonic() + seconds
while time.monotonic() < end:
    for _ in range(200):
        if libc.renameat2(-100, a, -100, b, 2) != 0:      # AT_FDCWD, RENAME_EXCHANGE
            sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
"""


@pytest.fixture(params=["openat2", "walk"])
def strategy(request: pytest.FixtureRequest) -> Iterator[str]:
    if request.param == "openat2" and not beneath.openat2_available():
        pytest.skip("this kernel has no openat2")
    beneath.use_openat2(request.param == "openat2")
    yield request.param
    beneath.use_openat2(True)


def _race_root(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / "d").mkdir(parents=True)
    (root / "d" / "shadow").write_text(INSIDE + "\n")
    (root / "d" / "inner.txt").write_text("a file only the real folder holds\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "shadow").write_text(OUTSIDE + "\n")
    (outside / "outside-only.txt").write_text(OUTSIDE + "\n")
    (root / "dl").symlink_to(outside)
    return root


def _swapper(root: Path, seconds: float) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", SWAPPER, str(root / "d"), str(root / "dl"), str(seconds)])


def _loop(read: Callable[[], str], seconds: float) -> tuple[int, int, list[str]]:
    """(inside answers, refusals, outside answers) of `read()` called until `seconds` pass."""
    inside = refused = 0
    leaks: list[str] = []
    end = time.monotonic() + seconds
    while time.monotonic() < end and not leaks:
        text = read()
        if OUTSIDE in text:
            leaks.append(text)
        elif INSIDE in text:
            inside += 1
        else:
            refused += 1
    return inside, refused, leaks


def test_a_swap_race_never_reads_outside_the_root_in_process(memory: Memory, tmp_path: Path, strategy: str) -> None:
    root = _race_root(tmp_path)
    memory.workspace_add(str(root))

    def read() -> str:
        try:
            return "\n".join(memory.get_file("shop/d/shadow").lines)
        except UrchinError as exc:
            return str(exc)

    def walk() -> str:
        from urchin.workspace.roots import walk_files
        try:
            return " ".join(f.rel for f in walk_files(memory.workspace_list()[0]))
        except OSError as exc:
            return str(exc)

    swapper = _swapper(root, RACE_SECONDS + 1)
    try:
        time.sleep(0.1)
        inside, refused, leaks = _loop(read, RACE_SECONDS * 0.7)
        listed: list[str] = []
        end = time.monotonic() + RACE_SECONDS * 0.3
        while time.monotonic() < end and not listed:
            names = walk()
            if "outside-only" in names:
                listed.append(names)
    finally:
        swapper.kill()
        swapper.wait()
    assert not leaks, f"{len(leaks)} answers held bytes from outside the root ({strategy})"
    assert not listed, f"the walk listed a file outside the root: {listed[0]}"
    assert inside > 0, (inside, refused)        # the race ran: the real folder was read too


def test_a_swap_race_never_reads_outside_the_root_through_the_daemon(urchin_home: Path, tmp_path: Path) -> None:
    """`GET /files/shop/d/shadow` as in the issue, and a curated memory reading the same file 500
    times (and its folder) per request: each request is hundreds of chances for the race."""
    from tests.daemon_fixture import DaemonProcess
    from urchin.workspace.curated import Member

    root = _race_root(tmp_path)
    local = Memory.open(str(urchin_home))
    local.workspace_add(str(root))
    members = [Member("file", path="shop/d/shadow")] * 500 + [Member("folder", path="shop/d")]
    local.memory_create("race", "always", members)
    daemon = DaemonProcess(urchin_home).start()
    swapper = None
    try:
        with daemon.client() as client:
            assert INSIDE in client.get("/files/shop/d/shadow").text
            swapper = _swapper(root, RACE_SECONDS + 1)
            paths = iter(["/memories/race", "/files/shop/d/shadow"] * 10_000)

            def read() -> str:
                try:
                    return client.get(next(paths)).text
                except httpx.HTTPError as exc:
                    return str(exc)

            inside, refused, leaks = _loop(read, RACE_SECONDS)
    finally:
        if swapper is not None:
            swapper.kill()
            swapper.wait()
        daemon.stop()
    assert not leaks, f"answers held bytes from outside the root: {leaks[0].count(OUTSIDE)} reads in one answer"
    assert inside > 0, (inside, refused)


@pytest.fixture
def tree_root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.txt").write_text("inside\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "f.txt").write_text(OUTSIDE)
    links = {
        "rel": "a/b/f.txt", "dir": "a", "up": "a/b/../../a/b/f.txt",
        "abs_in": str(root / "a" / "b" / "f.txt"), "abs_dir_in": str(root / "a"),
        "abs_out": str(tmp_path / "out" / "f.txt"), "rel_out": "../out/f.txt", "abs_out_dir": str(tmp_path / "out"),
        "via_parent": str(root / ".." / "out" / "f.txt"), "loop": "loop", "dangling": "nothing-here",
    }
    for name, target in links.items():
        (root / name).symlink_to(target)
    (root / "a" / "b" / "back").symlink_to("../../a/b/f.txt")
    (root / "a" / "b" / "high").symlink_to("../../../out/f.txt")
    return root


def _read(tree: Tree, rel: str) -> tuple[str, str]:
    fd, real = tree.open(rel)
    with os.fdopen(fd, "rb") as handle:
        return handle.read().decode(), real


def test_the_resolver_follows_symlinks_only_while_they_stay_inside(tree_root: Path, strategy: str) -> None:
    with Tree.at(tree_root) as tree:
        for rel in ("a/b/f.txt", "rel", "up", "abs_in", "dir/b/f.txt", "abs_dir_in/b/f.txt", "a/b/back"):
            assert _read(tree, rel) == ("inside\n", "a/b/f.txt"), rel
        for rel in ("abs_out", "rel_out", "abs_out_dir/f.txt", "via_parent", "a/b/high", "a/../../out/f.txt"):
            with pytest.raises(Outside):
                tree.open(rel)
        with pytest.raises(OSError) as looped:
            tree.open("loop")
        assert looped.value.errno == errno.ELOOP
        with pytest.raises(Dangling):
            tree.open("dangling")
        for missing in ("a/missing.txt", "dir/missing.txt", "abs_dir_in/b/missing.txt"):
            with pytest.raises(FileNotFoundError) as gone:
                tree.open(missing)
            assert not isinstance(gone.value, Dangling), missing
        with pytest.raises(OSError) as refused:
            tree.open("rel", follow=False)          # `open exactly what was checked`: no symlink at all
        assert refused.value.errno == errno.ELOOP
        assert tree.stat("dir")[1] == "a" and tree.read("rel", 3, follow=True) == b"ins"
    with pytest.raises(OSError):
        Tree.at(tree_root / "dir")                   # a root reached through a symlink is not the root


def test_reads_refuse_every_way_out_and_keep_inside_symlinks(memory: Memory, tree_root: Path, strategy: str) -> None:
    memory.workspace_add(str(tree_root))
    for path in ("root/rel", "root/up", "root/abs_in", "root/dir/b/f.txt", "root/a/b/back"):
        assert memory.get_file(path).lines == ["inside"], path
        assert memory.fetch_source_document("root", path.split("/", 1)[1])["content"] == "inside\n"
    for path in ("root/abs_out", "root/rel_out", "root/abs_out_dir/f.txt", "root/via_parent", "root/a/b/high"):
        with pytest.raises(ValidationError, match="outside the workspace roots"):
            memory.get_file(path)
    with pytest.raises(ValidationError, match="broken or looping"):
        memory.get_file("root/dangling")
    with pytest.raises(NotFoundError):
        memory.get_file("root/dir/missing.md")          # through a symlink that is fine: just not there
    from urchin.workspace.roots import walk_files
    walked = sorted(f.rel for f in walk_files(memory.workspace_list()[0]))
    assert walked == ["a/b/back", "a/b/f.txt", "abs_in", "rel", "up"]


def test_workspace_files_are_opened_only_beneath_a_root_fd() -> None:
    """The class, not the instance: the modules that read workspace files resolve or open no path by
    name (`realpath`, `open`, `stat`, `scandir`, `read_bytes`...); only `beneath.Tree` opens, below
    a directory fd. The few lines that remain read Urchin's own files or git's metadata."""
    import re

    import urchin

    package = Path(urchin.__file__).parent
    pattern = re.compile(r"realpath\(|os\.open\(|[^.\w]open\(|\.read_bytes\(\)|\.read_text\(encoding|os\.stat\("
                         r"|scandir\(|os\.walk\(|\.exists\(\)|lexists\(|\.is_dir\(\)|\.is_file\(\)|\.resolve\(")
    allowed = {
        ("workspace/ignore.py", 'os.stat(".git", dir_fd=folder.fd'),    # relative to the folder's fd
        ("workspace/ignore.py", "os.stat(dot_git, follow_symlinks=False)"),   # git's metadata above the root
        ("workspace/roots.py", "self.file.read_bytes()"),              # $URCHIN_HOME/workspaces.json
        ("workspace/roots.py", "os.scandir(folder.fd)"),               # a folder's fd
        ("workspace/roots.py", "folder.is_dir()"), ("workspace/roots.py", "folder.resolve()"),   # `workspace add`
        ("workspace/curated.py", "path.exists()"), ("workspace/curated.py", "path.read_text(encoding"),  # its TOML
        ("workspace/curated.py", "self.folder.is_dir()"),
        ("workspace/access.py", "os.path.lexists(root.path)"),         # is the root itself still there?
    }
    offenders = []
    for name in [*(f"workspace/{p.name}" for p in (package / "workspace").glob("*.py")),
                 "hybrid/files.py", "hybrid/live.py", "facade/workspace.py"]:
        if name == "workspace/beneath.py":
            continue
        for line in (package / name).read_text("utf-8").splitlines():
            if pattern.search(line) and not line.lstrip().startswith(("def ", "#", '"""')) \
                    and not any(name == module and snippet in line for module, snippet in allowed):
                offenders.append(f"{name}: {line.strip()}")
    assert offenders == [], "open workspace files through FileAccess / beneath.Tree:\n" + "\n".join(offenders)
