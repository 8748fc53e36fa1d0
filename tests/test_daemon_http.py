"""urchin/daemon_http.py's JSON: `loads` and `dumps` are the `json` module's answers (the fast client and
fast calls use them instead of importing `json`, whose import compiles regular expressions)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import REPO
from urchin.daemon_http import dumps, loads

_SCALARS = st.none() | st.booleans() | st.integers() | st.floats() | st.text()
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner,
                                                                                             max_size=4), max_leaves=20)
# text around and between JSON tokens: whitespace json skips, and what it refuses
_NOISE = st.sampled_from(["", " ", "\t\n\r ", "\ufeff", "x", ",", "]", "\x0c", "\u00a0", "\x00", "/*", "\\"])


def _outcome(parse: Any, text: str) -> tuple[str, str]:
    try:
        value = parse(text)
    except ValueError:
        return ("error", "")
    return ("value", repr(value) if not isinstance(value, float) or not math.isnan(value) else "nan")


@settings(max_examples=150, deadline=None)
@given(_VALUES, _NOISE, _NOISE, st.integers(0, 40))
def test_loads_answers_as_json_loads_does(value: Any, before: str, after: str, cut: int) -> None:
    text = before + json.dumps(value, ensure_ascii=cut % 2 == 0) + after
    for sample in (text, text[:cut], text[cut:]):   # truncated and shifted documents too
        assert _outcome(loads, sample) == _outcome(json.loads, sample), sample


@pytest.mark.parametrize("text", ["NaN", "-Infinity", "[Infinity, NaN]", '"\\ud800"', '{"a":1,"a":2}', "1" * 5000,
                                  "01", "1.", "[1,]", '"\x01"', '"\\x"', "nul", "\ufeff{}", "", " ", '{"a":1} x'])
def test_loads_edge_cases_match_json(text: str) -> None:
    assert _outcome(loads, text) == _outcome(json.loads, text)


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.text(), st.text() | st.integers() | st.floats(allow_nan=False, allow_infinity=False),
                       max_size=6))
def test_dumps_writes_what_json_dumps_writes(value: dict[str, Any]) -> None:
    assert dumps(value) == json.dumps(value, ensure_ascii=False, allow_nan=False)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_dumps_refuses_what_json_refuses(bad: float) -> None:
    with pytest.raises(ValueError):
        json.dumps({"hours": bad}, allow_nan=False)
    with pytest.raises(ValueError):
        dumps({"hours": bad})


def test_the_wire_imports_neither_json_nor_re() -> None:
    code = "import sys, urchin.daemon_http as w; w.loads('{\"a\": [1.5]}'); w.dumps({'q': 'x'}); " \
           "print(sorted(m for m in ('json', 're', 'enum') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=30)
    assert proc.stdout.strip() == "[]", proc.stderr
