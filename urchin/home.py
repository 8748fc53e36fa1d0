"""Where Urchin's home is: the argument > `URCHIN_HOME` > the platform's user data folder.

The one rule, kept here so that `urchin.config` (every command, the daemon) and an agent hook's fast
path (`urchin.hook_fast`, which must not import pathlib or platformdirs) cannot disagree. Standard
library only: on Linux the default is platformdirs' own rule, written out (its import alone costs a
hook more than the rest of its work); anywhere else, or when HOME is unusable, platformdirs decides.
"""

from __future__ import annotations

import os
import sys

__all__ = ["home_dir", "default_home"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping


def home_dir(home: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None) -> str:
    """The home folder as an absolute path (not normalised: `..` stays, as `Path.absolute` keeps it)."""
    env = os.environ if env is None else env
    chosen = os.path.expanduser(os.fspath(home) if home else env.get("URCHIN_HOME") or default_home())
    if chosen[:1] == "~":      # as Path.expanduser: a home that cannot be found is an error, not a folder
        raise RuntimeError(f"could not determine the home folder of {chosen!r}")
    return chosen if os.path.isabs(chosen) else os.path.join(os.getcwd(), chosen)


def default_home() -> str:
    """platformdirs' `user_data_dir("urchin")`; tests/test_home.py holds the two equal."""
    if sys.platform.startswith("linux"):
        data = os.environ.get("XDG_DATA_HOME", "")
        if os.path.isabs(data):
            return os.path.join(data, "urchin")
        user = os.environ.get("HOME")
        if user is not None and os.path.isabs(user):
            return os.path.join(os.path.expanduser("~/.local/share"), "urchin")
    import platformdirs  # another platform, or no usable HOME (platformdirs asks the password database)

    return str(platformdirs.user_data_dir("urchin"))
