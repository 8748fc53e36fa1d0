"""A loaded token-cosine vocabulary (`urchin.search.vocab`): what a dict of its terms answers, in a
fraction of the memory, and what a loaded index does with it."""

from __future__ import annotations

import random
import tracemalloc

import pytest

from urchin.search.vocab import Vocabulary


def _terms(n: int, seed: int = 3) -> list[str]:
    rng = random.Random(seed)
    letters = "abcdefghijklmnopqrstuvwxyz0123456789_é中"
    words = ("".join(rng.choice(letters) for _ in range(rng.randint(1, 14))) for _ in range(n))
    return list(dict.fromkeys([*words, "a", "ab", "abc", "zz", "中", "é", "z" * 40]))


def test_a_vocabulary_answers_what_a_dict_of_its_terms_answers() -> None:
    """Every saved term has its id, and nothing else is found: terms sharing a prefix, one-byte and
    non-ASCII terms, neighbours in byte order, the empty string; terms added since get the next ids."""
    terms = _terms(20_000)
    vocab = Vocabulary.of("\n".join(terms).encode("utf-8"))
    plain = {t: i for i, t in enumerate(terms)}
    assert len(vocab) == len(plain) and list(vocab) == terms
    probes = terms + [t + "x" for t in terms[:2_000]] + [t[:-1] for t in terms[:2_000]] + ["", "\x7f", "zzz", "中中"]
    assert [vocab.get(t) for t in probes] == [plain.get(t) for t in probes]
    assert [t in vocab for t in probes] == [t in plain for t in probes]
    with pytest.raises(KeyError):
        vocab["not a term"]
    for term in ("new", terms[5], "newer", "new"):
        assert vocab.setdefault(term, len(vocab)) == plain.setdefault(term, len(plain))
    assert list(vocab) == list(plain) and list(reversed(vocab))[:3] == ["newer", "new", terms[-1]]
    again = Vocabulary.of(vocab.to_bytes())       # as a save writes it and the next load reads it
    assert list(again) == list(plain) and again["newer"] == plain["newer"]


def test_an_empty_vocabulary_and_a_repeated_term() -> None:
    empty = Vocabulary.of(b"")
    assert len(empty) == 0 and list(empty) == [] and "a" not in empty and empty.setdefault("a", 0) == 0
    assert empty.to_bytes() == b"a" and list(Vocabulary.of(empty.to_bytes())) == ["a"]
    with pytest.raises(ValueError, match="repeated terms"):
        Vocabulary.of(b"ab\ncd\nab")


def test_a_loaded_vocabulary_holds_a_fraction_of_a_dict_of_its_terms() -> None:
    """At 3M events the dict of 405k terms took ~52 MB of the daemon; the loaded one holds its saved
    bytes, two int arrays and a bucket table: here under a third of the dict."""
    terms = _terms(30_000)
    blob = "\n".join(terms).encode("utf-8")
    tracemalloc.start()
    try:
        as_dict = dict(zip(blob.decode("utf-8").split("\n"), range(len(terms)), strict=True))
        dict_bytes = tracemalloc.get_traced_memory()[0]
        del as_dict
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        vocab = Vocabulary.of(blob)
        held = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert len(vocab) == len(terms) and held * 3 < dict_bytes, (held, dict_bytes)


def test_terms_at_gives_saved_and_added_terms_by_id() -> None:
    vocab = Vocabulary.of("\n".join(["zeta", "alpha", "été", "b"]).encode("utf-8"))
    vocab.setdefault("new", len(vocab))
    assert vocab.terms_at([4, 2, 0, 3, 1]) == ["new", "été", "zeta", "b", "alpha"]
    assert vocab.terms_at([]) == []
