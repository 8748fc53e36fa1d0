"""The `urchin` command line: a thin skin over `Memory`.

Each command parses its flags, makes one call to the facade and formats the result. Library
errors (`UrchinError`) become a one-line message on stderr and exit code 1; usage errors exit 2.
Commands live in one module per noun under `urchin/cli/` and register on the `main` group.
"""

from __future__ import annotations

from urchin.cli import backup as _backup  # noqa: F401  (imported to register its commands)
from urchin.cli import collect as _collect  # noqa: F401
from urchin.cli import context as _context  # noqa: F401
from urchin.cli import db as _db  # noqa: F401
from urchin.cli import demo as _demo  # noqa: F401
from urchin.cli import doctor as _doctor  # noqa: F401
from urchin.cli import events as _events  # noqa: F401
from urchin.cli import find as _find  # noqa: F401
from urchin.cli import forget as _forget  # noqa: F401
from urchin.cli import index as _index  # noqa: F401
from urchin.cli import mcp as _mcp  # noqa: F401
from urchin.cli import privacy as _privacy  # noqa: F401
from urchin.cli import recall as _recall  # noqa: F401
from urchin.cli import serve as _serve  # noqa: F401
from urchin.cli import token as _token  # noqa: F401
from urchin.cli import viewer as _viewer  # noqa: F401
from urchin.cli import workspace as _workspace  # noqa: F401
from urchin.cli.group import CliState, main

__all__ = ["main", "CliState"]
