"""`urchin mcp` beside a running daemon: a line relay between stdio and the daemon's `/mcp`.

Agents start `urchin mcp` at every session, and importing the MCP SDK alone takes ~2 s; the daemon
already serves the same tools (the same `build_server`) over streamable HTTP, stateless, with JSON
answers. So `urchin/__main__.py` calls `run(argv)` before it imports click, and this module, with
the standard library alone, POSTs each stdin line to `/mcp` (one HTTP request per message, as the
transport allows) and writes each JSON answer as one line on stdout: the bytes the SDK's stdio
writer would write (both serialise the same message the same way). A 202 (notification, response)
writes nothing; a 400 carries the JSON-RPC error the stdio line guard gives (the daemon runs the
same `parse_line`). After `initialize` every POST carries `MCP-Protocol-Version` with the version
agreed, as the transport requires. Requests run concurrently, as over stdio; a cancelled request's
answer is dropped, as the SDK drops it.

Only a daemon whose daemon.json says it serves `/mcp` (not `--no-mcp`) and runs our code is used.
Today's in-process server (a child `urchin mcp` that never relays) takes over, in the same session,
when the daemon cannot serve it: `initialize` not answered 200 (a refused token, the endpoint failed
to build), or no daemon left to connect to. The child is given the session's `initialize`
again (its answer is dropped) and then every line still to come. A request the daemon may have
received before it went away is answered with an error rather than run twice (it may have written).
`run` returns None when the full CLI must answer: other flags, `--help`, settings only
`Settings.resolve` reads, no daemon, or a daemon running other code (its tools may differ).
"""

from __future__ import annotations

import json
import os
import sys
import threading

from urchin.daemon.fastclient import Fallback, home_option, locate, option_value
from urchin.daemon_http import DaemonHttpError, code_stamp, daemon_address, request

TYPE_CHECKING = False   # not `typing`'s: its import is a tenth of this path's start-up
if TYPE_CHECKING:
    import subprocess
    from typing import Any, BinaryIO

__all__ = ["run", "Relay", "MAX_LINE_BYTES"]

MAX_LINE_BYTES = 16 << 20   # `urchin.mcp_server.stdio.MAX_LINE_BYTES`, which imports the SDK
CALL_TIMEOUT_S = 600.0      # a tool call's answer; the SDK's stdio server waits as long as it takes
IN_FLIGHT = 32              # requests relayed at once; a burst beyond waits for one to finish (a thread each)
_LEVELS = ("debug", "info", "warning", "error")
_REPLAY_ID = "urchin-mcp-relay-initialize"   # the in-process child's answer to this id is dropped


def run(argv: list[str]) -> int | None:
    """Relay `urchin mcp` (argv without the program name) to the daemon, or None for the full CLI."""
    try:
        home, args = home_option(argv)
        if not args or args[0] != "mcp":
            return None
        log_level = _log_level(args[1:])
        token, address, root = locate(home)
        if not _serves_our_mcp(root):
            return None

    except Fallback:
        return None
    try:
        return Relay(root, token, address, log_level).serve()
    except KeyboardInterrupt:   # as the in-process server: Ctrl-C ends the session quietly
        return 0


def _log_level(args: list[str]) -> str:
    level = "warning"
    if args:
        level, rest = option_value(args, "--log-level")
        if rest or level not in _LEVELS:
            raise Fallback   # click says what is wrong
    return level


def _serves_our_mcp(root: str) -> bool:
    """daemon.json says the daemon serves `/mcp`, and runs our code (else, say after an upgrade, its
    tools may differ from the ones the in-process server would list)."""
    try:
        with open(os.path.join(root, "daemon.json"), "rb") as handle:
            info = json.loads(handle.read())
    except (OSError, ValueError):
        return False
    return isinstance(info, dict) and info.get("mcp") is True and info.get("code") == code_stamp()


def _request_id(message: Any) -> tuple[str, Any] | None:
    """A request's id, keyed so that 1 and "1" differ; None for a notification or a bad line."""
    if isinstance(message, dict) and isinstance(message.get("method"), str) and "id" in message:
        request_id = message["id"]
        if isinstance(request_id, str | int) and not isinstance(request_id, bool):
            return type(request_id).__name__, request_id
    return None


