"""Journal lines (or events) -> compact arrays for the token-cosine index, fast.

Only the fields search needs are read from each line (no `Event` objects); a batch is tokenised by
one regex pass and its terms counted by numpy. Worker processes run the same code for cold builds.
"""

from __future__ import annotations

import os
import pickle
import re
from collections.abc import Callable, Iterable, Iterator, MutableMapping, Reversible, Sequence
from dataclasses import dataclass, field
from itertools import chain
from pathlib import Path
from typing import cast

import numpy as np
import orjson

from urchin.event import Event
from urchin.journal import LineCheck
from urchin.processes import Pool, WorkerError
from urchin.search.fields import searchable_fields
from urchin.search.terms import WORD_PATTERN, word_terms

__all__ = ["Batch", "TermExtractor", "LABELS", "WorkerError", "bound_heap", "extract_parallel", "line_aligned_end"]

LABELS = ("source", "workspace", "session", "kind")
_END = "\x00"  # separates events in a batch's text; matched as its own token, never inside a word
_SPLIT = re.compile(WORD_PATTERN + "|\x00")
_JOINERS = b"'./"  # the ASCII characters WORD_PATTERN joins words with
# ASCII bytes -> themselves when a regex match may contain them (word characters, joiners) or they
# end an event (_END), else a space.
_ASCII_TABLE = bytes(c if chr(c).isalnum() or c in b"_\x00" or c in _JOINERS else 32 for c in range(256))
_CHUNK_BYTES = 4 << 20
_M_MMAP_THRESHOLD = -3    # glibc's mallopt parameter
_MMAP_FROM = 1 << 20      # a build's allocations this large are mapped, and unmapped when freed (`bound_heap`)


@dataclass(slots=True)
class Batch:
    """Rows to index, in order. `terms` index the vocabulary of the extractor that made the batch."""

    ts: np.ndarray  # int64 ms
    ids: list[str]
    labels: dict[str, list[str | None]]
    terms: np.ndarray  # int32, grouped by row, ascending within a row
    tf: np.ndarray  # uint8 (capped at 255)
    sizes: np.ndarray  # int32: distinct terms of each row
    offsets: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # journal offsets
    new_terms: list[str] = field(default_factory=list)  # terms this batch added to its vocabulary
    vocab_start: int = 0  # the vocabulary's size before this batch
    worker: int = 0  # 0: the index's own vocabulary; else the pid of the worker whose vocabulary it is
    end: int = 0  # the journal offset just past the batch's lines (batches read from a file)

    def __len__(self) -> int:
        return len(self.ids)


class _WordIds(dict[str, tuple[int, ...]]):
    """raw word -> its term ids; misses tokenise and intern, so the hot lookups stay in C. Cleared
    when full: 64k words hold the common ones (1M events: the same CPU as 256k, ~10 MB less in each
    build worker; at 3M, where 256k filled, ~50 MB less)."""

    limit = 1 << 16

    def __init__(self, vocab: MutableMapping[str, int]) -> None:
        super().__init__()
        self.vocab = vocab
        self[_END] = (-1,)

    def __missing__(self, raw: str) -> tuple[int, ...]:
        if len(self) >= self.limit:
            self.clear()
            self[_END] = (-1,)
        vocab = self.vocab
        ids = self[raw] = tuple(vocab.setdefault(t, len(vocab)) for t in word_terms(raw))
        return ids


class _PartIds(dict[bytes, tuple[int, ...]]):
    """ASCII part (bytes between spaces) -> its term ids, through the word cache (cleared as it is)."""

    limit = 1 << 16

    def __init__(self, words: _WordIds) -> None:
        super().__init__()
        self.words = words
        self[b"\x00"] = (-1,)

    def __missing__(self, part: bytes) -> tuple[int, ...]:
        if len(self) >= self.limit:
            self.clear()
            self[b"\x00"] = (-1,)
        text = part.decode("ascii")
        if any(c in _JOINERS for c in part):
            ids = tuple(chain.from_iterable(map(self.words.__getitem__, _SPLIT.findall(text))))
        else:
            ids = self.words[text]
        self[part] = ids
        return ids


