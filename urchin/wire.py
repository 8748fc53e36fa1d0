"""One HTTP/1.1 request to the daemon with the standard library alone (socket, json, fcntl).

For the two callers that must start fast and import nothing heavy: the fast client
(`urchin search|semantic|recent` beside a daemon, fastclient.py) and agent hooks (hooks.py, which
send their event with an ingest-only token). `daemon_address(home)` finds the live daemon of a home
exactly as `client.find_daemon` does: `daemon.json` names it and some `urchin serve` holds
`daemon.lock`.
"""

from __future__ import annotations

import json
import os
from typing import Any

__all__ = ["daemon_address", "daemon_alive", "request", "is_local", "WireError"]


class WireError(Exception):
    """No answer: the daemon is unreachable, or what came back is not a whole HTTP/1.1 response."""


def daemon_address(root: str) -> str | None:
    """`unix:/path` or `http://host:port` of the live daemon of home `root`, or None."""
    try:
        with open(os.path.join(root, "daemon.json"), "rb") as handle:
            info = json.loads(handle.read())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict) or not isinstance(info.get("address"), str) or not daemon_alive(root):
        return None
    return str(info["address"])


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
            timeout: float = 30.0) -> tuple[int, dict[bytes, bytes], bytes]:
    """Send one request (`Connection: close`) and return (status, lower-cased headers, body);
    `timeout` bounds the whole exchange, not each read."""
    import socket
    import time

    if any(c in token for c in "\r\n") or any(c in target for c in "\r\n "):
        raise WireError("a header value holds a line break")
    deadline = time.monotonic() + timeout
    sock_target: Any
    if address.startswith("unix:"):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock_target, host = address[5:], "localhost"
    elif (parsed := _tcp(address)) is not None:
        host, name, port = parsed
        sock_target = (name, port)
        sock = socket.socket(socket.AF_INET6 if ":" in name else socket.AF_INET, socket.SOCK_STREAM)
    else:
        raise WireError(f"not a daemon address: {address!r}")
    head = f"{method} {target} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\n" \
           "Accept: application/json\r\nConnection: close\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    try:
        with sock:
            sock.settimeout(timeout)
            sock.connect(sock_target)
            sock.sendall(head.encode("latin-1") + b"\r\n" + (body or b""))
            chunks = []
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise WireError(f"no whole answer within {timeout:g} s")
                sock.settimeout(left)
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                chunks.append(chunk)
    except (OSError, UnicodeEncodeError) as exc:
        raise WireError(str(exc) or type(exc).__name__) from None
    return _parse(b"".join(chunks))


def _parse(raw: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = lines[0].split(b" ", 2)
    if not sep or len(status) < 2 or status[0] != b"HTTP/1.1" or not status[1].isdigit():
        raise WireError("not an HTTP/1.1 response")
    headers = {k.strip(): v.strip() for k, _, v in (line.lower().partition(b":") for line in lines[1:])}
    length = headers.get(b"content-length", b"")
    if b"transfer-encoding" in headers or not length.isdigit() or int(length) != len(body):
        raise WireError("the response is not whole (no Content-Length, or a different length)")
    return int(status[1]), headers, body
