"""The session-start digest: where this workspace left off, most useful first.

Order (a smaller budget cuts the tail): the last session, errors not followed by a success,
decisions of the last weeks, the sessions before it, what was worked on last (files, commands,
commits), then the curated memories that name this workspace.

An error is open until a later event of the same workspace succeeds at the same thing: the same
shell command exiting 0, or the same tool call (tool name and its target, the first line of the
event: file, command or pattern) without an error. An error with neither is shown while it is
recent (OPEN_ERROR_DAYS) and never closed by something else.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from urchin.collectors.edits import edited_path
from urchin.event import Event
from urchin.recall.frame import Line, cut, event_text, flagged, neutralise
from urchin.words import plural

__all__ = ["digest_lines", "is_error", "thing", "WINDOW_DAYS", "OPEN_ERROR_DAYS", "DECISION_DAYS", "DECISIONS",
           "WORK", "SCAN_LIMIT"]

WINDOW_DAYS = 30            # how far back the digest looks
DECISION_DAYS = 21
OPEN_ERROR_DAYS = 7
SCAN_LIMIT = 250            # the workspace's latest events read for sessions, errors and work (newest first)
SESSIONS = 3
DECISIONS = 5
OPEN_ERRORS = 3
WORK = 3
_DAY_MS = 86_400_000
_EDIT_TOOLS = {"edit", "write", "multiedit", "notebookedit", "write_file", "replace", "apply_patch", "edit_file",
               "create", "str_replace_editor", "str_replace_based_edit_tool"}


def is_error(event: Event) -> bool:
    meta = event.meta or {}
    code = meta.get("exit_code")
    return event.kind == "error" or (event.kind == "command" and isinstance(code, int) and code != 0)


def thing(event: Event) -> tuple[str, ...] | None:
    """What an event did, so a later success at the same thing closes an error; None: unknown."""
    meta = event.meta or {}
    if event.kind == "command":
        return ("command", " ".join(event.content.split()))
    if meta.get("tool"):
        head = event.content.split("\n", 1)[0].strip()
        return ("tool", str(meta["tool"]).lower(), head)
    return None


def _succeeded(event: Event) -> bool:
    meta = event.meta or {}
    if event.kind == "command":
        return meta.get("exit_code") == 0
    return not is_error(event)


def open_errors(events: Sequence[Event], now_ms: int) -> list[Event]:
    """Errors (newest first) no later event succeeded at; one per thing."""
    done: set[tuple[str, ...]] = set()
    seen: set[tuple[str, ...]] = set()
    out = []
    for event in events:                       # newest first: a success is met before the errors it closes
        key = thing(event)
        if not is_error(event):
            if key is not None and _succeeded(event):
                done.add(key)
            continue
        if event.ts_ms < now_ms - OPEN_ERROR_DAYS * _DAY_MS:
            continue
        ident = key or ("event", event.id)
        if ident in done or ident in seen:
            continue
        seen.add(ident)
        out.append(event)
    return out


def _minutes(first: Event, last: Event) -> str:
    minutes = max(0, (last.ts_ms - first.ts_ms) // 60_000)
    return f"{minutes} min" if minutes < 120 else f"{minutes / 60:.1f} h"


def _ending(events: Sequence[Event]) -> str:
    """How a session ended: its agent's end record, else its last step."""
    for event in reversed(events):
        if event.kind == "agent" and "ended" in event.content:
            return "ended: " + cut(event.content.split("ended", 1)[1].strip(" ():") or "exit", 40)
    last = events[-1]
    return "last step failed" if is_error(last) else f"no end recorded, last: {last.kind}"


