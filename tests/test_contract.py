"""The contract (`urchin/contract/`): one validator, errors spelled for the caller, bounds equal to the
layers' own, schemas generated from the same declarations."""

from __future__ import annotations

from typing import Any

import pytest

from urchin.contract import OPERATIONS, input_schema
from urchin.contract import ops as contract_ops
from urchin.errors import QueryError


def test_bounds_equal_the_layers_below() -> None:
    from urchin.index.params import MAX_TOKEN_BUDGET
    from urchin.search.query import MAX_LIMIT
    from urchin.workspace.reader import MAX_FROM_LINE, MAX_LINES

    assert (contract_ops.MAX_LIMIT, contract_ops.MAX_LINES, contract_ops.MAX_FROM_LINE) == (
        MAX_LIMIT, MAX_LINES, MAX_FROM_LINE)
    assert contract_ops.CONTEXT_MAX_TOKEN_BUDGET == MAX_TOKEN_BUDGET


@pytest.mark.parametrize("op, values, caller, message", [
    ("search", {"query": "  "}, "wire", "query must not be empty"),
    ("search", {"query": "  "}, "cli", "query must not be empty"),
    ("search", {"query": "x", "limit": 0}, "cli", "--limit: must be from 1 to 1000, got 0"),
    ("search", {"query": "x", "limit": "0"}, "wire", "limit: must be from 1 to 1000, got 0"),
    ("search", {"query": "x", "hours": "nan"}, "wire", 'hours: must be a number, got "nan"'),
    ("search", {"query": "x", "hours": 1e308}, "wire", "hours: must be at most 10000000, got 1e+308"),
    ("get_file", {"path": "a", "from_line": 0}, "cli", "--from-line: must be from 1 to 2147483648, got 0"),
    ("get_file", {"path": "a", "fromLine": 0}, "wire", "fromLine: must be from 1 to 2147483648, got 0"),
    ("get_memory", {"slug": "m", "token_budget": 0}, "cli", "--token-budget: must be from 1 to 200000, got 0"),
    ("recent", {"query": "x"}, "wire", "query: unknown parameter (allowed: hours, limit, source, workspace,"),
    ("ingest", {"content": "x", "tags": ["a", 7]}, "wire", "tags[1]: must be a string, got 7"),
    ("ephemeral", {"action": "Pause"}, "wire", 'action: must be one of start, end, status, got "Pause"'),
])
def test_errors_name_the_field_as_the_caller_spelled_it(op: str, values: dict[str, Any], caller: Any,
                                                        message: str) -> None:
    with pytest.raises(QueryError) as caught:
        OPERATIONS[op].parse(values, caller, from_text=caller == "wire" and op != "ingest")
    assert caught.value.message.startswith(message)
    assert "None" not in caught.value.message


def test_defaults_come_from_one_place() -> None:
    parsed = OPERATIONS["search"].parse({"query": "x"}, "wire")
    assert (parsed["hours"], parsed["limit"]) == (168, 20)
    schema = input_schema(OPERATIONS["search"])
    assert schema["properties"]["hours"]["default"] == 168 and schema["properties"]["limit"]["default"] == 20
    assert schema["properties"]["limit"]["maximum"] == 1000 and schema["additionalProperties"] is False
