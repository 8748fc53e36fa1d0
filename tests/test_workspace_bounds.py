"""Issue 34, item E: every read of a workspace file is bounded in bytes and time.

A file of 400 lines and then one huge line (a sparse GiB of NULs; 96 MiB of printable text) is read
two lines at a time through the daemon: the answer comes fast, the daemon does not grow by hundreds
of MB, and `/health` keeps answering meanwhile. Long lines are cut with a marker (a secret across the
cut is redacted whole), `totalLines` is counted by a bounded scan or left out with a note, and line
numbers stay those of universal newlines (`\\n`, `\\r\\n`, `\\r`), also across read blocks.
"""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path

import pytest

from urchin.errors import QueryError
from urchin.facade import Memory
from urchin.workspace.reader import LINE_CHARS, LINE_CUT, SCAN_BYTES

HEAD = [f"line {i:03d} of the head, long enough to pass 8 KiB" for i in range(400)]
TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"


def _huge(root: Path) -> None:
    head = ("\n".join(HEAD) + "\n").encode()
    with (root / "huge.txt").open("wb") as handle:      # a sparse GiB of NULs, no line break
        handle.write(head)
    os.truncate(root / "huge.txt", len(head) + (1 << 30))
    with (root / "wide.txt").open("wb") as handle:      # 96 MiB of printable text on one line
        handle.write(head)
        block = b"a" * (1 << 20)
        for _ in range(96):
            handle.write(block)


def _peak_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def test_a_huge_line_is_read_fast_in_bounded_memory_while_health_answers(urchin_home: Path, tmp_path: Path) -> None:
    from tests.daemon_fixture import DaemonProcess

    root = tmp_path / "shop"
    root.mkdir()
    _huge(root)
    Memory.open(str(urchin_home)).workspace_add(str(root))
    daemon = DaemonProcess(urchin_home).start()
    try:
        assert daemon.proc is not None
        with daemon.client() as client:
            assert client.get("/files/shop/huge.txt", params={"maxLines": 1}).status_code == 200   # warm
            before = _peak_rss(daemon.proc.pid)
            for name in ("huge.txt", "wide.txt"):
                answers: dict[str, object] = {}

                def get(name: str = name, answers: dict[str, object] = answers) -> None:
                    started = time.monotonic()
                    answers["response"] = client.get(f"/files/shop/{name}", params={"maxLines": 2, "fromLine": 399})
                    answers["seconds"] = time.monotonic() - started

                reader = threading.Thread(target=get)
                reader.start()
                health: list[float] = []
                with daemon.client() as probe:
                    while reader.is_alive() or not health:
                        started = time.monotonic()
                        assert probe.get("/health").status_code == 200
                        health.append(time.monotonic() - started)
                reader.join()
                window = answers["response"].json()             # type: ignore[attr-defined]
                assert answers["seconds"] < 2.5, (name, answers["seconds"])
                assert max(health) < 1.0, (name, health)
                assert [line["text"] for line in window["lines"]][:1] == [HEAD[398]]
                assert window["lines"][1]["text"] == HEAD[399]
                assert "totalLines" not in window and "scan stopped" in window["totalLinesNote"], window
                assert window["truncated"] is True
            grown = _peak_rss(daemon.proc.pid) - before
            assert grown < 200 * 1024 * 1024, f"the daemon grew by {grown >> 20} MiB"
            cut = client.get("/files/shop/wide.txt", params={"fromLine": 401, "maxLines": 1}).json()
            assert cut["lines"][0]["text"] == "a" * LINE_CHARS + LINE_CUT.format(LINE_CHARS)
    finally:
        daemon.stop()