def _error_line(request_id: Any, code: int, message: str) -> bytes:
    """A JSON-RPC error as the SDK writes one (compact, keys in this order)."""
    error = {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}
    return json.dumps(error, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class Relay:
    """One stdio session relayed to the daemon at `address`, or to an in-process child once it cannot."""

    def __init__(self, root: str, token: str, address: str, log_level: str = "warning") -> None:
        self.root = root
        self.token = token
        self.address = address
        self.log_level = log_level
        self.version: str | None = None          # MCP-Protocol-Version, once initialize is answered
        self.initialize: dict[str, Any] | None = None
        self._out_lock = threading.Lock()
        self._state = threading.Lock()
        self._in_flight: set[tuple[str, Any]] = set()
        self._cancelled: set[tuple[str, Any]] = set()
        self._threads: list[threading.Thread] = []
        self._slots = threading.BoundedSemaphore(IN_FLIGHT)
        self._child: subprocess.Popen[bytes] | None = None
        self._child_reader: threading.Thread | None = None

    # ---- the session ----------------------------------------------------------------------------
    def serve(self, source: BinaryIO | None = None) -> int:
        """Relay stdin (or `source`) until EOF and every answer owed is written; the exit code."""
        if source is None:
            source = _private_stdin()
        while line := source.readline(MAX_LINE_BYTES + 1):
            if len(line) > MAX_LINE_BYTES and not line.endswith(b"\n"):
                while (rest := source.readline(MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                    pass
                self.write(_error_line(None, -32600, f"Invalid request: a line over {MAX_LINE_BYTES} bytes"))
                continue
            self.take(line)
        for thread in self._threads:
            thread.join()
        return self._close_child()

    def take(self, line: bytes) -> None:
        """One line from the client: to the child once there is one, else to the daemon."""
        if self._child is not None:
            self._to_child(line)
            return
        try:
            message = json.loads(line)
        except (ValueError, RecursionError):
            message = None   # the daemon answers it with the parse error the line guard gives
        key = _request_id(message)
        if isinstance(message, dict) and message.get("method") == "notifications/cancelled":
            params = message.get("params")
            cancelled = _request_id({"method": "", "id": params.get("requestId")}) if isinstance(params, dict) else None
            with self._state:
                if cancelled in self._in_flight:
                    self._cancelled.add(cancelled)
        if key is not None and message["method"] == "initialize":
            self._initialize(line, message)   # in line: what follows depends on its answer
            return
        if key is not None:
            with self._state:
                self._in_flight.add(key)
        self._slots.acquire()
        thread = threading.Thread(target=self._post, args=(line, message, key), daemon=True)
        self._threads = [t for t in self._threads if t.is_alive()] + [thread]
        thread.start()

    def _initialize(self, line: bytes, message: dict[str, Any]) -> None:
        try:
            status, body = self._exchange(line)
        except DaemonHttpError:
            status, body = 0, b""
        answer = _json(body) if status == 200 else None
        result = answer.get("result") if isinstance(answer, dict) else None
        if not isinstance(result, dict) or not isinstance(result.get("protocolVersion"), str):
            self._start_child(replay=False)      # the in-process server answers this very initialize
            self._to_child(line)
            return
        self.initialize, self.version = message, result["protocolVersion"]
        self.write(body)

    def _post(self, line: bytes, message: Any, key: tuple[str, Any] | None) -> None:
        try:
            try:
                status, body = self._exchange(line)
            except DaemonHttpError as exc:
                if exc.sent or not self._daemon_gone():
                    self._answer_error(message, key, f"the urchin daemon did not answer ({exc}); "
                                                     "the call may or may not have run")
                    return
                self._hand_over(line)    # nothing reached the daemon, which is gone: in-process
                return
            if status == 200 or (status == 400 and body.startswith(b"{")):
                self._write_answer(body, key)
            elif status != 202:
                error = _json(body)
                said = error.get("error") if isinstance(error, dict) else None
                self._answer_error(message, key, f"the urchin daemon answered HTTP {status}"
                                                 + (f": {said}" if isinstance(said, str) else ""))
        finally:
            with self._state:
                if key is not None:
                    self._in_flight.discard(key)
                    self._cancelled.discard(key)
            self._slots.release()

    def _exchange(self, line: bytes) -> tuple[int, bytes]:
        headers = (("MCP-Protocol-Version", self.version),) if self.version else ()
        status, _, body = request(self.address, self.token, "POST", "/mcp", line, timeout=CALL_TIMEOUT_S,
                                  headers=headers)
        return status, body

    def _daemon_gone(self) -> bool:
        """True when no daemon serves this home any more; a restarted one is used from now on."""
        address = daemon_address(self.root)
        if address is None:
            return True
        self.address = address
        return False

    # ---- answers ------------------------------------------------------------------------------------
    def _answer_error(self, message: Any, key: tuple[str, Any] | None, text: str) -> None:
        if key is not None:
            self._write_answer(_error_line(message["id"], -32603, text), key)

    def _write_answer(self, body: bytes, key: tuple[str, Any] | None) -> None:
        with self._state:
            if key is not None and key in self._cancelled:
                return          # a cancelled request is never answered (the SDK drops it too)
        self.write(body)

    def write(self, body: bytes) -> None:
        with self._out_lock:
            try:
                sys.stdout.buffer.write(body.rstrip(b"\r\n") + b"\n")
                sys.stdout.buffer.flush()
            except (BrokenPipeError, ValueError):
                os._exit(0)     # the client is gone: nobody is left to answer

    # ---- the in-process server, in a child ----------------------------------------------------------
    def _hand_over(self, line: bytes) -> None:
        with self._state:
            if self._child is None:
                self._start_child(replay=self.initialize is not None)
        self._to_child(line)

    def _start_child(self, replay: bool) -> None:
        """`urchin mcp` in-process (never relaying), fed the rest of the session."""
        import subprocess

        package_root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        code = (f"import sys; sys.path.insert(0, {package_root!r}); "
                "from urchin.cli import main; main(prog_name='urchin')")
        env = dict(os.environ, URCHIN_NO_DAEMON="1")   # the daemon failed this session: do not retry it
        self._child = subprocess.Popen([sys.executable, "-c", code, "--home", self.root, "mcp",
                                        "--log-level", self.log_level],
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
        self._child_reader = threading.Thread(target=self._from_child, daemon=True)
        self._child_reader.start()
        if replay and self.initialize is not None:
            again = dict(self.initialize, id=_REPLAY_ID)
            self._to_child(json.dumps(again).encode("utf-8"))
            self._to_child(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')

    def _to_child(self, line: bytes) -> None:
        assert self._child is not None and self._child.stdin is not None
        try:
            self._child.stdin.write(line.rstrip(b"\r\n") + b"\n")
            self._child.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass        # the child died: its exit code says so at the end

    def _from_child(self) -> None:
        assert self._child is not None and self._child.stdout is not None
        for line in self._child.stdout:
            if _REPLAY_ID.encode() in line and _request_id_of_answer(line) == _REPLAY_ID:
                continue
            self.write(line)

    def _close_child(self) -> int:
        if self._child is None:
            return 0
        assert self._child.stdin is not None
        self._child.stdin.close()
        code = self._child.wait()
        if self._child_reader is not None:
            self._child_reader.join()
        return code


def _json(body: bytes) -> Any:
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        return None


def _request_id_of_answer(line: bytes) -> Any:
    answer = _json(line)
    return answer.get("id") if isinstance(answer, dict) and "method" not in answer else None


def _private_stdin() -> BinaryIO:
    """The client's pipe on a close-on-exec descriptor; fd 0 reads /dev/null (as the stdio server's
    `private_stdin`: a child process must neither read protocol bytes nor hold the pipe)."""
    import fcntl

    private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    return os.fdopen(private, "rb")
