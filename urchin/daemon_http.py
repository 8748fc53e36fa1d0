"""One HTTP/1.1 request to the daemon with the standard library alone (`_socket`, fcntl).

For the callers that must start fast and import nothing heavy: the fast client (`urchin
search|semantic|recent` beside a daemon, fastclient.py) and agent hooks (hook_fast.py, hooks.py).
`daemon_address(home)` finds the live daemon of a home exactly as `client.find_daemon` does:
`daemon.json` names it and some `urchin serve` holds `daemon.lock`. Nothing here imports `json`,
`socket`, `re` or `typing` on the way (each costs a hook a few ms of start-up, mostly `enum`'s);
`loads` and `dumps` are `json`'s, on its C scanner and encoder, without `json`'s `re` (its patterns
compile at import: more instructions than the rest of a fast client's start-up).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False   # not `typing`'s: a hook pays for every import
if TYPE_CHECKING:
    from typing import Any

__all__ = ["daemon_address", "daemon_alive", "request", "is_local", "code_stamp", "loads", "dumps", "DaemonHttpError"]


class DaemonHttpError(Exception):
    """No answer: the daemon is unreachable, or what came back is not a whole HTTP/1.1 response.
    `sent`: the request may have reached the daemon (False: no connection was made, so nothing ran)."""

    def __init__(self, message: str, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent


def daemon_address(root: str) -> str | None:
    """`unix:/path` or `http://host:port` of the live daemon of home `root`, or None."""
    try:
        with open(os.path.join(root, "daemon.json"), "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    address = _address(raw)
    if address is None or not daemon_alive(root):
        return None
    return address


def _address(raw: bytes) -> str | None:
    """`address` of daemon.json: read directly when it is a plain string (as the daemon writes it),
    else through `json` (an escaped character, another layout)."""
    head, found, tail = raw.partition(b'"address"')
    value = tail.lstrip(b" \t\r\n")
    if found and raw.lstrip()[:1] == b"{" and value[:1] == b":":
        value = value[1:].lstrip(b" \t\r\n")
        text, quote, _ = value[1:].partition(b'"')
        if value[:1] == b'"' and quote and b"\\" not in text and head.count(b'"') % 2 == 0:
            try:
                return text.decode("utf-8")
            except UnicodeDecodeError:
                return None
    import json

    try:
        info = json.loads(raw)
    except ValueError:
        return None
    return str(info["address"]) if isinstance(info, dict) and isinstance(info.get("address"), str) else None


def code_stamp() -> str:
    """Which Urchin code this process runs: its package folder and when its `__init__.py` was written
    (an upgrade rewrites it). The daemon says its own in daemon.json; a client that must run the same
    code (`urchin mcp` relaying to it) compares, at the cost of one stat."""
    package = os.path.dirname(os.path.abspath(__file__))
    try:
        return f"{package}:{os.stat(os.path.join(package, '__init__.py')).st_mtime_ns}"
    except OSError:
        return package


def daemon_alive(root: str) -> bool:
    """True while some `urchin serve` holds the lock of home `root` (exact, unlike a pid check)."""
    import errno
    import fcntl

    try:
        fd = os.open(os.path.join(root, "daemon.lock"), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as exc:
        return exc.errno in (errno.EAGAIN, errno.EACCES)
    finally:
        os.close(fd)
    return False


def _tcp(address: str) -> tuple[str, str, int] | None:
    """`http://HOST:PORT` (nothing else: no path, no user) -> (Host header, host to connect, port)."""
    if not address.startswith("http://"):
        return None
    netloc = address[7:].rstrip("/")
    name, _, port = netloc.rpartition(":")
    if not name or any(c in netloc for c in "/@?#\\ ") or not port.isdigit() or not 0 < int(port) < 65536:
        return None
    return netloc, name[1:-1] if name.startswith("[") and name.endswith("]") else name, int(port)


def is_local(address: str) -> bool:
    """A Unix socket, or `http://` to a loopback IP literal or `localhost`: where the daemon listens
    (it binds nothing else). A name such as 127.0.0.1.example.com is not local, whatever it resolves to."""
    if address.startswith("unix:"):
        return len(address) > 5
    parsed = _tcp(address)
    if parsed is None:
        return False
    host = parsed[1]
    if host == "localhost":
        return True
    import ipaddress

    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def request(address: str, token: str, method: str, target: str, body: bytes | None = None,
            timeout: float = 30.0, headers: tuple[tuple[str, str], ...] = ()) -> tuple[int, dict[bytes, bytes], bytes]:
    """Send one request (`Connection: close`, plus `headers`) and return (status, lower-cased headers,
    body); `timeout` bounds the whole exchange, not each read."""
    import _socket  # `socket` adds only what we do not use, at the cost of `enum`
    import time

    if any(c in token + "".join(k + v for k, v in headers) for c in "\r\n") or any(c in target for c in "\r\n "):
        raise DaemonHttpError("a header value holds a line break", sent=False)
    deadline = time.monotonic() + timeout
    sock_target: str | tuple[str, int]
    if address.startswith("unix:"):
        family, sock_target, host = _socket.AF_UNIX, address[5:], "localhost"
    elif (parsed := _tcp(address)) is not None:
        host, name, port = parsed
        sock_target = (name, port)
        family = _socket.AF_INET6 if ":" in name else _socket.AF_INET
    else:
        raise DaemonHttpError(f"not a daemon address: {address!r}", sent=False)
    head = f"{method} {target} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n" \
           "Accept: application/json\r\nConnection: close\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers)
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    sent = False
    try:
        payload = head.encode("latin-1") + b"\r\n" + (body or b"")
        sock = _socket.socket(family, _socket.SOCK_STREAM)
        try:
            sock.settimeout(timeout)
            sock.connect(sock_target)
            sent = True
            sock.sendall(payload)
            chunks = []
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise DaemonHttpError(f"no whole answer within {timeout:g} s")
                sock.settimeout(left)
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
        finally:
            sock.close()
    except (OSError, UnicodeEncodeError) as exc:
        raise DaemonHttpError(str(exc) or type(exc).__name__, sent=sent) from None
    return _parse(b"".join(chunks))


def _parse(raw: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = lines[0].split(b" ", 2)
    if not sep or len(status) < 2 or status[0] != b"HTTP/1.1" or not status[1].isdigit():
        raise DaemonHttpError("not an HTTP/1.1 response")
    headers = {k.strip(): v.strip() for k, _, v in (line.lower().partition(b":") for line in lines[1:])}
    length = headers.get(b"content-length", b"")
    if b"transfer-encoding" in headers or not length.isdigit() or int(length) != len(body):
        raise DaemonHttpError("the response is not whole (no Content-Length, or a different length)")
    return int(status[1]), headers, body


# ---- JSON, as the `json` module reads and writes it -------------------------------------------------
_BLANK = " \t\n\r"      # json's WHITESPACE


class _Decoder:
    """The attributes `_json.make_scanner` reads: those of `json.JSONDecoder()`."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__


