"""Recall at a prompt: the few past events of this workspace most relevant to it, or nothing.

`rank` is the one place the ranking is asked (today the in-process token-cosine view, whose score is
the cosine of the prompt and the event). Silence is decided on the best score: under `THRESHOLD`,
nothing is injected; over it, the events scoring at least `FLOOR` follow it, best first, as the
budget allows. THRESHOLD is chosen by leave-one-conversation-out cross-validation on the LoCoMo dev
split (bench/locomo_recall.py --cv); when the ranking's scores change meaning, re-run it and change it.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Container, Iterable, Iterator

from urchin.recall.frame import Line, event_text
from urchin.recall.reader import Reader
from urchin.search.query import Filters, Hit

__all__ = ["THRESHOLD", "FLOOR", "MAX_ITEMS", "rank", "prompt_lines"]

THRESHOLD = 0.07            # the best score must reach it: bench/locomo_recall.py --cv (README: recall)
FLOOR = 0.04                # the others must reach this (costs no evidence on LoCoMo; keeps weak matches out)
MAX_ITEMS = 15
CANDIDATES = 40             # ranked before the current session, injected ids and excluded sources are dropped
WIDTH = 240                 # characters of content per item
MAX_PROMPT_CHARS = 2000     # a pasted log is ranked on its start
_SYNTAX = re.compile(r'["]|(?<!\S)-(?=\S)')   # websearch syntax a prompt does not mean: phrases, -words


def rank(reader: Reader, prompt: str, workspace: str, since_ms: int, limit: int = CANDIDATES) -> Iterable[Hit]:
    """The workspace's events best first, each with its score: the one ranking recall uses (each
    event read from the journal as it is taken)."""
    query = _SYNTAX.sub(" ", prompt[:MAX_PROMPT_CHARS]).strip()
    if not query:
        return []
    return reader.ranked(query, Filters(workspace=workspace), since_ms, limit)


def prompt_lines(reader: Reader, prompt: str, workspace: str, since_ms: int, *, current: str | None,
                 injected: Container[str], excluded: Collection[str],
                 threshold: float | None = None, floor: float = FLOOR) -> Iterator[Line]:
    """Lines for the events that may be given, best first, when the best reaches `threshold` (default
    THRESHOLD), else none; the others must reach `floor`. None of the current session, none injected
    into it before, none from an excluded source, no audit record. Made as they are taken: `pack`
    stops at the first that does not fit the budget, and a line's text (its whole content neutralised
    and checked for instructions) is most of a prompt's cost after the ranking."""
    made = 0
    gate = THRESHOLD if threshold is None else threshold
    for hit in rank(reader, prompt, workspace, since_ms):
        event, score = hit.event, hit.score or 0.0
        if score < (gate if not made else floor):
            break
        if (event.workspace != workspace or (current and event.session == current) or event.id in injected
                or event.source in excluded or event.source == "urchin"):
            continue
        text, flag = event_text(event, WIDTH)
        reason = f"relevant to the prompt ({score:.2f})" + ("; flagged" if flag else "")
        yield Line(event.id, score, reason, text, "event", (event.id,))
        made += 1
        if made >= MAX_ITEMS:
            break
