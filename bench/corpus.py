"""Synthetic agent-like events for the redaction benchmark: ~1% carry a (fake) secret.

Text is built from fragments seen in real coding-agent journals: prose, shell commands, test output,
stack traces, JSON tool results, diffs. Fake secrets are assembled at runtime, never stored whole.
"""

from __future__ import annotations

import random
import string
from typing import Any

from urchin.event import Event

__all__ = ["fake_secret", "make_events"]

_PROSE = [
    "I'll look at the failing test first and then update the journal reader.",
    "The reverse scan reads 64 KiB blocks from the end and splits on newlines.",
    "Let me check how the token-cosine search handles an empty query before changing it.",
    "The user wants the daemon to restart cleanly after a crash; the pid file is stale.",
    "We decided to keep the journal as the single source of truth and rebuild views from it.",
    "That password prompt comes from git when the credential helper is missing.",
    "Context window is at 72%, so I'll summarise the decisions so far.",
    "The embedding model returns 384-dim vectors; cosine similarity is a plain dot product.",
    "Tests passed locally but CI failed on the Windows runner because of path separators.",
    "max_tokens: 4096 is plenty for this summary; token count so far is 1830.",
    "Refactored the follower so it resumes from the stored byte offset after a restart.",
    "Looking at src/urchin/search/tokens.py, the stemmer drops trailing 's' too eagerly.",
]
_COMMANDS = [
    "git status --short && git diff --stat",
    "pytest tests/test_journal.py -x -q",
    "rg -n 'def follow' urchin/",
    "ls -la ~/.local/share/urchin/journal",
    "docker compose up -d postgres",
    "curl -s http://127.0.0.1:8765/health",
    "npm run build -- --watch",
    "python -m urchin import ~/exports/claude-2026-05.jsonl",
    "git log --oneline -n 5",
    "cat pyproject.toml | head -40",
]
_OUTPUTS = [
    "===== 42 passed, 1 skipped in 3.21s =====",
    "Traceback (most recent call last):\n  File \"/home/dev/urchin/urchin/journal.py\", line 212, in read_from\n"
    + "    raise JournalError(f\"cannot read {path}\")\nurchin.errors.JournalError: cannot read /tmp/x/events.jsonl",
    "3f9a2c1d8e7b6a5f4e3d2c1b0a9f8e7d6c5b4a3f Fix offset drift in reverse scan\n"
    + "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678 Add follower resume",
    '{"id": "0192f5a4-7c3e-7d21-9b8a-2f4e6c8d0a1b", "status": "ok", "took_ms": 12}',
    " M urchin/journal.py\n M tests/test_journal.py\n?? bench/bench_journal.py",
    "diff --git a/urchin/config.py b/urchin/config.py\n@@ -12,7 +12,8 @@ import tomllib\n"
    + "-    home = Path(x)\n+    home = Path(x).expanduser()",
    "Successfully installed orjson-3.10.7 httpx-0.27.2 click-8.1.7",
    "ERROR: relation \"chunks\" does not exist at character 15",
    'img = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAC"'
    + 'hwGA60e6kgAAAABJRU5ErkJggg=="',
]
_SOURCES = ["claude", "copilot", "codex", "shell", "git", "gemini"]
_KINDS = ["conversation", "tool_use", "command", "note", "commit"]


def _rand(alphabet: str, n: int, rng: random.Random) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def fake_secret(rng: random.Random) -> str:
    """One line carrying a fake secret of a random type, in a realistic setting."""
    an = string.ascii_letters + string.digits
    choices = [
        lambda: "export GITHUB_TOKEN=" + "gh" + "p_" + _rand(an, 36, rng),
        lambda: "ANTHROPIC_API_KEY=" + "sk-" + "ant-api03-" + _rand(an + "-_", 93, rng),
        lambda: 'client = OpenAI(api_key="' + "sk-" + "proj-" + _rand(an + "-_", 120, rng) + '")',
        lambda: "aws_access_key_id = " + "AK" + "IA" + _rand(string.ascii_uppercase + string.digits, 16, rng),
        lambda: "curl -H 'Authorization: Bearer " + _rand(an, 40, rng) + "' https://api.example.com/v1/me",
        lambda: "DATABASE_URL=postgres://app:" + _rand(an, 18, rng) + "@db.internal:5432/app",
        lambda: '{"password": "' + _rand(an + "!#%", 14, rng) + '", "user": "admin"}',
        lambda: "SLACK_BOT=" + "xo" + "xb-" + _rand(string.digits, 12, rng) + "-" + _rand(an, 24, rng),
    ]
    return rng.choice(choices)()


def _content(rng: random.Random, secret: bool) -> str:
    parts = [rng.choice(_PROSE), rng.choice(_PROSE)]
    roll = rng.random()
    if roll < 0.4:
        parts.append("$ " + rng.choice(_COMMANDS))
        parts.append(rng.choice(_OUTPUTS))
    elif roll < 0.7:
        parts.append(rng.choice(_OUTPUTS))
    else:
        parts.append(rng.choice(_PROSE))
    if secret:
        parts.insert(rng.randrange(len(parts) + 1), fake_secret(rng))
    return "\n".join(parts)


def make_events(count: int, secret_share: float = 0.01, seed: int = 7) -> list[Event]:
    rng = random.Random(seed)
    events = []
    for i in range(count):
        meta: dict[str, Any] | None = None
        if rng.random() < 0.5:
            meta = {"tool": rng.choice(["Bash", "Read", "Edit", "Grep"]), "exit_code": rng.choice([0, 0, 1]),
                    "cwd": "/home/dev/projects/urchin"}
        events.append(Event(
            id=f"0192f5a4-7c3e-7d21-9b8a-{i:012x}",
            timestamp="2026-05-04T20:00:00.000Z",
            source=rng.choice(_SOURCES),
            kind=rng.choice(_KINDS),
            content=_content(rng, rng.random() < secret_share),
            title=None if rng.random() < 0.7 else "Fix journal offsets",
            tags=("urchin",) if rng.random() < 0.3 else (),
            meta=meta,
        ))
    return events
