"""One human rendering per result type, shared by the CLI's text output and the MCP tools' text.

Each takes the result's `to_dict()` (or the object that has one) and returns plain text: no Python
reprs (`None`, `{...}`), sizes in human units, and proper singular and plural.
"""

from __future__ import annotations

# `collections.abc`'s very Mapping, from the module it re-exports: `collections` itself (operator,
# reprlib, ...) is most of `urchin context`'s fast path (daemon/fastcalls.py) otherwise
from _collections_abc import Mapping

from urchin.errors import ValidationError
from urchin.words import plural

TYPE_CHECKING = False   # not `typing`'s (see urchin/contract/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

__all__ = ["plural", "size", "value", "render_document_search", "render_document", "render_events", "render_event",
           "render_ingest",
           "render_status", "render_overview", "render_memory", "render_memories", "render_context", "rejection"]


def size(count: float) -> str:
    """Bytes for people: `512 B`, `3.4 KB`, `12.0 MB`, `1.2 GB`."""
    amount = float(count)
    for unit in ("B", "KB", "MB", "GB"):
        if amount < 1000 or unit == "GB":
            return f"{amount:.0f} {unit}" if unit == "B" else f"{amount:.1f} {unit}"
        amount /= 1000
    return f"{amount:.1f} GB"


def value(item: Any) -> str:
    """A JSON value for people: `none` for null, `yes`/`no`, nested objects as `key value, ...`."""
    if item is None:
        return "none"
    if isinstance(item, bool):
        return "yes" if item else "no"
    if isinstance(item, Mapping):
        return ", ".join(f"{k} {value(v)}" for k, v in item.items()) or "none"
    if isinstance(item, list | tuple):
        return ", ".join(value(v) for v in item) or "none"
    return str(item)


def render_events(result: Any) -> str:
    """Search results one per line; ranked results first say which mode ran, and any notes."""
    from urchin.search.query import one_line

    ranked = result.mode not in ("substring", "recent", "session", "team")
    team = result.mode == "team"   # every device's events: each line names the machine it came from
    lines: list[str] = []
    for hit in result.hits:
        lines.append(one_line(hit.event, score=hit.score if ranked else None, device=team))
        if ranked and getattr(hit, "explain", None):
            lines.append(_explained(hit.explain))
    if ranked:
        hint = [f"hint: {result.hint}"] if getattr(result, "weak", False) and result.hint else []
        lines[:0] = [f"mode: {result.mode}", *(f"note: {note}" for note in result.notes), *hint]
    return "\n".join(lines)


def _explained(why: Mapping[str, Any]) -> str:
    """`urchin semantic --explain`'s line under a hit: the evidence, the parts adding up to raw, the map."""
    evidence = ", ".join(f"{k} {v}" if isinstance(v, bool) else f"{k} {v:.3f}"
                         for k, v in why.get("evidence", {}).items() if v)
    parts = " ".join(f"{k} {v:+.3f}" for k, v in why.get("parts", {}).items() if v)
    capped = f"; {why['capped']}" if why.get("capped") else ""
    return (f"  explain ({why.get('scale')}): {evidence or 'no evidence'}; raw = {parts or '0'} = "
            f"{why.get('raw', 0):.3f}; {why.get('map', '')}{capped}")


def older_note(hours: float, older: Mapping[str, Any]) -> str:
    """`urchin search` found nothing in its window but the block index found an older match (stderr;
    the fast client's `daemon/fastclient.py` calls it too)."""
    window = str(int(hours)) if float(hours).is_integer() else str(hours)
    return (f"no match in the last {window} h; older matches exist (the newest at {older['timestamp']}): "
            f"try --hours {older['hours']}")


def render_event(event: Mapping[str, Any]) -> str:
    import orjson  # here: the fast client renders a context with the rest of this module, and no orjson

    return orjson.dumps(event, option=orjson.OPT_INDENT_2).decode()


def render_ingest(result: Mapping[str, Any]) -> str:
    """`appended <id>`, `duplicate <id>`; a write not stored names no id of its own (an id made up for it
    leads nowhere): `suppressed: ephemeral mode, nothing stored`, `suppressed: <id> was forgotten`."""
    status = str(result["status"])
    if status == "suppressed: forgotten":
        return f"suppressed: {result['id']} was forgotten, nothing stored"
    if status.startswith("suppressed"):
        return f"{status}, nothing stored"
    return f"{status} {result['id']}"


def rejection(reason: str | None) -> ValidationError:
    """A rejected write as the error HTTP's 422 gives: `field: rule`, the field named."""
    field, sep, rule = (reason or "event: rejected").partition(": ")
    return ValidationError(field, rule) if sep and " " not in field else ValidationError("", reason or "rejected")


def render_status(info: Mapping[str, Any]) -> str:
    """`key: value` lines; nested blocks indented one level, null as `none`."""
    lines: list[str] = []
    for key, item in info.items():
        if key == "sizeBytes" and isinstance(item, int):
            lines.append(f"{key}: {size(item)}")
        elif isinstance(item, Mapping) and item:
            lines.append(f"{key}:")
            lines += [f"  {k}: {value(v) if v != '' else 'none'}" for k, v in item.items()]
        else:
            lines.append(f"{key}: {value(item) if item != '' else 'none'}")
    return "\n".join(lines)


