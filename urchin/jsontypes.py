"""`JSON`: a value as JSON holds it (object, array, string, number, boolean, null), recursively; and
`JSONObject`, a JSON object (a `dict`, so its maker may still add keys). Nested values are read-only
views (`Mapping`, `Sequence`: covariant), so a `list[dict[str, str]]` is JSON as it is. For values
that are truly arbitrary JSON (an event's `meta`, input not validated yet, what a daemon answered
before it is read); a result whose keys a front end reads is a `TypedDict` beside the code that
makes it. Only types: standard library, no run-time cost.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeAlias

__all__ = ["JSON", "JSONObject"]

JSON: TypeAlias = "Mapping[str, JSON] | Sequence[JSON] | str | int | float | bool | None"
JSONObject: TypeAlias = "dict[str, JSON]"
