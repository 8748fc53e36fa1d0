"""Operations' parameters as types, and their limits, declared once (a leaf: errors, checks, event only).

`limits`: every bound, default and choice an operation's parameters have. `search` and `context`: the
typed parameters of `search` and `search_context`, validated when built. The contract (`urchin/contract/`)
declares the front ends' spellings and help from these; the layers below take the typed parameters and
never check them again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["built", "typed"]

P = TypeVar("P")


def built(cls: Callable[..., P], **given: Any) -> P:
    """Typed parameters from a Python caller's keywords; `None` means the field's default."""
    return cls(**{k: v for k, v in given.items() if v is not None})


def typed(cls: Callable[..., P], first: Any, *rest: Any) -> P:
    """`first` when it is the typed parameters already, else them built from the positional fields given
    (`Memory.get_file("a.md", 3)`): checked either way."""
    return first if isinstance(first, cls) else cls(first, *rest)  # type: ignore[arg-type]
