"""Tokenisation: words, case folding, stop words, Porter2 stems, identifiers split and kept whole."""

from __future__ import annotations

import pytest

from urchin.search.stem import stem
from urchin.search.terms import MAX_TERM_LENGTH, STOP_WORDS, tokenize

# Pairs from the Snowball English reference (snowballstemmer 2.x gives the same).
PORTER2 = {
    "caresses": "caress", "ponies": "poni", "ties": "tie", "cats": "cat", "feed": "feed",
    "agreed": "agre", "plastered": "plaster", "motoring": "motor", "sing": "sing", "hopping": "hop",
    "tanned": "tan", "falling": "fall", "hissing": "hiss", "fizzed": "fizz", "failing": "fail",
    "filing": "file", "happy": "happi", "generously": "generous", "consigned": "consign",
    "knightly": "knight", "running": "run", "added": "add", "skies": "sky", "dying": "die", "news": "news",
}


@pytest.mark.parametrize(("word", "expected"), sorted(PORTER2.items()))
def test_stem_matches_the_snowball_reference(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_words_are_case_folded_and_stemmed() -> None:
    assert tokenize("Running RUNS run") == ["run", "run", "run"]


def test_stop_words_and_single_letters_are_dropped() -> None:
    assert tokenize("the cat and a dog of x") == ["cat", "dog"]
    assert {"the", "and", "of"} <= STOP_WORDS


def test_possessives_and_contractions_keep_the_word() -> None:
    assert tokenize("Caroline's painting, I'm sure she didn't") == ["carolin", "paint", "sure"]


def test_snake_case_gives_parts_and_the_whole() -> None:
    assert tokenize("max_retry_count") == ["max", "retri", "count", "max_retry_count"]


def test_camel_case_gives_parts_and_the_whole() -> None:
    assert tokenize("parseHTTPResponse") == ["pars", "http", "respons", "parsehttpresponse"]


def test_paths_and_dotted_names_give_parts_and_the_whole() -> None:
    assert tokenize("see urchin/search/cosine.py") == [
        "see", "urchin", "search", "cosin", "py", "urchin/search/cosine.py"]
    assert tokenize("os.environ") == ["os", "environ", "os.environ"]


def test_sentence_punctuation_does_not_join_words() -> None:
    assert tokenize("Done. Next, the tests!") == ["done", "next", "test"]


def test_unicode_words_are_kept_and_folded() -> None:
    assert tokenize("Straße CAFÉ 東京") == ["straße", "café", "東京"]


def test_numbers_of_two_digits_or_more_are_terms() -> None:
    assert tokenize("port 8080 on day 7") == ["port", "8080", "day"]


def test_blobs_longer_than_the_limit_are_dropped() -> None:
    blob = "a" * (MAX_TERM_LENGTH + 1)
    assert tokenize(f"key {blob} value") == ["key", "valu"]


def test_blank_text_has_no_terms() -> None:
    assert tokenize("  \n ") == []
