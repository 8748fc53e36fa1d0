"""Related words of software work, from a reviewed word list shipped with Urchin (`thesaurus.txt`).

No model, no network: a query about "authentication" is joined by "login", "oauth", "sso", ... at a
lower weight than its own words, so an event that says "We switched login to OAuth with PKCE" is
found although it shares no word with the question. The list covers what coding-agent journals talk
about (auth, payments, databases, deploys, CI, tests, performance, incidents, mobile, docs, search,
...); the associations learned from the journal itself (`assoc.py`) cover the rest.

Every word is stemmed by the index's tokeniser when the list is read, so "authenticate",
"authentication" and "authenticated" are one term, as they are in the index.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from importlib import resources

from urchin.search.terms import tokenize

__all__ = ["Thesaurus", "default"]


class Thesaurus:
    """Groups of related terms; `expand` gives a query's related terms, fairly across its terms."""

    def __init__(self, groups: Iterable[tuple[Iterable[str], Iterable[str]]]) -> None:
        """`groups`: (words, instances) pairs; see the module's docstring and `thesaurus.txt`."""
        self.groups: list[tuple[tuple[str, ...], tuple[str, ...]]] = []
        self._of: dict[str, list[tuple[int, bool]]] = {}  # term -> (group, is an instance there)
        for words, instances in groups:
            general = tuple(dict.fromkeys(t for w in words for t in tokenize(w)))
            named = tuple(t for t in dict.fromkeys(t for w in instances for t in tokenize(w)) if t not in general)
            if len(general) + len(named) < 2 or not general:
                continue
            for term in general:
                self._of.setdefault(term, []).append((len(self.groups), False))
            for term in named:
                self._of.setdefault(term, []).append((len(self.groups), True))
            self.groups.append((general, named))

    @classmethod
    def parse(cls, text: str) -> Thesaurus:
        """Lines "name: word word ... | instance instance ..."; blank lines and # comments are skipped."""
        groups = []
        for line in text.splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                words, _, instances = line.partition(":")[2].partition("|")
                groups.append((words.split(), instances.split()))
        return cls(groups)

    def __len__(self) -> int:
        return len(self.groups)

    def related(self, term: str) -> list[str]:
        """The terms related to `term`, nearest first (group order), itself excluded: a group's words are
        related to each other and to its instances; an instance only to the group's words."""
        out: list[str] = []
        for g, instance in self._of.get(term, ()):
            general, named = self.groups[g]
            out += [t for t in general if t != term]
            if not instance:
                out += [t for t in named if t != term]
        return out

    def expand(self, query_terms: Iterable[str], *, n: int = 10) -> list[tuple[str, float]]:
        """Up to `n` (term, weight) related to the query, the query's own terms excluded; taken in turn
        from each query term's list, so no one word of the question takes every slot. A term related
        to several of the query's terms comes first, weight 1; the rest have weight 1 / (1 + rank / 8)
        in their own list (the first words of a group are its closest)."""
        own = dict.fromkeys(query_terms)     # in order, and a set for the test below
        lists = [[t for t in dict.fromkeys(self.related(q)) if t not in own] for q in own]
        lists = [x for x in lists if x]
        if not lists:
            return []
        counts: dict[str, int] = {}
        for x in lists:
            for t in x:
                counts[t] = counts.get(t, 0) + 1
        out: dict[str, float] = {t: 1.0 for t, c in counts.items() if c > 1}
        for rank in range(max(map(len, lists))):
            for x in lists:
                if len(out) >= n:
                    return list(out.items())[:n]
                if rank < len(x) and x[rank] not in out:
                    out[x[rank]] = 1.0 / (1.0 + rank / 8)
        return list(out.items())[:n]


@cache
def default() -> Thesaurus:
    """The shipped list (read once)."""
    return Thesaurus.parse(resources.files("urchin.search").joinpath("thesaurus.txt").read_text("utf-8"))