def test_long_lines_are_cut_and_a_secret_across_the_cut_is_redacted_whole(memory: Memory, tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    lines = ["short", "x" * (LINE_CHARS - 10) + " " + TOKEN + " tail", "y" * 100_000, "after"]
    (root / "long.txt").write_text("\n".join(lines) + "\n")
    memory.workspace_add(str(root))
    window = memory.get_file("notes/long.txt")
    assert window.total_lines == 4 and window.lines[0] == "short" and window.lines[3] == "after"
    assert window.lines[1].startswith("x" * (LINE_CHARS - 10) + " [REDACTED:github_token]")
    assert window.lines[1].endswith(LINE_CUT.format(LINE_CHARS)) and "ghp_" not in window.lines[1]
    assert TOKEN[4:12] not in window.lines[1]
    assert window.lines[2] == "y" * LINE_CHARS + LINE_CUT.format(LINE_CHARS)


def test_line_numbers_and_counts_are_those_of_universal_newlines(memory: Memory, tmp_path: Path) -> None:
    """The same lines and count as Python's universal newlines, also with a `\\r\\n` split across the
    1 MiB read blocks, a last line without a break, and an empty file."""
    root = tmp_path / "crlf"
    root.mkdir()
    block = 1 << 20
    cases = {
        "mixed.txt": b"one\r\ntwo\rthree\n\nfour",
        "split.txt": b"a" * (block - 1) + b"\r\n" + b"next\rlast\r",
        "crlf-edge.txt": b"b" * 10 + b"\n" + b"c" * (block - 12) + b"\r" + b"\n" + b"tail\n",
        "empty.txt": b"",
        "breaks.txt": b"\n" * 5000 + b"\r\n" * 3000 + b"\r" * 2000,
    }
    for name, data in cases.items():
        (root / name).write_bytes(data)
    memory.workspace_add(str(root))
    for name, data in cases.items():
        expected = io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace").readlines()
        expected = [line.rstrip("\n") for line in expected]
        for start in (1, 2, len(expected) - 1, len(expected)):
            if start < 1 or (start > max(len(expected), 1)):
                continue
            window = memory.get_file(f"crlf/{name}", from_line=start, max_lines=3)
            assert window.total_lines == len(expected), (name, start)
            want = [line[:LINE_CHARS] + (LINE_CUT.format(LINE_CHARS) if len(line) > LINE_CHARS else "")
                    for line in expected[start - 1:start + 2]]
            assert window.lines == want, (name, start)
    with pytest.raises(QueryError, match="has 5 lines"):
        memory.get_file("crlf/mixed.txt", from_line=6)


def test_a_key_block_begun_before_the_window_stays_redacted(memory: Memory, tmp_path: Path) -> None:
    from tests.test_privacy import CORPUS

    pem_text, secret, _ = next(case for case in CORPUS if case[2] == "private_key" and "EC PRIVATE" in case[0])
    root = tmp_path / "keys"
    root.mkdir()
    pem = pem_text.splitlines()
    (root / "dump.txt").write_text("\n".join(["intro"] * 3 + pem + ["after"]) + "\n")
    memory.workspace_add(str(root))
    body = [line for line in secret.splitlines() if len(line) >= 16]
    for start in range(4, 4 + len(pem)):
        window = memory.get_file("keys/dump.txt", from_line=start, max_lines=2)
        assert not [line for line in body if line in "\n".join(window.lines)], start


def test_a_read_past_the_scan_bound_says_so(memory: Memory, tmp_path: Path) -> None:
    root = tmp_path / "big"
    root.mkdir()
    path = root / "sparse.txt"
    path.write_bytes(b"first\n" + b"text " * 2000 + b"\n")        # no NUL in the first 8 KiB
    os.truncate(path, SCAN_BYTES * 2)
    memory.workspace_add(str(root))
    window = memory.get_file("big/sparse.txt", max_lines=1)
    assert window.lines == ["first"] and window.total_lines is None and "scan stopped" in (window.note or "")
    assert "not counted" in window.render()
    import anyio

    from tests.mcp_harness import stdio_session

    async def main() -> None:
        async with stdio_session() as session:
            result = await session.call_tool("get_file", {"path": "big/sparse.txt", "maxLines": 1})
            assert not result.is_error, result.content
            assert result.structured_content is not None and "totalLines" not in result.structured_content
            assert "scan stopped" in result.structured_content["totalLinesNote"]

    anyio.run(main)
    assert memory.get_file("big/sparse.txt", from_line=3).lines == ["\x00" * LINE_CHARS + LINE_CUT.format(LINE_CHARS)]
    with pytest.raises(QueryError, match="past what one read scans"):
        memory.get_file("big/sparse.txt", from_line=4)


def test_a_memory_member_over_the_bound_is_listed_not_read(memory: Memory, tmp_path: Path) -> None:
    from urchin.workspace.curated import MAX_MEMBER_BYTES, Member

    root = tmp_path / "mem"
    root.mkdir()
    (root / "big.md").write_bytes(b"# big\n" + b"z" * MAX_MEMBER_BYTES)
    (root / "small.md").write_text("# small\n")
    memory.workspace_add(str(root))
    memory.memory_create("both", "always", [Member("folder", path="mem")])
    got = memory.memory_get("both")
    assert [m["member"] for m in got["members"]] == ["mem/small.md"]
    assert got["coverage"] == [{"member": "mem/big.md", "status": "excluded",
                                "reason": f"over {MAX_MEMBER_BYTES} bytes: read it in ranges with get_file"}]