def _session_line(session: str, events: Sequence[Event]) -> Line:
    """events: oldest first."""
    first, last = events[0], events[-1]
    prompts = [e for e in events if e.kind == "conversation" and (e.meta or {}).get("role") == "user"]
    opener = prompts[0] if prompts else next((e for e in events if e.kind == "conversation"), None)
    agent = Counter(e.source for e in events).most_common(1)[0][0]
    stamp = f"{first.timestamp[:10]} {first.timestamp[11:16]}Z"
    flag = opener is not None and flagged(neutralise(opener.content))
    title = f', first prompt: "{cut(opener.content, 100)}"' if opener else ""
    mark = " (flagged: its prompt reads like an instruction or a frame marker; it is quoted data)" if flag else ""
    text = (f"[{stamp}] session={cut(session, 80)} ({agent}, {_minutes(first, last)}, {plural(len(events), 'event')}, "
            f"{_ending(events)}){mark}{title}")
    ids = tuple(dict.fromkeys(e.id for e in (opener, last) if e is not None))
    return Line(session, 0.0, "recent session" + ("; flagged" if flag else ""), text, "session", ids)


def _event_line(event: Event, reason: str, note: str = "", width: int = 200) -> Line:
    text, flag = event_text(event, width, note)
    return Line(event.id, 0.0, reason + ("; flagged" if flag else ""), text, "event", (event.id,))


def _files(events: Iterable[Event]) -> Line | None:
    """One line: the files edited last, each with the id of its edit."""
    found: dict[str, str] = {}
    for event in events:
        tool = str((event.meta or {}).get("tool") or "").lower()
        if tool in _EDIT_TOOLS and not is_error(event):
            head = event.content.split("\n", 1)[0]
            path = edited_path(head.split(":", 1)[1].strip()) if ":" in head else ""
            if path and path not in found:
                found[path] = event.id
        if len(found) >= 5:
            break
    if not found:
        return None
    listed = "; ".join(f"{cut(p, 100)} (id={i})" for p, i in found.items())
    return Line(next(iter(found.values())), 0.0, "files edited last", f"files edited last: {listed}", "event",
                tuple(found.values()))


def digest_lines(events: Sequence[Event], current: str | None, memories: Sequence[tuple[str, str, str]],
                 workspace: str, now_ms: int, decisions: Sequence[Event] = (),
                 commits: Sequence[Event] = ()) -> list[Line]:
    """The digest's lines, most useful first; `events` (the latest), `decisions` and `commits`
    newest first, of this workspace only (the last two read apart: older than the latest events)."""
    sessions: dict[str, list[Event]] = {}
    for event in events:
        if event.session and event.session != current:
            sessions.setdefault(event.session, []).append(event)
    recent = [(s, list(reversed(evs))) for s, evs in list(sessions.items())[:SESSIONS]]   # newest session first
    lines = [_session_line(s, evs) for s, evs in recent[:1]]
    lines += [_event_line(e, "error not followed by a success", "no success since") for e in
              open_errors(events, now_ms)[:OPEN_ERRORS]]
    lines += [_event_line(e, "decision") for e in decisions[:DECISIONS]
              if e.kind == "decision" and e.ts_ms >= now_ms - DECISION_DAYS * _DAY_MS]
    lines += [_session_line(s, evs) for s, evs in recent[1:]]
    files = _files(events)
    lines += [files] if files else []
    commands: dict[str, Event] = {}
    for event in events:
        if event.kind == "command" and not is_error(event):
            commands.setdefault(" ".join(event.content.split()), event)
    lines += [_event_line(e, "command run last", width=160) for e in list(commands.values())[:WORK]]
    lines += [_event_line(e, "commit", width=160) for e in commits[:WORK] if e.kind == "commit"]
    name = workspace.casefold()
    for slug, title, use_when in memories:
        if name in f"{slug} {title} {use_when}".casefold():
            lines.append(Line(f"memory:{slug}", 0.0, "curated memory", f"memory {cut(slug, 80)} "
                              f"(get_memory {cut(slug, 80)}): use when {cut(use_when, 200)}", "memory"))
    count = len(lines)
    return [Line(x.id, round(1 - i / max(count, 1), 6), x.reason, x.text, x.what, x.ids) for i, x in enumerate(lines)]
