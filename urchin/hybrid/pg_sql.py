"""SQL pieces the PostgreSQL index's parts share: a chunk's key built in SQL, the columns a row is read
back with, the filter clause every leg applies, and vectors as pgvector text literals (explicit casts,
so no type registration is needed). Pure text and standard library: no connection here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from urchin.hybrid.base import MEMORY_KINDS, Filter, split_key
from urchin.hybrid.files import FILES_SOURCE
from urchin.hybrid.schema import TS_CONFIG
from urchin.search.query import AUDIT, hides_audit

__all__ = ["KEY_SQL", "FETCH", "FETCH_SQL", "split_keys", "vector_literal", "filter_clause"]

# A chunk's key (base.chunk_key) from its row; `{t}` is the table's alias and a dot, or ''.
KEY_SQL = "(length({t}device) || ':' || {t}device || {t}chunk_id)"

FETCH = ("chunk_id", "doc_id", "doc_type", "source", "kind", "workspace", "session", "title", "tags", "content",
         "occurred_at", "journal_offset", "path", "heading_path", "start_line", "end_line", "device", "account",
         "content_hash")
# '' is the device of the rows a role with no feeder mapping (the owner, single user) writes with none
FETCH_SQL = ", ".join("NULLIF({t}device, '')" if name == "device" else "{t}" + name for name in FETCH)


def split_keys(keys: Sequence[str]) -> tuple[list[str], list[str]]:
    """Chunk keys as two parallel arrays (devices, chunk ids), for a join on both."""
    pairs = [split_key(key) for key in keys]
    return [d for d, _ in pairs], [c for _, c in pairs]


def vector_literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(f"{float(x):.6g}" for x in vector) + "]"


def filter_clause(flt: Filter, alias: str = "") -> tuple[str, dict[str, Any]]:
    """` AND ...` for every filter in play; the same clause goes inside every leg."""
    clauses: list[str] = []
    args: dict[str, Any] = {}
    if flt.sources or flt.roots:
        # a root named as a source is its files: source files, workspace the root
        either = [f"{alias}source = ANY(%(f_sources)s)"] if flt.sources else []
        either += [f"({alias}source = %(f_files)s AND {alias}workspace = ANY(%(f_roots)s))"] if flt.roots else []
        clauses.append("(" + " OR ".join(either) + ")")
        args.update(f_sources=list(flt.sources), f_files=FILES_SOURCE, f_roots=list(flt.roots))
    if flt.kinds:
        clauses.append(f"{alias}kind = ANY(%(f_kinds)s)")
        args["f_kinds"] = list(flt.kinds)
    if flt.workspace is not None:
        clauses.append(f"{alias}workspace = %(f_workspace)s")
        args["f_workspace"] = flt.workspace
    if flt.session is not None:
        clauses.append(f"{alias}session = %(f_session)s")
        args["f_session"] = flt.session
    if flt.tags:
        clauses.append(f"{alias}tags @> %(f_tags)s::text[]")
        args["f_tags"] = list(flt.tags)
    if flt.since is not None:
        clauses.append(f"{alias}occurred_at >= %(f_since)s")
        args["f_since"] = flt.since
    if flt.until is not None:
        clauses.append(f"{alias}occurred_at < %(f_until)s")
        args["f_until"] = flt.until
    for name in ("devices", "accounts"):
        if getattr(flt, name):
            clauses.append(f"{alias}{name[:-1]} = ANY(%(f_{name})s)")
            args[f"f_{name}"] = list(getattr(flt, name))
    if hides_audit(flt.sources, flt.kinds, flt.session):
        clauses.append(f"NOT ({alias}source = %(f_audit_source)s AND {alias}kind = %(f_audit_kind)s)")
        args.update(f_audit_source=AUDIT[0], f_audit_kind=AUDIT[1])
    if not flt.memories:
        clauses.append(f"{alias}kind <> ALL(%(f_memory_kinds)s)")
        args["f_memory_kinds"] = list(MEMORY_KINDS)
    elif not flt.conversations:
        clauses.append(f"{alias}kind = ANY(%(f_memory_kinds)s)")
        args["f_memory_kinds"] = list(MEMORY_KINDS)
    if flt.constraint:
        # phrases and -exclusions filter the candidates of every leg (and their context neighbours)
        clauses.append(f"{alias}tsv @@ websearch_to_tsquery('{TS_CONFIG}'::regconfig, %(f_constraint)s)")
        args["f_constraint"] = flt.constraint
    return "".join(f" AND {c}" for c in clauses), args
