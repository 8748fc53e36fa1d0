"""`mode: live`: cataloged files (over the size cap, bodies not stored) read and matched at query time.

Files are read smallest first within a per-query byte budget; each is chunked like an indexed file
and its chunks ranked by the keyword leg's logic (any query word; phrases and -words must hold).
"""

from __future__ import annotations

import math
from collections import Counter
from datetime import UTC
from typing import TYPE_CHECKING, Any

from urchin.errors import UrchinError
from urchin.hybrid.base import Filter, LegHit
from urchin.hybrid.files import FILE_KIND, FILES_SOURCE, HEADING_JOIN
from urchin.hybrid.sparse import tokens
from urchin.params.context import ContextParams
from urchin.search.terms import terms_of
from urchin.search.websearch import parse
from urchin.workspace.chunking import chunk_text

if TYPE_CHECKING:
    from urchin.workspace.access import FileAccess

__all__ = ["live_leg"]


def live_leg(backend: Any, p: ContextParams, flt: Filter, files: FileAccess | None,
             limit: int) -> tuple[list[LegHit] | None, dict[str, dict[str, Any]], dict[str, Any]]:
    """(ranked hits or None when no file could be searched, rows by chunk id, the coverage block)."""
    cov: dict[str, Any] = {"budgetBytes": p.live_byte_budget, "bytesRead": 0, "read": [], "skipped": []}
    only_roots = bool(flt.roots) and FILES_SOURCE not in flt.sources     # some roots' files, not every root's
    note = _no_live_reads(flt)
    if note is not None:
        cov["note"] = note
        return None, {}, cov
    query = parse(p.query)
    wanted = {t for w in query.words for t in tokens(w)}
    phrases = [ph.lower() for ph in query.phrases]
    out_phrases = [ph.lower() for ph in query.excluded_phrases]
    excluded = terms_of(query.excluded)
    names = [flt.workspace] if flt.workspace else (list(flt.roots) if only_roots else None)
    scored: list[tuple[float, str]] = []
    rows: dict[str, dict[str, Any]] = {}
    budget = p.live_byte_budget
    roots = {r.name: r for r in files.roots} if files is not None else {}
    for entry in backend.files("cataloged", names):
        doc_id = f"{entry['root']}/{entry['path']}"
        if _filtered_out(entry, flt, only_roots):
            continue
        root = roots.get(entry["root"])
        if root is None or files is None:
            cov["skipped"].append({"path": doc_id, "reason": "unreadable: its root is no longer configured"})
            continue
        if entry["size"] > p.live_byte_budget:
            cov["skipped"].append({"path": doc_id, "reason": f"size: {entry['size']} bytes exceed the whole budget"})
            continue
        if entry["size"] > budget:
            cov["skipped"].append({"path": doc_id, "reason": "budget: the per-query byte budget is spent"})
            continue
        try:
            # the one resolver, with the serving policy: a file that became a secret store or
            # ignored since it was cataloged is not read
            data = files.read_bytes(files.locate_in(root, entry["path"]), budget + 1)
            if len(data) > budget:     # it grew since it was cataloged: a cut could halve a secret
                cov["skipped"].append({"path": doc_id, "reason": "budget: the file grew past the byte budget"})
                continue
            text = files.redact(data.decode("utf-8"))
        except (OSError, UnicodeDecodeError, UrchinError) as exc:
            cov["skipped"].append({"path": doc_id, "reason": f"unreadable: {exc}"})
            continue
        budget -= len(data)
        cov["bytesRead"] += len(data)
        cov["read"].append(doc_id)
        mtime = entry["mtime"].astimezone(UTC)
        for n, chunk in enumerate(chunk_text(entry["path"], text)):
            lowered = chunk.text.lower()
            if (phrases and not all(ph in lowered for ph in phrases)) or any(ph in lowered for ph in out_phrases):
                continue
            counts = Counter(tokens(chunk.retrieval_text(doc_id)))
            if excluded & counts.keys():
                continue
            score = sum(1.0 + math.log(counts[t]) for t in wanted if counts.get(t))
            if score <= 0 and not (phrases and not wanted):
                continue
            cid = f"{doc_id}#{n}"
            rows[cid] = {"chunk_id": cid, "doc_id": doc_id, "doc_type": "file", "source": FILES_SOURCE,
                         "kind": FILE_KIND, "workspace": entry["root"], "session": None,
                         "title": HEADING_JOIN.join(chunk.heading_path) or None, "tags": [], "content": chunk.text,
                         "occurred_at": mtime, "journal_offset": None, "path": entry["path"],
                         "heading_path": list(chunk.heading_path), "start_line": chunk.start_line,
                         "end_line": chunk.end_line, "live": True, "content_hash": entry.get("hash")}
            scored.append((score, cid))
    scored.sort(key=lambda item: (-item[0], item[1]))
    hits = [LegHit(cid, score, FILE_KIND, rows[cid]["occurred_at"]) for score, cid in scored[:limit]]
    if not cov["read"]:
        return None, {}, cov
    return hits, {h.chunk_id: rows[h.chunk_id] for h in hits}, cov


def _no_live_reads(flt: Filter) -> str | None:
    """Why the filters leave no file to read live (None: some may be)."""
    if flt.sources and FILES_SOURCE not in flt.sources and not flt.roots:
        return "no live reads: the sources filter excludes files"
    if flt.kinds and FILE_KIND not in flt.kinds:
        return "no live reads: the kinds filter excludes files"
    return None


def _filtered_out(entry: dict[str, Any], flt: Filter, only_roots: bool) -> bool:
    """A cataloged file outside the roots asked for, or modified outside the time window."""
    if only_roots and entry["root"] not in flt.roots:
        return True
    return bool((flt.since and entry["mtime"] < flt.since) or (flt.until and entry["mtime"] >= flt.until))
