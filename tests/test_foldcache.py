"""Casefolded blocks kept between queries (urchin/search/foldcache.py): a repeated query reads no block
it has folded before, and the cache never changes an answer (escapes, casefolds, filters, compaction)."""

from __future__ import annotations

import os
import random
import sys
from datetime import timedelta

import pytest
from freezegun import freeze_time

from tests.test_substring import ANY, NOW, WORDS, add, contents, fill, reference, searched, stamp
from urchin.facade import Memory
from urchin.search import substring
from urchin.search.foldcache import FoldCache, fold_block
from urchin.search.query import Filters


def _count_preads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = os.pread

    def counting(fd: int, size: int, offset: int) -> bytes:
        if sys._getframe(1).f_globals["__name__"] == substring.__name__:  # journal blocks, not index headers
            calls.append(size)
        return real(fd, size, offset)

    monkeypatch.setattr(substring.os, "pread", counting)
    return calls


@freeze_time(NOW)
def test_a_repeated_query_reads_no_block_without_a_hit(memory: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    fill(memory, 3000)
    assert memory.substring.catch_up().blocks >= 4
    since = int((NOW - timedelta(days=40)).timestamp() * 1000)
    first = searched(memory, "quokka alpha beta", since, 20)
    assert len(memory.substring.folds) == 0    # folded once: not kept (a scan does not fill the cache)
    assert searched(memory, "quokka alpha beta", since, 20) == first
    assert len(memory.substring.folds) >= 4    # folded a second time: kept
    calls = _count_preads(monkeypatch)
    assert searched(memory, "quokka alpha beta", since, 20) == first
    assert first and len(calls) <= len(first)  # at most one read per block holding a hit
    calls.clear()
    phrase = "budget quokka alpha retry gamma delta"  # every trigram in every block, the phrase in none
    assert searched(memory, phrase, since, 20) == []
    assert calls == []  # every candidate block was folded (and kept) by the queries before


@freeze_time(NOW)
def test_escaped_lines_match_through_their_decoded_content(memory: Memory) -> None:
    """A `\\u` escape in the raw line (another writer) and `\\U` in a path: found exactly once each."""
    memory.journal.append([('{"id":"e1","timestamp":"' + stamp(2) + '","source":"claude","kind":"note",'
                            '"content":"Stra\\u00dfe \\u0041BC","workspace":"Espa\\u00f1a"}').encode()])
    add(memory, {"id": "p1", "content": "C:\\Users\\dev ABC", "timestamp": stamp(1), "workspace": "España"})
    for _ in range(2):  # cold, then from the cache
        assert contents(memory.search("strasse abc")) == ["Straße ABC"]
        assert [h.event.id for h in memory.search("abc", workspace="España").hits] == ["p1", "e1"]
        assert [h.event.id for h in memory.search("users\\dev").hits] == ["p1"]
        assert memory.search("u00df").hits == []


@freeze_time(NOW)
def test_cached_answers_equal_a_full_scan(memory: Memory) -> None:
    fill(memory, 3000, seed=3)
    add(memory, *({"content": text, "timestamp": stamp(i)} for i, text in
                  enumerate(("ſtraße ﬁle", "KELVIN \u212a", "İstanbul", "ΣΊΣΥΦΟΣ"))))
    every = [e for _, e in memory.journal.iter_events()]
    rng = random.Random(9)
    for _ in range(80):  # the same queries come back: most are answered from folded blocks
        query = rng.choice((*WORDS, "STRASSE", "ss", "fi", "k", "i̇stanbul", "σίσυφος", "quokka alpha", "absent"))
        since = int((NOW - timedelta(hours=rng.choice((1, 24, 168, 24 * 40)))).timestamp() * 1000)
        filters = rng.choice((ANY, Filters.of(source="git"), Filters.of(session="s1", workspace="w2")))
        limit = rng.choice((1, 20, 1000))
        assert searched(memory, query, since, limit, filters) == reference(memory, query, since, limit, filters,
                                                                            every=every), (query, since, filters)


@freeze_time(NOW)
def test_forgotten_and_compacted_journal_never_serves_stale_blocks(memory: Memory) -> None:
    add(memory, *({"id": f"f{i}", "content": f"needle number {i}", "timestamp": stamp(i)} for i in range(50)))
    assert len(memory.search("needle", limit=100).hits) == 50
    memory.forget(["f3", "f4"], confirm=True)
    ids = [h.event.id for h in memory.search("needle", limit=100).hits]
    assert len(ids) == 48 and "f3" not in ids and "f4" not in ids
    add(memory, {"id": "new", "content": "needle after compaction", "timestamp": stamp(0)})
    assert memory.search("needle", limit=1).hits[0].event.id == "new"


def test_fold_block_keeps_lines_and_folds_like_casefold() -> None:
    raw = b'{"content":"Stra\xc3\x9fe"}\n{"content":"ABC \\u00c9"}\n\xff\xfe bad bytes\n'
    folded = fold_block(raw)
    assert folded.count(b"\n") == raw.count(b"\n")
    lines = folded.split(b"\n")
    assert b"strasse" in lines[0] and "abc é".encode() in lines[1] and b"\xff\xfe" in lines[2]


def test_a_block_folded_once_is_not_kept() -> None:
    """A scan (a rare word over the whole journal) folds each block once: none takes the budget, and
    the blocks queries come back to stay."""
    cache = FoldCache(budget=100)
    assert cache.get("inode-1", "hot") is None
    cache.put("inode-1", "hot", b"h" * 30)
    assert cache.get("inode-1", "hot") is None and len(cache) == 0 and cache.size == 0
    cache.put("inode-1", "hot", b"h" * 30)
    assert cache.get("inode-1", "hot") == b"h" * 30
    for i in range(20):     # a scan: each block folded once
        cache.put("inode-1", i, b"x" * 30)
    assert len(cache) == 1 and cache.size == 30 and cache.get("inode-1", "hot") == b"h" * 30


def test_cache_is_bounded_and_forgets_another_file() -> None:
    cache = FoldCache(budget=100)
    assert cache.get("inode-1", 0) is None  # a query on this file opens it
    for i in range(10):
        cache.put("inode-1", i, b"x" * 30)
        cache.put("inode-1", i, b"x" * 30)   # kept at its second fold
    assert cache.size <= 100 and len(cache) == 3 and cache.get("inode-1", 9) == b"x" * 30
    assert cache.get("inode-1", 0) is None
    assert cache.get("inode-2", 9) is None and len(cache) == 0
    cache.put("inode-1", 1, b"y")  # a stale writer for the old file adds nothing
    cache.put("inode-1", 1, b"y")
    assert len(cache) == 0
