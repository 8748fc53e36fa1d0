"""The token budget every answer is packed into: one estimate (4 characters a token, stated in each
response), one rule for cutting (at a line boundary), used by the hybrid context and by curated memories."""

from __future__ import annotations

import math

__all__ = ["CHARS_PER_TOKEN", "TokenBudget", "estimate_tokens"]

CHARS_PER_TOKEN = 4   # a stated, honest estimate for English text and code


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


class TokenBudget:
    """Pieces taken best first until `limit` tokens are spent (`None`: no limit). A piece that does not
    fit is cut at its last line boundary in reach; the first piece is never dropped for want of one
    (cut at a space, else at the limit), so a budget below the best answer still returns its head."""

    __slots__ = ("limit", "used", "cut")

    def __init__(self, limit: int | None) -> None:
        self.limit = limit
        self.used = 0          # tokens taken
        self.cut = False       # whether any piece was shortened or refused

    def take(self, text: str) -> str:
        """`text` whole, or its head that fits (marking the budget cut), or "" when nothing fits."""
        cost = estimate_tokens(text)
        if self.limit is None or self.used + cost <= self.limit:
            self.used += cost
            return text
        self.cut = True
        head = _fit(text, (self.limit - self.used) * CHARS_PER_TOKEN, first=self.used == 0)
        self.used += estimate_tokens(head)
        return head


def _fit(content: str, room: int, first: bool) -> str:
    """The longest head of `content` within `room` characters ending at a line boundary; with none in
    reach, the `first` piece is cut at a space, or at `room`, and any other gives nothing."""
    if room <= 0:
        return ""
    text = content[:room]
    cut = text.rfind("\n")
    if cut > 0:
        return text[:cut]
    if not first:
        return ""
    space = text.rfind(" ")
    return text[:space] if space > 0 else text
