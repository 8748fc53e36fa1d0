"""How token-cosine ranks and what a query may cost: one frozen object a `TokenCosineIndex` is built with.

The first group decides the rankings (tuned on LoCoMo and the concept sets: `bench/locomo.py --cv`,
`bench/concepts.py`, figures in bench/RESULTS.md); the second only which path computes them, every path
giving the same ids, order and scores, bit for bit (tests/test_cosine*.py compare them at extreme values),
so those values trade CPU and memory alone. The defaults are what ships; tests and benches pass others.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

__all__ = ["DEFAULTS", "RankingSettings"]


@dataclass(frozen=True, slots=True)
class RankingSettings:
    """Token-cosine's knobs, with the shipped values as defaults (see each one's docstring)."""

    # ---- what ranks -------------------------------------------------------------------------------
    context: float = 0.5
    """A session neighbour `d` turns away adds `context ** d` times its own match to an event's (a turn
    answers the one before it); 0 adds nothing. In [0, 1]. LoCoMo CV over 0.4 / 0.5 / 0.6 (`locomo.py
    --cv`; held out on conv-26,30,41 the best was 0.5 with 3 turns)."""
    context_turns: int = 3
    """How many neighbours on each side of an event add their match (`context`). CV over 2 / 3 with
    `context`: 3 (0.5 and 2 turns before issue 15)."""
    session: float = 1.0
    """The session leg: every event of a session gains `session` times the session's match (its events'
    cosines summed, over the square root of its length), what a whole session is about. 0: no leg.
    LoCoMo CV over 0 / 1: 1."""
    session_slots: float = 1
    """Of every 10 results, how many the session leg fills (after the best by match,
    `cosine_sparse.merge`). CV over 1 / 2 with `session`: 1 (LoCoMo 0.687 -> 0.725 with the thesaurus and
    the pivot)."""
    kind: float = 0.5
    """Events whose kind the query names ("decisions" -> `decision`) count 1 + `kind`. Set with the
    session leg (commit 02ecd27) on hand-written queries; not in the CV grid."""
    memory: float = 1.0
    """Memories (`MEMORY_KINDS`: what an agent chose to remember, `urchin_remember`'s decisions) count
    1 + `memory`, whatever the query: a later question most often wants what was decided, not the file
    reads and test runs around it. Chosen on the concept sets (`bench/concepts.py`: held out 0.26 -> 0.58
    with the thesaurus); the hybrid index's legs use the same (`MEMORY_PRIOR`)."""
    named_source: float = 1.0
    """Events from a source the query names ("what did Caroline say", "what did codex decide") count
    1 + `named_source`. LoCoMo CV over 0 / 0.5 / 1: every fold picks 1 (CV 0.715 -> 0.749)."""
    related: float = 0.5
    """The shipped thesaurus's related words of software work (`thesaurus.py`) weigh `related` times their
    nearness, relative to the query's own terms; 0: no thesaurus. Half weight, chosen on the concept sets
    with LoCoMo held equal (commits 0140bc5, bba1361)."""
    related_terms: int = 80
    """At most this many thesaurus words are added to a query (with `related`; same tuning)."""
    expand: float = 0.3
    """Terms the learned associations (`assoc.py`) relate to a query weigh `expand` times their
    similarity (at most 1), relative to the query's own; 0: no expansion (and no associations learned
    for this index). LoCoMo CV over 0 / 0.3: 0.3."""
    expand_terms: int = 5
    """At most this many associated terms are added to a query (with `expand`; CV'd with it)."""
    expand_df: float = 0.02
    """A related or associated term found in more than this share of events (and at least 50) is not
    added: as common as that it adds little and costs its postings (bench_cosine at 1M, commit 15f8b51)."""
    pivot: float = 0.3
    """Pivoted length normalisation's slope (Singhal et al. 1996): an event's weight vector is divided
    by `(1 - pivot) * mean norm + pivot * its norm`; 1 is the plain cosine, which favours short events
    (a one-word turn matches a one-word query best). In (0, 1]. LoCoMo CV over 1 / 0.3 / 0.2: 0.3."""
    exact_refresh_postings: int = 1 << 21
    """Up to this many postings, every event's norm is recomputed with the current idf at the first
    query after adds (O(postings)); above, once the index has grown by `refresh_growth`. Set with the
    first index as a cost bound, not tuned on figures (idf is exact at every query either way)."""
    refresh_growth: float = 0.01
    """Above `exact_refresh_postings`, norms are recomputed once the index has grown by this share, so
    no norm's idf is more than 1% of events stale."""

    # ---- what a query costs (the same results whatever these are) -----------------------------------
    sparse_context: int = 2
    """Session context is scattered from the matches along the inverse links when the matches are under
    1/`sparse_context` of the window, else gathered over every row: the same sums in the same order
    (commit b602e3a, bench_cosine at 1M: ~1.7x faster)."""
    sampled_top: int = 64
    """A ranking over more than `sampled_top` rows per result first finds the `limit`-th best of a
    sample, a floor, and partitions only the rows above it (commit b602e3a)."""
    dense_share: int = 8
    """Matches over 1/`dense_share` of the window, fewer than `limit` of them holding every word: the
    passes over the window cost no more than ranking the rows the query reaches (`cosine_sparse`,
    round thirteen)."""
    sort_share: int = 4
    """Postings under 1/`sort_share` of the window: the rows they write are found by sorting them, else
    by a scan of the window (`cosine_sparse`)."""
    walk_budget: int = 20_000
    """Steps walking matched sessions back to their newest turns (the session leg) before the passes over
    the window are cheaper (`cosine_sparse`)."""
    block: int = 64
    """Rows per block of the block-max pruning (`cosine_prune`: 5 bytes per block and kept term). 64, not
    256 (round seventeen's): a block's maxima of two common words summed are tighter the fewer rows it
    has, so a week's window at 3M rows reads ~1/10 of its blocks, not over 1/3 (round twenty-four,
    `bench/bench_prune_ab.py`)."""
    super_block: int = 4
    """Blocks per super-block (`cosine_prune`): a query sums its terms' maxima over super-blocks first and
    works block by block only inside those whose bound reaches a floor or that its first read picks, so
    that work follows the blocks kept, not the window's (round twenty-five, `bench/bench_prune_ab.py`)."""
    min_postings: int = 30_000
    """The pruning's own cost, in postings: a window is pruned when reading every match would read this
    many more postings (estimated) than the pruning's first read (`cosine_prune._worth`; round twenty-four,
    `bench_prune_ab.py`: at 1M rows a week's window is read whole, at 3M pruned)."""
    bound_terms: int = 128
    """Terms whose block maxima are kept (least recently asked go first; ~190 KB a term at 3M rows, made
    in ~0.1 s)."""
    first_blocks: int = 192
    """Blocks per leg the pruning reads first, for each leg's floor (then up to 4x more per round, `rounds`).
    192 of 64 rows (48 of 256 before): each round costs ~2 ms at 3M rows whatever it reads, and no
    bench_scale query was answered from 12 (round twenty-three, `bench/bench_prune_ab.py`)."""
    rounds: int = 8
    """Reads of the best blocks at most (each 4x as many as the last, or every block over the floors the
    last one found, when fewer): the floors rise with each, and the blocks over them fall."""
    read_share: int = 3
    """More than 1/`read_share` of the window's blocks to read: reading every match costs no more."""
    bound_growth: int = 50
    """Block maxima are made again once the index has grown by 1/`bound_growth` since they were made."""

    def __post_init__(self) -> None:
        if not 0.0 < self.pivot <= 1.0:
            raise ValueError("pivot must be in (0, 1]")
        if not 0.0 <= self.context <= 1.0:
            raise ValueError("context must be in [0, 1]")
        low = [f.name for f in fields(self) if getattr(self, f.name) < (1 if f.name in _AT_LEAST_ONE else 0)]
        if low:
            raise ValueError(f"{', '.join(low)} out of range: {', '.join(sorted(_AT_LEAST_ONE))} must be >= 1, "
                             "every other setting >= 0")


# divisors (rows per block, growth as a fraction) and a cache's size: 0 would mean nothing
_AT_LEAST_ONE = frozenset({"block", "bound_growth", "bound_terms", "super_block"})

DEFAULTS = RankingSettings()   # what ships