_scan = None


def loads(text: str) -> Any:
    """`json.loads(text)`: the same value, or a ValueError where it raises one."""
    global _scan
    try:
        import _json
    except ImportError:      # an interpreter without the C accelerator: the module, whatever it costs
        import json

        return json.loads(text)
    if _scan is None:
        _scan = _json.make_scanner(_Decoder())   # type: ignore[arg-type]  # it reads these attributes
    if text.startswith("\ufeff"):
        raise ValueError("Unexpected UTF-8 BOM")
    start = len(text) - len(text.lstrip(_BLANK))
    try:
        value, end = _scan(text, start)
    except StopIteration:
        raise ValueError("Expecting value") from None
    if text[end:].strip(_BLANK):
        raise ValueError("Extra data")
    return value


def dumps(value: dict[str, str | int | float]) -> str:
    """`json.dumps(value, ensure_ascii=False, allow_nan=False)` of a flat object (a request's body):
    a TypeError for any other value, a ValueError for nan and the infinities."""
    try:
        from _json import encode_basestring
    except ImportError:
        from json.encoder import py_encode_basestring as encode_basestring

    parts = []
    for key, item in value.items():
        if isinstance(item, str):
            text = encode_basestring(item)
        elif isinstance(item, bool) or not isinstance(item, int | float):
            raise TypeError(f"not a string or a number: {type(item).__name__}")
        elif isinstance(item, float) and item - item != 0.0:
            raise ValueError(f"Out of range float values are not JSON compliant: {item!r}")
        else:
            text = (float if isinstance(item, float) else int).__repr__(item)
        parts.append(f"{encode_basestring(key)}: {text}")
    return "{" + ", ".join(parts) + "}"
