"""Build the concept set's journal (`events.jsonl`) from `sessions.py`, with the routine lines an
agent's journal is full of (file reads, test runs, git), and check every question shares no term
with its answer. Deterministic: `python bench/concepts/make.py` rewrites the same file."""

from __future__ import annotations

import random
import sys
from datetime import datetime, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent.parent))
sys.path.insert(0, str(HERE))

from questions import QUESTIONS  # noqa: E402
from sessions import SESSIONS  # noqa: E402
from unseen2_questions import QUESTIONS as UNSEEN2_QUESTIONS  # noqa: E402
from unseen2_sessions import SESSIONS as UNSEEN2_SESSIONS  # noqa: E402
from unseen_questions import QUESTIONS as UNSEEN_QUESTIONS  # noqa: E402
from unseen_sessions import SESSIONS as UNSEEN_SESSIONS  # noqa: E402

# name -> (sessions, questions). "main": written with the search code (its "test" split was read
# before the thesaurus was written); "unseen" and "unseen2": each by another author who saw neither
# the search code nor the thesaurus nor the other sets' questions (unseen2 also varies the answers'
# kinds: 17 decisions, 10 notes, 5 commits, 5 conversation turns).
SETS = {"main": (SESSIONS, QUESTIONS), "unseen": (UNSEEN_SESSIONS, UNSEEN_QUESTIONS),
        "unseen2": (UNSEEN2_SESSIONS, UNSEEN2_QUESTIONS)}

from urchin.event import Event  # noqa: E402
from urchin.search.terms import tokenize  # noqa: E402
from urchin.timestamps import format_timestamp  # noqa: E402

ROUTINE = [
    ("tool_use", "Read {file}"), ("tool_use", "Edit {file}"), ("command", "git status -> 2 files changed"),
    ("command", "git diff --stat -> {n} insertions"), ("command", "{test} -> all passed"),
    ("tool_use", "Glob **/*.{ext}"), ("command", "git pull --rebase -> up to date"),
    ("conversation", "{agent}: done, want me to open a PR?"), ("conversation", "dev: yes please"),
    ("command", "gh pr create --fill -> #{n}"), ("note", "{agent}: lint clean after the change"),
]
PROJECT = {
    "billing-api": {"file": ["src/billing/app.py", "src/billing/models.py", "tests/conftest.py"], "ext": "py",
                    "test": "pytest -q"},
    "mobile-app": {"file": ["src/App.tsx", "package.json", "android/app/build.gradle"], "ext": "tsx",
                   "test": "yarn jest"},
    "infra": {"file": ["main.tf", "k8s/values.yaml", "modules/vpc/main.tf"], "ext": "tf",
              "test": "terraform plan"},
    "search-service": {"file": ["ranker/score.go", "cmd/server/main.go", "go.mod"], "ext": "go",
                       "test": "go test ./..."},
    "docs-site": {"file": ["astro.config.mjs", "src/pages/index.md", "package.json"], "ext": "md",
                  "test": "npm run build"},
}


def build(which: str = "main") -> tuple[list[Event], dict[str, str]]:
    """Events in time order, and question key -> answer event id. `which`: a name in SETS ("main" gets
    routine lines added; the others hold their own)."""
    rng = random.Random(15)
    events: list[Event] = []
    answers: dict[str, str] = {}
    sessions = SETS[which][0]
    for number, (project, start, lines) in enumerate(sessions):
        moment = datetime.fromisoformat(start.replace("Z", "+00:00"))
        agent = next((line[1] for line in lines if line[1] != "dev"), "claude")
        session = f"{project}-{number:02d}"
        body = list(lines)
        for _ in range(5 if which == "main" else 0):  # routine lines at random places after the opening prompt
            kind, text = rng.choice(ROUTINE)
            text = text.format(file=rng.choice(PROJECT[project]["file"]), ext=PROJECT[project]["ext"],
                               test=PROJECT[project]["test"], n=rng.randint(3, 400), agent=agent)
            body.insert(rng.randint(1, len(body)), (kind, agent if not text.startswith("dev:") else "dev", text))
        for turn, line in enumerate(body):
            kind, source, content = line[:3]
            moment += timedelta(seconds=rng.randint(20, 240))
            eid = f"{session}-{turn:02d}"
            if len(line) == 4:
                answers[line[3]] = eid
            events.append(Event(id=eid, timestamp=format_timestamp(moment), source=source, kind=kind,
                                content=content, workspace=project, session=session))
    events.sort(key=lambda e: e.timestamp)
    return events, answers


def questions(which: str = "main") -> list[tuple[str, str, str]]:
    return SETS[which][1]


def check(events: list[Event], answers: dict[str, str], which: str = "main") -> None:
    text = {e.id: e.content for e in events}
    for key, question, _split in questions(which):
        common = set(tokenize(question)) & set(tokenize(text[answers[key]]))
        if common:
            raise SystemExit(f"{key}: question shares {sorted(common)} with its answer")


if __name__ == "__main__":
    for name in SETS:
        if name != "main":
            check(*build(name), name)
    events, answers = build()
    check(events, answers)
    (HERE / "events.jsonl").write_bytes(b"".join(e.to_json() + b"\n" for e in events))
    print(f"{len(events)} events, {len(QUESTIONS)} questions")
