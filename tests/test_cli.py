"""The CLI as a user runs it: exit codes, output formats, no tracebacks; real processes for every command
family (round trip, import, ephemeral, demo, usage errors), output checks through the same entry point
in the test's process (tests/cli_inprocess.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import click
import orjson
import pytest
from click.testing import CliRunner

from tests.cli_inprocess import call_urchin
from tests.conftest import run_urchin
from tests.test_redact import GH, _pem
from urchin.cli import main


def test_ingest_search_get_round_trip() -> None:
    out = run_urchin("ingest", "--source", "claude", "--workspace", "api", "--tag", "DB", "--id", "e1",
                     "Chose pgvector for the index")
    assert out.returncode == 0 and out.stdout.strip() == "appended e1"
    found = run_urchin("search", "PGVECTOR")
    assert found.returncode == 0
    line = found.stdout.strip()
    assert line.startswith("[") and line.endswith("] claude — Chose pgvector for the index")
    as_json = orjson.loads(run_urchin("search", "pgvector", "--json").stdout)   # the HTTP and MCP object
    assert (as_json["totalResults"], as_json["mode"], as_json["query"]) == (1, "substring", "pgvector")
    hit = as_json["events"][0]
    assert (hit["id"], hit["tags"], hit["workspace"]) == ("e1", ["db"], "api") and "session" not in hit
    assert orjson.loads(run_urchin("get", "e1").stdout)["content"] == "Chose pgvector for the index"
    again = run_urchin("ingest", "--id", "e1", "other")
    assert again.stdout.strip() == "duplicate e1"


def test_ingest_reads_stdin_with_dash() -> None:
    assert call_urchin("ingest", "-", input="multi\nline text\n").returncode == 0
    assert "multi line text" in call_urchin("search", "line text").stdout


def test_nothing_matches_prints_nothing() -> None:
    call_urchin("ingest", "something")
    out = call_urchin("search", "absent-term")
    assert (out.returncode, out.stdout, out.stderr) == (0, "", "")


def test_nothing_in_the_window_says_on_stderr_that_older_matches_exist() -> None:
    """stdout stays what it was (nothing: scripts see no match); stderr says where to look instead."""
    call_urchin("ingest", "--timestamp", "2020-01-01T00:00:00Z", "a pelican crossed the road")
    call_urchin("ingest", "a heron today")
    out = call_urchin("search", "PELICAN")
    assert (out.returncode, out.stdout) == (0, "")
    assert out.stderr.startswith("no match in the last 168 h; older matches exist "
                                 "(the newest at 2020-01-01T00:00:00Z): try --hours ")
    hours = out.stderr.split("--hours ")[1].strip()
    assert int(hours) in (100_000, 200_000)
    wide = call_urchin("search", "pelican", "--hours", hours)
    assert "a pelican crossed the road" in wide.stdout and wide.stderr == ""
    assert call_urchin("search", "pelican", "--hours", "0.5").stderr.startswith("no match in the last 0.5 h;")
    assert call_urchin("search", "heron").stderr == ""


@pytest.mark.parametrize("args, message", [
    (("search", "  "), "error: query must not be empty\n"),
    (("search", "x", "--hours", "0"), "error: --hours: must be greater than 0, got 0\n"),
    (("search", "x", "--limit", "5000"), "error: --limit: must be from 1 to 1000, got 5000\n"),
    (("recent", "--limit", "0"), "error: --limit: must be from 1 to 1000, got 0\n"),
    (("tail", "-n", "0"), "error: -n: must be from 1 to 1000, got 0\n"),
    (("memory", "show", "m", "--token-budget", "0"), "error: --token-budget: must be from 1 to 200000, got 0\n"),
    (("get-file", "a.md", "--from-line", "0"), "error: --from-line: must be from 1 to 2147483648, got 0\n"),
    (("context", "x", "--min-score", "2"), "error: --min-score: must be from 0 to 1, got 2"),
    (("context", "x", "--search", "vec"), "error: --search[0].query must not be empty"),
    (("context", "x", "--strategy", "magic"), "error: --strategy: must be hybrid, keyword or semantic, got 'magic'"),
    (("context", "x", "--hours", "1", "--since", "2026-01-01T00:00:00Z"),
     "error: --hours: cannot be combined with since"),
    (("find", "x", "--min-score", "2"), "error: --min-score: must be from 0 to 1, got 2"),
    (("find", "x", "--limit", "101"), "error: --limit: must be from 1 to 50, got 101"),
    (("find", "x", "--source-type", "url"), 'error: --source-type: must be one of note, file, got "url"'),
    (("ephemeral", "on", "--for", "8d"), "error: --for: must be at most 10080, got 11520"),
    (("query-source", "claude", "x", "--limit", "101"), "error: --limit: must be from 1 to 100, got 101"),
    (("fetch-document", "files", "a.md", "--mode", "now"), 'error: --mode: must be one of indexed, live, got "now"'),
    (("ingest", " "), "error: content: must not be blank"),
    (("ingest", "x", "--timestamp", "soon"), "error: --timestamp: must be an RFC 3339 timestamp"),
    (("ingest", "x", "--source", "Bad Source"), "error: --source: must be lowercase"),
    (("get", "missing"), "error: no event with id 'missing'"),
])
def test_user_errors_exit_1_with_one_clear_line(args: tuple[str, ...], message: str) -> None:
    # The rule is the command's check of its input: in this process (a traceback would fail the test
    # itself), one case in a real one (the exit status a shell sees).
    out = (run_urchin if args[0] == "get" else call_urchin)(*args)
    assert out.returncode == 1
    assert out.stderr.startswith(message) and "Traceback" not in out.stderr
    assert out.stdout == ""


def test_usage_errors_exit_2() -> None:
    assert run_urchin("search").returncode == 2
    assert run_urchin("search", "x", "--limit", "many").returncode == 2
    assert run_urchin("no-such-command").returncode == 2


PEM = _pem("RSA ")
_PEM_BODY = PEM.splitlines()[1:-1]          # the key itself: the BEGIN/END lines are no secret
TOKEN = GH["p"]


def _fragments(parts: list[str], n: int = 8) -> set[str]:
    return {part[i:i + n] for part in parts for i in range(len(part) - n + 1)}


def _leaves(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from _leaves(command, (*path, name))
        else:
            yield (*path, name), command


def _valid(param: click.Parameter, folder: Path) -> str:
    """A value `param` accepts, so that the next argument is the one click refuses."""
    kind = param.type
    if isinstance(kind, click.Choice):
        return str(kind.choices[0])
    if isinstance(kind, click.File):
        return "-"
    if isinstance(kind, click.Path):
        return str(folder)
    return "1" if isinstance(kind, click.types._NumberParamTypeBase) else "x"


def _usage_errors(folder: Path) -> Iterator[tuple[str, ...]]:
    """For every command of the group (a new one is covered by itself): the key as a stray option,
    the token as the value of each typed option, and the token as a stray extra argument."""
    yield (PEM,)
    yield (TOKEN,)
    yield ("--" + TOKEN,)
    for path, command in _leaves(main):
        if command.context_settings.get("ignore_unknown_options"):
            continue     # `urchin hook` takes any argument; it logs through the redactor (test_hooks)
        yield (*path, PEM)
        yield (*path, f"--{PEM}")
        filled: list[str] = []
        variadic = False
        for param in command.params:
            if isinstance(param, click.Option) and not param.is_flag:
                if isinstance(param.type, click.Choice | click.types._NumberParamTypeBase):
                    yield (*path, param.opts[0], TOKEN)
                if param.required:
                    filled += [param.opts[0], _valid(param, folder)]
            elif isinstance(param, click.Argument):
                variadic = variadic or param.nargs < 0
                if isinstance(param.type, click.Choice):
                    yield (*path, TOKEN)
                if param.required or isinstance(param.type, click.Choice):
                    filled.append(_valid(param, folder))
        if not variadic:
            yield (*path, *filled, TOKEN)


def test_a_usage_error_prints_no_fragment_of_a_secret_it_quotes(tmp_path: Path) -> None:
    secrets = _fragments(_PEM_BODY) | _fragments([TOKEN[4:]])
    runner = CliRunner()
    cases = list(_usage_errors(tmp_path))
    assert len(cases) > 80
    for args in cases:
        out = runner.invoke(main, list(args), input="")
        assert out.exit_code == 2, (args[:3], out.output)
        assert "Error" in out.output and "Traceback" not in out.output, out.output
        leaked = {piece for piece in secrets if piece in out.output}
        assert not leaked, (args[:3], out.output)


def test_the_real_command_redacts_its_usage_errors() -> None:
    for args in (("ingest", PEM), ("search", PEM), ("search", "x", "--limit", TOKEN), ("get", "x", TOKEN)):
        out = run_urchin(*args)
        assert out.returncode == 2 and "[REDACTED:" in out.stderr, out.stderr
        assert not {piece for piece in _fragments(_PEM_BODY + [TOKEN[4:]]) if piece in out.stderr}, out.stderr


def test_import_counts_and_reports_rejected_lines(tmp_path: Path) -> None:
    source = tmp_path / "events.jsonl"
    source.write_text('{"id":"a","content":"one"}\nnot json\n{"id":"a","content":"dup"}\n{"content":""}\n'
                      '{"id":"b","content":"two"}\n')
    out = run_urchin("import", str(source))
    assert out.returncode == 1, out.stderr   # every good line landed; the exit code says some did not
    assert out.stdout.startswith("appended 2, duplicate 1, suppressed 0, rejected 2")
    assert "line 2: rejected: not valid JSON" in out.stderr
    assert "line 4: rejected: content: must not be blank" in out.stderr


def test_recent_tail_and_status() -> None:
    for n in range(3):
        call_urchin("ingest", f"note {n}", "--source", "shell" if n == 1 else "manual")
    assert [line.split(" — ")[1] for line in call_urchin("recent").stdout.splitlines()] == ["note 2", "note 1",
                                                                                           "note 0"]
    assert call_urchin("recent", "--source", "shell").stdout.count("\n") == 1
    assert [line.split(" — ")[1] for line in call_urchin("tail", "-n", "2").stdout.splitlines()] == ["note 1",
                                                                                                  "note 2"]
    status = orjson.loads(call_urchin("status", "--json").stdout)
    assert (status["events"], status["invalidLines"], status["tornRecords"]) == (3, 0, 0)


def test_ephemeral_mode_across_processes() -> None:
    assert "on since" in run_urchin("ephemeral", "on", "--for", "10m").stdout
    out = run_urchin("ingest", "secret plans")
    assert out.stdout == "suppressed: ephemeral mode, nothing stored\n"   # no id: nothing has one
    assert run_urchin("search", "secret").stdout == ""
    run_urchin("ephemeral", "off")
    assert run_urchin("ingest", "public plans").stdout.startswith("appended")
    status = orjson.loads(run_urchin("status", "--json").stdout)
    assert status["ephemeral"]["suppressedTotal"] == 1 and status["events"] == 1


def test_every_command_has_help_text() -> None:
    def walk(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
        out = []
        for name, command in group.commands.items():
            out.append((prefix + name, command))
            if isinstance(command, click.Group):
                out += walk(command, prefix + name + " ")
        return out

    for name, command in walk(main):
        assert command.help and command.help.strip(), f"`urchin {name}` has no help text"


def test_demo_leaves_no_temp_folder(tmp_path: Path) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = run_urchin("demo", input="fsync\n", env={"TMPDIR": str(scratch)})
    assert done.returncode == 0, done.stderr
    assert "group commit" in done.stdout.lower()
    assert list(scratch.iterdir()) == []


def test_hook_help_prints_usage() -> None:
    out = run_urchin("hook", "--help", input="")
    assert out.returncode == 0 and out.stdout.startswith("Usage: ") and "AGENT" in out.stdout


def test_every_command_reads_its_defaults_from_the_contract() -> None:
    """The help shows the contract's defaults (search 168 h / 20), declared once in urchin/contract/ops.py."""
    from urchin.contract import OPERATIONS

    help_text = " ".join(call_urchin("search", "--help").stdout.split())
    assert OPERATIONS["search"].param("hours").default == 168 and "(default 168)" in help_text
    assert OPERATIONS["search"].param("limit").default == 20 and "(default 20)" in help_text
    help_text = " ".join(call_urchin("context", "--help").stdout.split())
    assert "Most results; 1 to 100 (default 10)." in help_text and "--search TYPE:TEXT" in help_text
    assert "--include-memories / --no-include-memories" in help_text and "(default 8388608)" in help_text
    assert "--source-ids" not in help_text and "--strategy [hybrid|keyword|semantic]" in help_text
    help_text = " ".join(call_urchin("find", "--help").stdout.split())
    assert "--memories Also search memories" in help_text and "(default false)" in help_text
