"""The id index's records in a long-lived process's memory (`IdIndex.load`): each record's 32-bit hash
prefix and its number in the sidecar as two sorted numpy arrays (8 bytes an event), and the newest
records in a small dict, merged into the arrays every `merge_at`. The dict holds ints (a list only
for a hash seen twice): no object the garbage collector tracks, so an importer's ~32k records between
merges cost it no collections (a list each made ~7 a batch and a full one each merge).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:      # numpy is imported by the long-lived processes that load the index (`load()`) only
    import numpy as np

__all__ = ["IdMemo", "Records"]

_MERGE_AT = 1 << 15     # newest records kept in a dict up to this many, then merged into the arrays

Records = Callable[[Sequence[int]], list[tuple[int, int]]]   # record numbers -> (hash, offset) each, as stored


class IdMemo:
    """Id hash -> journal offsets, in memory: each record's 32-bit hash prefix and its number in the
    sidecar as two sorted arrays (8 bytes a record; `records` reads a hit's whole hash and offset back
    from the sidecar), and the newest records in a dict (whole hash -> offsets).

    Written by one thread at a time (under the journal lock), read by any: a merge publishes the new
    arrays in one assignment before it empties the dict, so a reader never misses a record (it may
    see one twice, which a lookup tolerates: every offset is checked against its line)."""

    merge_at = _MERGE_AT

    def __init__(self, records: Records) -> None:
        import numpy as np

        self._read = records
        self._sorted: tuple[np.ndarray, np.ndarray] = (np.empty(0, np.uint32), np.empty(0, np.uint32))
        self._recent: dict[int, int | list[int]] = {}   # a hash's offset, or its offsets when more than one
        # the dict's records, for the next merge: whole hashes and record numbers in the order added
        self._recent_hashes, self._recent_numbers = array("Q"), array("I")

    def __len__(self) -> int:
        return len(self._sorted[0]) + len(self._recent_numbers)

    def get(self, h: int) -> list[int]:
        known = self._recent.get(h)   # before the arrays: a merge publishes them, then empties this
        found = [] if known is None else known if isinstance(known, list) else [known]
        prefixes, numbers = self._sorted
        if len(prefixes):
            key = prefixes.dtype.type(h >> 32)
            a = int(prefixes.searchsorted(key, side="left"))
            if a < len(prefixes) and prefixes[a] == key:
                b = int(prefixes.searchsorted(key, side="right"))
                return [offset for stored, offset in self._read(numbers[a:b].tolist()) if stored == h] + found
        return list(found)

    def held(self, hashes: Sequence[int]) -> set[int]:
        """The hashes of `hashes` that `get` finds an offset for, searched for all at once (a prefix
        found is confirmed by `get`: the same id again, or a prefix shared with 1 in 2^32/records)."""
        recent = self._recent      # read before the arrays: a merge publishes them, then empties this
        found = recent.keys() & hashes if recent else set()
        prefixes = self._sorted[0]
        if len(prefixes) and hashes:
            import numpy as np

            wanted = np.fromiter(hashes, np.uint64, len(hashes))
            keys = (wanted >> np.uint64(32)).astype(np.uint32)
            at = np.minimum(prefixes.searchsorted(keys), len(prefixes) - 1)
            hit = prefixes[at] == keys
            if hit.any():    # each prefix found: its records' whole hashes, read in one pass
                numbers, ends = self._sorted[1], prefixes.searchsorted(keys[hit], side="right")
                wanted_numbers = [n for a, b in zip(at[hit].tolist(), ends.tolist(), strict=True)
                                  for n in numbers[a:b].tolist()]
                stored = {h for h, _ in self._read(wanted_numbers)}
                found.update(h for h in wanted[hit].tolist() if h in stored)
        return found

    def add(self, h: int, offset: int, number: int) -> None:
        self.add_many(((h, offset),), number)

    def add_many(self, pairs: Iterable[tuple[int, int]], first: int) -> None:
        """Records (hash, offset) that are, in order, the sidecar's records from number `first` on."""
        recent, hashes = self._recent, self._recent_hashes
        count = len(hashes)
        for h, offset in pairs:
            known = recent.get(h)
            if known is None:
                recent[h] = offset
            elif isinstance(known, list):
                known.append(offset)
            else:
                recent[h] = [known, offset]
            hashes.append(h)
        self._recent_numbers.extend(range(first, first + len(hashes) - count))
        self._merge_when_full()

    def add_new(self, hashes: Sequence[int], offsets: Sequence[int], first: int) -> None:
        """`add_many` of hashes not held here, none twice: one offset each, added at C speed."""
        recent = self._recent
        before = len(recent)
        recent.update(zip(hashes, offsets, strict=True))   # each hash -> its offset
        if len(recent) - before != len(hashes):   # two ids of the batch share a 64-bit hash: keep both offsets
            for h in hashes:
                recent.pop(h, None)
            self.add_many(zip(hashes, offsets, strict=True), first)
            return
        self._recent_hashes.extend(hashes)
        self._recent_numbers.extend(range(first, first + len(hashes)))
        self._merge_when_full()

    def _merge_when_full(self) -> None:
        if len(self._recent) >= self.merge_at:
            import numpy as np

            self.merge(np.empty(0, np.uint64), np.empty(0, np.uint32))

    def merge(self, hashes: np.ndarray, numbers: np.ndarray) -> None:
        """Add records (whole hashes and their numbers in the sidecar; the dict's too) to the sorted
        arrays: O(n) copies and a sort of the new ones."""
        import numpy as np

        if self._recent_numbers:   # the dict is still read by lookups until the new arrays hold its records
            hashes = np.concatenate([hashes, np.frombuffer(self._recent_hashes, np.uint64)])
            numbers = np.concatenate([numbers, np.frombuffer(self._recent_numbers, np.uint32)])
        prefixes = (hashes >> np.uint64(32)).astype(np.uint32)
        order = np.argsort(prefixes, kind="stable")     # equal prefixes (a collision, an id twice): in any order
        prefixes, numbers = prefixes[order], numbers[order].astype(np.uint32)
        del order
        keys, values = self._sorted
        if len(keys):
            at = np.searchsorted(keys, prefixes, side="right")
            prefixes, numbers = np.insert(keys, at, prefixes), np.insert(values, at, numbers)
        self._sorted = (prefixes, numbers)
        self._recent = {}
        self._recent_hashes, self._recent_numbers = array("Q"), array("I")

    @property
    def nbytes(self) -> int:
        return self._sorted[0].nbytes + self._sorted[1].nbytes + 112 * len(self._recent_numbers)
