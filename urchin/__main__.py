"""`python -m urchin` and the `urchin` script.

`urchin hook ...` skips click and the command modules: agents run it on every prompt and tool
call, and it must finish in well under 150 ms (bench/bench_hook.py). `urchin search|semantic|recent`
beside a running daemon skip them too (urchin/daemon/fastclient.py answers with the standard
library, or hands back to click). Everything else is click.
"""

import sys


def entry() -> None:
    # `hook --help` (or no agent) is a person asking: click prints the usage.
    if sys.argv[1:2] == ["hook"] and not {"-h", "--help"} & set(sys.argv[2:]) and len(sys.argv) > 2:
        from urchin.hooks import main as hook_main

        sys.exit(hook_main(sys.argv[2:]))
    if any(arg in ("search", "semantic", "recent") for arg in sys.argv[1:4]):
        from urchin.daemon.fastclient import run

        code = run(sys.argv[1:])
        if code is not None:
            sys.exit(code)
    from urchin.cli import main

    main()


if __name__ == "__main__":
    entry()
