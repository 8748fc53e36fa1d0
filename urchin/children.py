"""The names `urchin.processes` holds, under this module's former name, for the two importers not yet
moved (`urchin/search/semantic.py`, `urchin/search/cosine_build.py`); new code imports `urchin.processes`."""

from __future__ import annotations

from urchin.processes import NICENESS, PARENT_POLL_S, end_with_parent, lowest_priority, python_child, wait_for_parent

__all__ = ["NICENESS", "PARENT_POLL_S", "python_child", "lowest_priority", "wait_for_parent", "end_with_parent"]
