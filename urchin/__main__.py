"""`python -m urchin` and the `urchin` script.

`urchin hook ...` skips click and the command modules: agents run it on every prompt and tool
call, and beside a daemon it must finish in 100 ms (bench/bench_hook_recall.py): `urchin.hook_fast`
sends the whole call to the daemon with the standard library alone, and only when that fails is the
full path (`urchin.hooks`) imported. `urchin search|semantic|recent|context|recall|get` beside a running
daemon skip click too (urchin/daemon/fastclient.py and fastcalls.py answer with the standard library, or
hand back to click), and so does `urchin mcp` (urchin/daemon/mcprelay.py relays the session to the
daemon's `/mcp`). `urchin --version` prints click's line without click. Everything else is click.
"""

import sys


def entry() -> None:
    if sys.argv[1:] == ["--version"]:   # click's version_option, without click and the command modules
        from importlib.metadata import version

        print(f"urchin, version {version('urchin-memory')}")
        return
    # `hook --help` (or no agent) is a person asking: click prints the usage.
    if sys.argv[1:2] == ["hook"] and not {"-h", "--help"} & set(sys.argv[2:]) and len(sys.argv) > 2:
        sys.exit(_hook(sys.argv[2:]))
    if any(arg in ("search", "semantic", "recent") for arg in sys.argv[1:4]):
        from urchin.daemon.fastclient import run

        code = run(sys.argv[1:])
        if code is not None:
            _done(code)
    if any(arg in ("context", "recall", "get") for arg in sys.argv[1:4]):
        from urchin.daemon.fastcalls import run as call

        code = call(sys.argv[1:])
        if code is not None:
            _done(code)
    if "mcp" in sys.argv[1:4]:
        from urchin.daemon.mcprelay import run as relay

        code = relay(sys.argv[1:])
        if code is not None:
            sys.exit(code)
    from urchin.cli import main

    main()


def _done(code: int) -> None:
    """The end of a fast path: its output is written and flushed line by line (fastclient._emit), it
    started no thread and holds no file that needs closing, so the interpreter's teardown (a seventh of
    `urchin context`'s instructions beside the daemon) is skipped, in a process of its own: called
    with other streams in place (tests run `entry` inside pytest), it exits as click would."""
    streams = sys.stdout, sys.stderr
    if streams != (sys.__stdout__, sys.__stderr__):
        sys.exit(code)
    import os

    try:
        for stream in streams:
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):     # a reader that went away: nothing left to tell it
        pass
    os._exit(code)


def _hook(argv: list[str]) -> int:
    """One hook call: through the daemon's `POST /hook` when it answers as the daemon does, else the
    full path with the same event id (it writes the journal itself when the daemon did not answer)."""
    from urchin import hook_fast

    call = hook_fast.parse(argv)
    answer = hook_fast.forward(call)
    if isinstance(answer, bytes):
        try:
            if answer:
                sys.stdout.buffer.write(answer)
                sys.stdout.buffer.flush()
        except (OSError, ValueError) as exc:     # the agent closed our stdout: stored, nothing to tell
            from urchin.hooks import log_failure

            log_failure(call.home, call.agent, f"{type(exc).__name__}: {exc}")
        return 0
    from urchin.hooks import log_failure, run_hook

    if call.note:
        log_failure(call.home, call.agent, call.note)
    return run_hook(call.agent, call.raw, home=call.home, event=call.event, fields=call.fields,
                    event_id=call.event_id, use_daemon=answer != hook_fast.DIRECT, started=call.started)


if __name__ == "__main__":
    entry()
