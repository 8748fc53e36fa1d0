"""Which agent hook events take context, and the exact JSON each agent reads it from.

Claude Code (`SessionStart`, `UserPromptSubmit`), Gemini CLI (`SessionStart`, `BeforeAgent`) and
Codex (`SessionStart`, `UserPromptSubmit`) read `hookSpecificOutput.additionalContext` from a hook's
stdout, with `hookEventName` naming the event. Copilot CLI's command hooks cannot add context from
`sessionStart` or `userPromptSubmitted` (their output is not processed): nothing is printed for it.
Kept apart from `urchin.recall` so a hook with a daemon imports none of recall's modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["CONTEXT_EVENTS", "RecallAsk", "context_ask", "agent_output", "PROMPT_CHARS"]

PROMPT_CHARS = 4000         # what recall's ranking reads of a prompt (a pasted log is ranked on its start)

# agent -> hook event -> "session" (the session-start digest) or "prompt"
CONTEXT_EVENTS: dict[str, dict[str, str]] = {
    "claude": {"SessionStart": "session", "UserPromptSubmit": "prompt"},
    "gemini": {"SessionStart": "session", "BeforeAgent": "prompt"},
    "codex": {"SessionStart": "session", "UserPromptSubmit": "prompt"},
}


@dataclass(frozen=True, slots=True)
class RecallAsk:
    event: str                  # the agent's hook event name, echoed in its output
    session: str | None
    cwd: str | None
    prompt: str | None          # None: session start


def context_ask(agent: str, payload: Mapping[str, Any]) -> RecallAsk | None:
    """What to recall for this hook payload; None when its event takes no context."""
    event = payload.get("hook_event_name")
    mode = CONTEXT_EVENTS.get(agent, {}).get(event) if isinstance(event, str) else None
    if mode is None:
        return None
    prompt = payload.get("prompt") if mode == "prompt" else None
    if mode == "prompt" and (not isinstance(prompt, str) or not prompt.strip()):
        return None
    session = payload.get("session_id")
    cwd = payload.get("cwd")
    return RecallAsk(str(event), str(session) if session else None, cwd if isinstance(cwd, str) else None,
                      prompt[:PROMPT_CHARS] if isinstance(prompt, str) else None)


def agent_output(ask: RecallAsk, text: str) -> bytes:
    """The agent's documented JSON for `text`, or nothing for an empty block."""
    if not text:
        return b""
    import orjson

    return orjson.dumps({"hookSpecificOutput": {"hookEventName": ask.event, "additionalContext": text}})