def render_overview(info: Mapping[str, Any]) -> str:
    lines: list[str] = []
    for root in info.get("roots", []):
        lines.append(f"{root['name']} ({root['path']}): {plural(root['files'], 'file')} in "
                     f"{plural(root['folders'], 'folder')}, {size(root['bytes'])}")
        for folder in root.get("largestFolders", []):
            lines.append(f"  {folder['folder']}: {plural(folder['files'], 'file')}, {size(folder['bytes'])}")
        changes = root.get("recentChanges", [])[:5]
        if changes:
            lines.append("  recently changed:")
            lines += [f"    {change['updatedAt']}  {change['path']}" for change in changes]
    journal = info.get("journal")
    if journal:
        span = (f" ({journal['firstTimestamp']} to {journal['lastTimestamp']})"
                if journal.get("firstTimestamp") else "")
        lines.append(f"journal: {plural(journal['events'], 'event')}{span}")
    lines += [f"memory {m['slug']}: {m['title']} — use when: {m['useWhen']}" for m in info.get("memories", [])]
    for source in info.get("sources", []):
        last = f"last run {source['lastRun']}" if source.get("lastRun") else "never run"
        lines.append(f"source {source['name']}: {plural(source.get('events') or 0, 'event')}, {last}")
    if "index" in info:
        lines.append("index: " + value(info["index"]))
    return "\n".join(lines)


def render_memories(items: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(f"{m['slug']}: {m['title']} ({plural(m['members'], 'member')}) — use when: {m['useWhen']}"
                     for m in items)


def render_memory(result: Mapping[str, Any]) -> str:
    parts = [f"# {result['title']} — use when: {result['useWhen']}"]
    parts += [f"## {p['member']}\n{p['content']}" for p in result["members"]]
    parts += [f"[coverage] {c['member']}: {c['status']} ({c['reason']})" for c in result["coverage"]]
    return "\n\n".join(parts)


def render_context(result: Mapping[str, Any]) -> str:
    """`search_context` and `query_source`: cited excerpts, best first, then what was searched."""
    lines: list[str] = []
    for n, item in enumerate(result["results"], 1):
        where = f" @{item['device']}" if item.get("device") else ""   # team: the machine that fed it
        lines.append(f"[{n}] {item['citation']} (score {item['score']:.3f}, {item.get('source')}{where})")
        lines.append(item["content"])
        if "explain" in item:
            legs = ", ".join(f"{x['leg']}/{x['origin']} #{x['rank']} +{x['contribution']:.4f}"
                             for x in item["explain"]["legs"])
            why = item["explain"]
            parts = " ".join(f"{k} {v:+.3f}" for k, v in why.get("parts", {}).items() if v)
            lines.append(f"explain: {legs}; fused {why['fused']:.4f}, rank {why.get('rank', 0):.3f}; "
                         f"raw = {parts or '0'} = {why.get('raw', 0):.3f}; {why.get('map', '')}")
    coverage = result["coverage"]
    legs = ", ".join(f"{leg['leg']}/{leg['origin']} {plural(leg['candidates'], 'candidate')}"
                     for leg in coverage.get("legs", []))
    lines.append(f"coverage: {plural(len(result['results']), 'result')}, {coverage.get('strategy')} "
                 f"({legs or 'no legs'}), ~{plural(result.get('tokensUsed', 0), 'token')}")
    lines += [f"coverage: skipped {item}" for item in coverage.get("skipped", [])]
    if coverage.get("unheldPhrases"):
        lines.append(f"coverage: {coverage['unheldPhrases']['note']}")
    if coverage.get("index", {}).get("note"):
        lines.append(f"coverage: {coverage['index']['note']}")
    if result.get("truncated"):
        lines.append("coverage: truncated at the token budget")
    return "\n".join(lines)


def render_document_search(result: Mapping[str, Any]) -> str:
    """textrawl's `search`: the compact text; structuredContent always carries the whole verbose object."""
    lines = []
    notes = [f"note: {note}" for note in result.get("notes", [])]
    if "counts" not in result:
        lines.append(f"{plural(result['totalResults'], 'document')} for {result['query']!r}")
        for n, d in enumerate(result["results"], 1):
            lines.append(f"[{n}] {d['citation']} ({d['sourceType']} {d['contentType']}, score {d['score']:.3f})")
            lines.append(d["content"])
        return "\n".join(lines + notes)
    counts = result["counts"]
    lines.append(f"{plural(counts['documents'], 'document')}, {plural(counts['memories'], 'memory', 'memories')}, "
                 f"{plural(counts['conversations'], 'conversation')} for {result['query']!r}")
    for n, item in enumerate(result["results"], 1):
        data = item["data"]
        label = data.get("citation") or f"session {data.get('sessionKey')}: {data.get('title')}"
        lines.append(f"[{n}] {item['type']} {label} (score {item['score']:.3f})")
        if item["type"] == "conversation":
            lines += [t["content"] for t in data["turns"]]
        else:
            lines.append(data["content"])
    return "\n".join(lines + notes)


def render_document(result: Mapping[str, Any]) -> str:
    """textrawl's `get_document`: the document's text, its chunks' line ranges when asked for."""
    doc = result["document"]
    head = f"{doc['id']} ({doc['sourceType']}, {doc['updatedAt']}"
    head += f", {doc['contentHash']})" if doc.get("contentHash") else ")"
    lines = [head, doc["content"]]
    if doc.get("truncated"):
        lines.append(f"(cut: {doc['fullLength']} characters in all)")
    for chunk in result.get("chunks", []):
        where = f" lines {chunk['startLine']}-{chunk['endLine']}" if "startLine" in chunk else ""
        lines.append(f"chunk {chunk['index']} {chunk['id']}{where}")
    return "\n".join(lines)
