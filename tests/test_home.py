"""The home's one rule (`urchin.home`), shared by the settings and a hook's fast path: it gives what
platformdirs gives for the user data folder, and `urchin.config.resolve_home` is it, as a Path."""

from __future__ import annotations

import json
from pathlib import Path

import platformdirs
import pytest

from urchin.config import resolve_home
from urchin.daemon_http import _address
from urchin.home import default_home, home_dir

# (XDG_DATA_HOME, HOME): set, empty, relative, absent
ENVS = [(None, "/home/ann"), ("", "/home/ann"), ("/data/xdg", "/home/ann"), ("relative/xdg", "/home/ann"),
        (" /spaced", "/home/ann"), ("/data/xdg/", "/home/ann/"), (None, "relative-home"), (None, None),
        ("/x", None), (None, "/"), (None, "//net/home")]


@pytest.mark.parametrize(("xdg", "user"), ENVS)
def test_the_default_home_is_platformdirs_user_data_folder(monkeypatch: pytest.MonkeyPatch, xdg: str | None,
                                                         user: str | None) -> None:
    for name, value in (("XDG_DATA_HOME", xdg), ("HOME", user)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    monkeypatch.delenv("URCHIN_HOME", raising=False)
    try:
        expected = platformdirs.user_data_dir("urchin")
    except RuntimeError:
        expected = None
    if expected is None:
        with pytest.raises(RuntimeError):
            default_home()
    else:
        assert default_home() == expected
        assert resolve_home() == Path(expected) == Path(home_dir())


@pytest.mark.parametrize("given", ["/abs/home", "rel/home", "~/h", "/a/./b//c/", "a/../b", "."])
def test_the_settings_and_the_hook_resolve_the_same_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                       given: str) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "user"))
    assert resolve_home(given) == Path(given).expanduser().absolute() == Path(home_dir(given))
    monkeypatch.setenv("URCHIN_HOME", given)
    assert resolve_home() == Path(given).expanduser().absolute()
    assert Path(home_dir()) == resolve_home()


@pytest.mark.parametrize("info", [
    {"pid": 1, "address": "http://127.0.0.1:18799", "token_path": "/h/token"},
    {"address": "unix:/run/user/0/urchin.sock"},
    {"note": "\"address\": \"http://evil\"", "address": "http://127.0.0.1:1"},
    {"address": "unix:/odd\"quote\\path"},
    {"address": 18799},
    {"other": 1},
    {"address": "unix:/ünï"},
])
def test_the_daemon_address_is_read_as_json_reads_it(info: dict[str, object]) -> None:
    for raw in (json.dumps(info).encode(), json.dumps(info, indent=2, ensure_ascii=False).encode()):
        expected = info.get("address") if isinstance(info.get("address"), str) else None
        assert _address(raw) == expected
    assert _address(b"not json") is None and _address(b'["address", 1]') is None
