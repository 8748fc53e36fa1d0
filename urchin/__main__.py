"""`python -m urchin` and the `urchin` script.

`urchin hook ...` skips click and the command modules: agents run it on every prompt and tool
call, and it must finish in well under 150 ms (bench/bench_hook.py). Everything else is click.
"""

import sys


def entry() -> None:
    # `hook --help` (or no agent) is a person asking: click prints the usage.
    if sys.argv[1:2] == ["hook"] and not {"-h", "--help"} & set(sys.argv[2:]) and len(sys.argv) > 2:
        from urchin.hooks import main as hook_main

        sys.exit(hook_main(sys.argv[2:]))
    from urchin.cli import main

    main()


if __name__ == "__main__":
    entry()
