"""Write a realistic synthetic Urchin journal for the benchmarks: `gen_journal.py N [--out PATH]`.

Mixed sources and kinds, agent-transcript-like content (mostly 100-500 chars, a long tail of
multi-KB tool output, code, paths, hashes, some Unicode), timestamps over 90 days ending now with
~2% backfilled out of order. Plants RARE_TERM (~20 events), COMMON_TERM (~10%); ABSENT_TERM never.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

import orjson

RARE_TERM = "Zanzibar-Quokka"
COMMON_TERM = "retry budget"
ABSENT_TERM = "xylophone nebula"
DATA = Path(__file__).resolve().parent / "data"

SOURCES = (("claude", 30), ("copilot", 15), ("gemini", 8), ("codex", 10), ("shell", 22), ("git", 8), ("manual", 7))
KINDS = {
    "claude": ("conversation", "tool_use", "decision", "agent", "error"),
    "copilot": ("conversation", "tool_use", "agent"),
    "gemini": ("conversation", "tool_use"),
    "codex": ("conversation", "tool_use", "agent", "error"),
    "shell": ("command", "error"),
    "git": ("commit",),
    "manual": ("note", "decision", "capture"),
}
WORDS = """the a to of and in is it that for this we on with be as not are should can will if use
function file test error value return config module import class method request response server
client cache index journal event search query token memory daemon session workspace build deploy
install package version update fix bug issue branch commit merge review change line path read write
open close start stop run check parse format string number list dict object type schema field key
async await thread process signal timeout handler queue worker batch offset buffer stream socket
database table column migration transaction lock retry connection pool latency throughput benchmark
refactor rename extract inline split move delete add remove replace patch diff hunk rebase cherry
pick stash tag release changelog readme docs comment docstring lint mypy ruff pytest fixture mock
assert expected actual failed passed skipped coverage profile trace debug log warning info critical
user agent model prompt context window embedding vector cosine rank score recall precision chunk
""".split()
UNICODE = ("straße", "café", "naïve", "Ελληνικά", "σίσυφος", "日本語のテキスト", "emoji ✅ 🚀", "Größe",
           "İstanbul", "résumé", "coöperate", "Ωmega", "ﬁle", "Kelvin K")
PATHS = ("src/urchin/journal.py", "tests/test_search.py", "README.md", "pyproject.toml", "/etc/hosts",
         "~/.config/urchin/config.toml", "app/models/user.rb", "cmd/server/main.go", "web/src/App.tsx",
         "crates/core/src/lib.rs", "Makefile", "docs/architecture.md")
CODE = ('def handler(event, ctx):\n    if not event.get("id"):\n        raise ValueError("missing id")\n'
        '    return {"ok": True}\n',
        'for (let i = 0; i < items.length; i++) {\n  console.log(`item ${i}: ${items[i]}`);\n}\n',
        'SELECT id, content FROM events WHERE ts > now() - interval \'7 days\' ORDER BY ts DESC;\n',
        'fn main() -> Result<(), Box<dyn Error>> {\n    let cfg = Config::load("urchin.toml")?;\n    Ok(())\n}\n',
        'C:\\Users\\dev\\project\\build.ps1 -Target "Release" -Verbose\n')


_POOL: dict[int, list[str]] = {}


def _ri(rng: random.Random, low: int, high: int) -> int:
    """`randint` without its overhead (generation speed matters)."""
    return low + int(rng.random() * (high - low + 1))


def _sentence(rng: random.Random, n: int) -> str:
    """A sentence of `n` words (4..30), drawn from pools built once."""
    if not _POOL:
        pool_rng = random.Random(1)
        for words in range(4, 31):
            pool = _POOL.setdefault(words, [])
            for _ in range(2000):
                text = " ".join(pool_rng.choices(WORDS, k=words))
                pool.append(text[:1].upper() + text[1:] + ".")
    pool = _POOL[min(30, max(4, n))]
    return pool[int(rng.random() * len(pool))]


def _content(rng: random.Random, source: str, kind: str) -> str:
    roll = rng.random()
    if source == "git":
        body = f"{rng.getrandbits(40):010x} {_sentence(rng, _ri(rng, 4, 12))}\n\n{_sentence(rng, _ri(rng, 8, 30))}"
    elif source == "shell":
        body = (f"$ {rng.choice(('pytest -q', 'git status', 'make test', 'rg -n', 'ls -la', 'cargo build'))} "
                f"{rng.choice(PATHS)} --{rng.choice(WORDS)}={_ri(rng, 0, 9999)}")
        if kind == "error" or roll < 0.3:
            body += f"\nexit {_ri(rng, 1, 2)}: {_sentence(rng, _ri(rng, 5, 25))}"
    else:
        body = " ".join(_sentence(rng, _ri(rng, 5, 16)) for _ in range(_ri(rng, 1, 4)))
        if roll < 0.25:
            body += f" See `{rng.choice(PATHS)}:{_ri(rng, 1, 900)}`."
        if roll < 0.08:
            body += "\n```\n" + rng.choice(CODE) + "```"
    if rng.random() < 0.025:  # the long tail: multi-KB tool output
        lines = [f"{rng.choice(PATHS)}:{_ri(rng, 1, 2000)}: {_sentence(rng, _ri(rng, 4, 14))}"
                 for _ in range(min(300, int(rng.paretovariate(1.5) * 6)))]
        body += "\n" + "\n".join(lines)
    if rng.random() < 0.03:
        body += " " + rng.choice(UNICODE)
    if rng.random() < 0.05:
        body += f" sha={rng.getrandbits(160):040x}"
    return body


def _ts(ms: int) -> str:
    secs, milli = divmod(ms, 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(secs)) + f".{milli:03d}Z"


def _uuid7(ms: int, rng: random.Random) -> str:
    value = (ms << 80) | (0x7 << 76) | (rng.getrandbits(12) << 64) | (0b10 << 62) | rng.getrandbits(62)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def generate(n: int, out: Path, seed: int = 7, days: float = 90.0, end_ms: int | None = None) -> dict[str, int]:
    rng = random.Random(seed)
    end = int(time.time() * 1000) if end_ms is None else end_ms
    start = end - int(days * 86_400_000)
    step = (end - start) / max(n, 1)
    sources = rng.choices([s for s, _ in SOURCES], weights=[w for _, w in SOURCES], k=n)
    rare_at = set(rng.sample(range(n), min(20, n)))
    workspaces = [f"proj-{i}" for i in range(12)]
    counts = {"events": n, "rare": 0, "common": 0, "backfilled": 0}
    out.parent.mkdir(parents=True, exist_ok=True)
    session = f"sess-{rng.getrandbits(32):08x}"
    workspace = rng.choice(workspaces)
    with out.open("wb") as handle:
        buf: list[bytes] = []
        for i, source in enumerate(sources):
            ms = int(start + i * step + rng.random() * step)
            if rng.random() < 0.02:
                ms = _ri(rng, start, ms)  # backfilled: an old event arriving late
                counts["backfilled"] += 1
            if rng.random() < 0.01:
                session = f"sess-{rng.getrandbits(32):08x}"
                workspace = rng.choice(workspaces)
            kind = rng.choice(KINDS[source])
            content = _content(rng, source, kind)
            if rng.random() < 0.10:
                cut = _ri(rng, 0, len(content))
                content = f"{content[:cut]} {COMMON_TERM} {content[cut:]}"
                counts["common"] += 1
            if i in rare_at:
                content = f"{content} ({RARE_TERM} incident #{i})"
                counts["rare"] += 1
            event = {"id": _uuid7(ms, rng), "timestamp": _ts(ms), "source": source, "kind": kind,
                     "content": content, "workspace": workspace, "session": session,
                     "actor": {"account": "dev", "device": "laptop"}}
            if source in ("claude", "codex", "copilot") and kind == "tool_use":
                event["meta"] = {"tool": rng.choice(("Bash", "Edit", "Read", "Grep")), "exit": _ri(rng, 0, 1)}
            buf.append(orjson.dumps(event))
            if len(buf) >= 8192:
                handle.write(b"\n".join(buf) + b"\n")
                buf.clear()
        if buf:
            handle.write(b"\n".join(buf) + b"\n")
    return counts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", type=int, help="number of events")
    parser.add_argument("--out", type=Path, default=None, help="output path (default bench/data/journal-N.jsonl)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)
    out = args.out or DATA / f"journal-{args.n}.jsonl"
    started = time.perf_counter()
    counts = generate(args.n, out, args.seed)
    elapsed = time.perf_counter() - started
    size = out.stat().st_size
    print(f"{out}: {counts['events']} events, {size / 1e6:.0f} MB in {elapsed:.1f}s; "
          f"rare {RARE_TERM!r} x{counts['rare']}, "
          f"common {COMMON_TERM!r} x{counts['common']}, absent {ABSENT_TERM!r}, backfilled {counts['backfilled']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
