"""Git: commits of the repositories under the configured roots (`[collectors.git] roots`).

`git log` runs as a subprocess per repository; each commit becomes one `commit` event with id
`git:<repo>:<sha>` (author, date, subject, body, changed files). The checkpoint keeps the last
HEAD seen, so a run reads only commits since then; a rewritten history is read again in full
(bounded by `MAX_COMMITS`) and dedupes by id.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from urchin.clipping import clip
from urchin.collectors.base import Collector, CollectReport, Item, Sink
from urchin.collectors.checkpoints import Checkpoints

__all__ = ["GitCollector", "find_repositories", "parse_log"]

SOURCE = "git"
MAX_COMMITS = 5000
MAX_DEPTH = 3
MAX_FILES_LISTED = 50
_FORMAT = "%x1e%H%x1f%an%x1f%ae%x1f%aI%x1f%s%x1f%b%x1f"
_SKIP_DIRS = {"node_modules", ".venv", "venv", "target", "dist", "build", "__pycache__", ".cache"}


def find_repositories(root: Path, depth: int = MAX_DEPTH) -> list[Path]:
    """`root` itself if it is a repository, else repositories up to `depth` folders below it."""
    if (root / ".git").exists():
        return [root]
    if depth <= 0 or not root.is_dir():
        return []
    found: list[Path] = []
    try:
        children = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    except OSError:
        return []
    for child in children:
        if child.name not in _SKIP_DIRS:
            found.extend(find_repositories(child, depth - 1))
    return found


def parse_log(output: str, repo: Path) -> list[Item]:
    items: list[Item] = []
    name = repo.name
    for record in output.split("\x1e"):
        fields = record.split("\x1f")
        if len(fields) < 7:
            continue
        sha, author, email, date, subject, body, rest = fields[:7]
        files = [f for f in rest.strip().splitlines() if f.strip()]
        text = subject.strip()
        if body.strip():
            text += "\n\n" + body.strip()
        if files:
            listed = files[:MAX_FILES_LISTED]
            more = f"\n… and {len(files) - len(listed)} more" if len(files) > len(listed) else ""
            text += "\n\nFiles:\n" + "\n".join(listed) + more
        items.append({"id": f"git:{name}:{sha}", "source": SOURCE, "kind": "commit", "content": text,
                      "title": clip(subject.strip(), 200) or None, "timestamp": date, "workspace": name,
                      "meta": {"sha": sha, "author": author, "email": email, "repo": str(repo),
                               "files": len(files)}})
    return items


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env,
                          timeout=120, errors="replace")
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else f"git {args[0]} failed")
    return done.stdout


class GitCollector(Collector):
    name = "git"
    source = SOURCE

    def folders(self) -> list[Path]:
        return list(self.settings.git_roots)

    def files(self) -> list[Path]:
        repos: list[Path] = []
        for root in self.settings.git_roots:
            repos.extend(find_repositories(root))
        return repos

    def collect_into(self, sink: Sink, checkpoints: Checkpoints, report: CollectReport) -> None:
        for repo in self.files():
            try:
                self._collect_repo(repo, sink, checkpoints, report)
            except (RuntimeError, OSError, subprocess.TimeoutExpired) as exc:
                report.errors.append(f"{repo}: {exc}")

    def _collect_repo(self, repo: Path, sink: Sink, checkpoints: Checkpoints, report: CollectReport) -> None:
        cursor = checkpoints.cursor(repo)
        try:
            head = _git(repo, "rev-parse", "--verify", "-q", "HEAD").strip()
        except RuntimeError:
            return   # a repository with no commits yet
        last = cursor.state.get("head")
        if head == last:
            return
        report.files += 1
        span = ["HEAD"]
        if isinstance(last, str) and _is_ancestor(repo, last):
            span = [f"{last}..HEAD"]
        output = _git(repo, "log", f"--max-count={MAX_COMMITS}", "--no-color", "--name-only",
                      f"--format={_FORMAT}", *span, "--")
        items: list[Item] = list(reversed(parse_log(output, repo)))   # oldest first
        self.deliver(sink, items, report)
        cursor.state = {"head": head}
        checkpoints.save()


def _is_ancestor(repo: Path, sha: str) -> bool:
    try:
        _git(repo, "merge-base", "--is-ancestor", sha, "HEAD")
        return True
    except RuntimeError:
        return False