class TermExtractor:
    """Turns lines or events into `Batch`es, interning terms into `vocab` (the index's own, or a
    worker's private one)."""

    def __init__(self, vocab: MutableMapping[str, int] | None = None, worker: int = 0) -> None:
        self.vocab: MutableMapping[str, int] = {} if vocab is None else vocab
        self.worker = worker
        self._words = _WordIds(self.vocab)
        self._parts = _PartIds(self._words)

    def trim(self) -> None:
        """Drop the word caches (after a bulk build, to give their memory back)."""
        self._words = _WordIds(self.vocab)
        self._parts = _PartIds(self._words)

    def from_events(self, events: Sequence[Event]) -> Batch:
        texts = [_text(e.content, e.title, e.tags, e.source, e.workspace) for e in events]
        labels = {name: [getattr(e, name) for e in events] for name in LABELS}
        ts = np.fromiter((e.ts_ms for e in events), dtype=np.int64, count=len(events))
        return self._batch(texts, ts, [e.id for e in events], labels, np.zeros(0, dtype=np.int64))

    def from_lines(self, lines: Iterable[tuple[int, bytes]], proof: LineCheck | None = None) -> Batch:
        """Lines that are not events (bad JSON, other objects) are skipped, as `Event.from_json` does.
        With `proof`, a line the write path did not prove is indexed as it is served: redacted."""
        loads, decode_error = orjson.loads, orjson.JSONDecodeError
        offsets: list[int] = []
        ts: list[int] = []
        ids: list[str] = []
        texts: list[str] = []
        sources: list[str | None] = []
        workspaces: list[str | None] = []
        sessions: list[str | None] = []
        kinds: list[str | None] = []
        for offset, line in lines:
            try:
                record = loads(line)
            except decode_error:
                continue
            if proof is not None and not proof.proven(line):
                event = Event.from_record(record)
                record = proof.served(line, event).to_dict() if event is not None else None
            found = searchable_fields(record)
            if found is None:
                continue
            event_id, ms, source, kind, content, workspace, session, title, tags = found
            offsets.append(offset)
            ts.append(ms)
            ids.append(event_id)
            texts.append(_text(content, title, tags, source, workspace))
            sources.append(source)
            workspaces.append(workspace)
            sessions.append(session)
            kinds.append(kind)
        labels = {"source": sources, "workspace": workspaces, "session": sessions, "kind": kinds}
        return self._batch(texts, np.array(ts, dtype=np.int64), ids, labels, np.array(offsets, dtype=np.int64))

    def _batch(self, texts: list[str], ts: np.ndarray, ids: list[str], labels: dict[str, list[str | None]],
               offsets: np.ndarray) -> Batch:
        start = len(self.vocab)
        n = len(texts)
        # Most text is ASCII: there, bytes.translate + split do what the regex does, ten times faster.
        ascii_rows = [i for i, text in enumerate(texts) if text.isascii()]
        if len(ascii_rows) == n:
            rows, tokens = self._ascii_tokens(texts)
        else:
            other_rows = sorted(set(range(n)).difference(ascii_rows))
            a_rows, a_tokens = self._ascii_tokens([texts[i] for i in ascii_rows])
            o_rows, o_tokens = self._regex_tokens([texts[i] for i in other_rows])
            rows = np.concatenate([np.array(ascii_rows, dtype=np.int64)[a_rows],
                                   np.array(other_rows, dtype=np.int64)[o_rows]])
            tokens = np.concatenate([a_tokens, o_tokens])
        width = max(len(self.vocab), 1)
        keys, counts = np.unique(rows * width + tokens, return_counts=True)
        row_of = keys // width
        new_terms = list(_tail(self.vocab, start)) if self.worker else []  # a worker reports its new terms
        return Batch(
            ts=ts, ids=ids, labels=labels, terms=(keys - row_of * width).astype(np.int32),
            tf=np.minimum(counts, 255).astype(np.uint8),
            sizes=np.bincount(row_of, minlength=n).astype(np.int32), offsets=offsets,
            new_terms=new_terms, vocab_start=start, worker=self.worker)


    def _regex_tokens(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(row within texts, term id) of every term, by one regex pass over all the texts."""
        found = _SPLIT.findall(_END.join(texts))
        return _rows_and_terms(np.fromiter(chain.from_iterable(map(self._words.__getitem__, found)), np.int64))

    def _ascii_tokens(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The same for ASCII texts: bytes other than word and joiner characters become spaces, and
        each space-separated part is looked up whole (a part with joiners, as `a.b` or `end.`, is
        split by the regex once, on its first sighting)."""
        if not texts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        parts = " \x00 ".join(texts).encode("ascii").translate(_ASCII_TABLE).split()
        return _rows_and_terms(np.fromiter(chain.from_iterable(map(self._parts.__getitem__, parts)), np.int64))


def _rows_and_terms(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    ends = tokens < 0
    return np.cumsum(ends)[~ends], tokens[~ends]


def _text(content: str, title: str | None, tags: Sequence[str], source: str, workspace: str | None) -> str:
    """What an event is found by; words never span the spaces, so this tokenises like each part alone."""
    text = f"{content} {title or ''} {' '.join(tags)} {source} {workspace or ''}"
    return text.replace(_END, " ") if _END in text else text


def _tail(vocab: MutableMapping[str, int], start: int) -> Iterator[str]:
    """Terms with ids >= start: the last ones inserted (ids are handed out in insertion order)."""
    count = len(vocab) - start
    if count <= 0:
        return iter(())
    out: list[str] = []
    # dicts iterate backwards in C, a loaded `Vocabulary` from its added terms: no walk over the old terms
    for term in reversed(cast("Reversible[str]", vocab)):
        out.append(term)
        if len(out) == count:
            break
    return reversed(out)


# ---- cold builds in worker processes ------------------------------------------------------------
def bound_heap() -> None:
    """For a daemon's build child, at its start: allocations of 1 MB and more are mapped and given back
    when freed. glibc's default raises that threshold to the largest block freed (up to 32 MB), so a batch's
    arrays and pickles, freed, stay resident in the heap until a trim: at 3M events the build child
    swung by ~150 MB between two spills (its peak with its workers). Not in the workers: there it
    cost ~20% more CPU for ~2 MB less at their peak (a chunk's own working set)."""
    import ctypes
    import sys

    if sys.platform != "linux":
        return
    try:
        ctypes.CDLL("libc.so.6").mallopt(_M_MMAP_THRESHOLD, _MMAP_FROM)
    except (OSError, AttributeError):   # not glibc (musl): its own policy
        pass


_WORKER: TermExtractor | None = None
_PROOF: LineCheck | None = None


def _extract_range(path: str, start: int, end: int, home: str | None = None) -> Batch:
    """Worker: the lines of path[start:end] (line-aligned) as a batch over this process's vocabulary;
    with `home`, lines its write path did not prove are redacted first (as in-process)."""
    global _WORKER, _PROOF
    if _WORKER is None:
        _WORKER = TermExtractor(worker=os.getpid())
    if home is not None and _PROOF is None:
        from urchin.config import Settings
        from urchin.proof import LineProof

        _PROOF = LineProof(Settings.resolve(home))
    with open(path, "rb") as handle:
        handle.seek(start)
        data = handle.read(end - start)
    lines: list[tuple[int, bytes]] = []
    pos = 0
    for line in data.split(b"\n")[:-1]:
        if line:
            lines.append((start + pos, line))
        pos += len(line) + 1
    batch = _WORKER.from_lines(lines, _PROOF if home is not None else None)
    batch.end = end
    return batch


def line_aligned_end(path: Path, start: int, end: int) -> int:
    """The offset just past the last newline in path[start:end] (start when there is none)."""
    with path.open("rb") as handle:
        pos = end
        while pos > start:
            a = max(start, pos - (1 << 16))
            handle.seek(a)
            nl = handle.read(pos - a).rfind(b"\n")
            if nl >= 0:
                return a + nl + 1
            pos = a
    return start


def _bounds(path: Path, start: int, end: int, chunk: int) -> list[tuple[int, int]]:
    out = []
    with path.open("rb") as handle:
        a = start
        while a < end:
            b = a + chunk
            if b >= end:
                out.append((a, end))
                break
            handle.seek(b)
            while True:  # to the next newline (a line may be longer than a chunk)
                block = handle.read(1 << 16)
                nl = block.find(b"\n")
                if nl >= 0 or not block:
                    b = min(end, handle.tell() - len(block) + nl + 1) if nl >= 0 else end
                    break
            out.append((a, b))
            a = b
    return out


def extract_parallel(path: Path, start: int, end: int, workers: int, chunk: int | None = None,
                     home: Path | None = None) -> Iterator[Batch]:
    """Batches of path[start:end] (line-aligned), in file order, tokenised by `workers` processes.

    A `Pool` of spawned workers (never forked: unsafe in a threaded daemon), chunks handed out
    round-robin, so worker k takes chunks k, k + workers, ... into its own vocabulary; each batch
    comes back pickled. Raises `WorkerError` when a worker cannot start or dies.
    """
    chunks = _bounds(path, start, end, chunk or _CHUNK_BYTES)
    workers = max(1, min(workers, len(chunks)))
    init = orjson.dumps(str(home) if home is not None else None)
    with Pool("urchin.search.cosine_extract:worker", workers, init=init) as pool:
        for data in pool.ordered(orjson.dumps([str(path), a, b]) for a, b in chunks):
            batch = pickle.loads(data)
            if not isinstance(batch, Batch):
                raise WorkerError("token-cosine worker sent something else than a batch")
            yield batch


def worker(init: bytes) -> Callable[[bytes], bytes]:
    """A pool worker's task: `[path, start, end]` -> that range's batch, pickled; `init` is the home
    whose write path's proof the lines are checked against (JSON, or null)."""
    home = orjson.loads(init)

    def extract(task: bytes) -> bytes:
        path, a, b = orjson.loads(task)
        return pickle.dumps(_extract_range(path, a, b, home), protocol=5)

    return extract
