"""Counts in words for people: `1 file`, `2 files`. A leaf, so every layer says them the same way."""

from __future__ import annotations

__all__ = ["plural"]


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """`1 file`, `2 files`, `0 files`; `nouns` for an irregular plural (`memory`, `memories`)."""
    return f"{count} {noun if count == 1 else (nouns or noun + 's')}"
