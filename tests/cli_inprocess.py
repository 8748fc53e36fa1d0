"""`call_urchin`: the real `urchin` command run inside the test's process, as `run_urchin` runs it in a
new one (same arguments, same result type).

A new process costs ~0.45 s of a core (the interpreter, click and the command modules); in-process,
the same entry point (`urchin.__main__.entry`: the hook and fast-client routing, then click) parses
the same argv and writes to captured stdout/stderr. Use it where the rule is about what a command
does with its input; keep `run_urchin` for what depends on being a process (interpreter start,
exit status seen by a shell, signals, inherited descriptors, environment read at start-up, Python's
own warnings), and keep at least one real-process test of every command a module checks. Never
`urchin hook`: its time limit is a SIGALRM that would interrupt this process (an import cut short
leaves a half-initialised module behind for every later test). Usage errors
name the program as click finds it from pytest's `__main__` ("python -m pytest.urchin").
"""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import Mapping

from click.testing import CliRunner

__all__ = ["call_urchin"]


def call_urchin(*args: str, input: str | bytes | None = None, env: Mapping[str, str | None] | None = None,
                click_only: bool = False) -> subprocess.CompletedProcess[str]:
    """`urchin ARGS` in this process; `env` overrides the environment for the call only (None: unset).
    `click_only`: the click CLI itself, never the daemon fast paths of `urchin.__main__` (named
    "python -m urchin", as `python -c "from urchin.cli import main; main(prog_name=...)"` would be)."""
    from urchin.__main__ import entry

    assert args[:1] != ("hook",), "run `urchin hook` in a process of its own (run_urchin): it sets an alarm"
    if click_only:
        from urchin.cli import main

        def entry() -> None:
            main(prog_name="python -m urchin")
    text = isinstance(input, str) or input is None
    argv = sys.argv
    # A process has no logging handler, so warnings reach its stderr through logging's last resort
    # (as it is then: the command's redacting wrapper); pytest's handlers would take them here.
    last_resort = logging._StderrHandler(logging.WARNING)
    with CliRunner().isolation(input=input, env=env) as (out, err, _):
        sys.argv = ["urchin", *args]
        logging.getLogger().addHandler(last_resort)
        try:
            entry()
            code = 0
        except SystemExit as exc:       # what the interpreter makes of sys.exit(...)
            if exc.code is None or isinstance(exc.code, int):
                code = exc.code or 0
            else:
                print(exc.code, file=sys.stderr)
                code = 1
        finally:
            logging.getLogger().removeHandler(last_resort)
            sys.argv = argv
            sys.stdout.flush()
            sys.stderr.flush()
        stdout, stderr = out.getvalue(), err.getvalue()
    if text:
        return subprocess.CompletedProcess(list(args), code, stdout.decode(errors="replace"),
                                           stderr.decode(errors="replace"))
    return subprocess.CompletedProcess(list(args), code, stdout, stderr)   # type: ignore[arg-type]
