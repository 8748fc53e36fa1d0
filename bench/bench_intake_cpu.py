"""The daemon's CPU per one-event `POST /ingest`, without sockets: repeatable at any load under callgrind.

Builds the daemon's parts on a fresh home (`Memory` warmed, the group writer and the follower threads,
`build_app` behind the Guard, uvicorn's protocol class the daemon uses) and feeds C in-memory
connections one-event requests in lock step, as 8 wrk connections would; every answer must be 200.
What is left out: the socket syscalls, the collectors and uvicorn's server loop. After a warm-up it
measures N requests: the process's CPU time, and under callgrind its instructions (every thread; the
script zeroes and dumps its own counters with `callgrind_control`). `--no-http` sends the same events
straight to `Memory.prepare` and the group writer from coroutines: the difference is what HTTP costs.

    python bench/bench_intake_cpu.py [-n 2000] [-c 8]
    valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.%p \
        python bench/bench_intake_cpu.py --callgrind -n 400 --warm 160
    grep '^summary:' /tmp/cg.<pid>.1     # instructions for the N requests; divide by N

Another checkout is measured with PYTHONPATH=<that checkout> (the venv's editable install is this one).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import tempfile
import time
from typing import Any

import orjson
import uvicorn
from uvicorn.server import ServerState

from urchin.config import Settings
from urchin.daemon.app import DaemonState, build_app
from urchin.daemon.edge import Edge, EdgeLimits
from urchin.daemon.follower import Follower
from urchin.daemon.server import _http_protocol
from urchin.daemon.writer import GroupWriter
from urchin.facade import Memory

TOKEN = "t" * 43
ADDRESS = ("127.0.0.1", 18799)


class _Transport(asyncio.Transport):
    """A connection's socket: counts the responses written to it (each must be a 200)."""

    def __init__(self, answered: Any) -> None:
        super().__init__()
        self.answered = answered
        self.closing = False

    def write(self, data: Any) -> None:
        data = bytes(data)
        if data.startswith(b"HTTP/1.1 "):
            if not data.startswith(b"HTTP/1.1 200"):
                raise SystemExit(f"answer: {data[:400]!r}")
            self.answered()

    def writelines(self, lines: Any) -> None:
        self.write(b"".join(bytes(line) for line in lines))

    def is_closing(self) -> bool:
        return self.closing

    def close(self) -> None:
        self.closing = True

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"sockname": ADDRESS, "peername": ("127.0.0.1", 40000)}.get(name, default)

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass


def _request(tag: str, i: int) -> bytes:
    body = b'{"content":"bench event: a tool ran and printed a modest amount of output %s-%d","source":"bench"}' % (
        tag.encode(), i)
    return (b"POST /ingest HTTP/1.1\r\nHost: 127.0.0.1:18799\r\nUser-Agent: wrk\r\nContent-Type: application/json\r\n"
            b"Authorization: Bearer %s\r\nContent-Length: %d\r\n\r\n" % (TOKEN.encode(), len(body))) + body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2000, help="requests measured")
    parser.add_argument("-c", type=int, default=8, help="connections")
    parser.add_argument("--warm", type=int, default=400, help="requests before the measured ones")
    parser.add_argument("--callgrind", action="store_true", help="zero and dump callgrind's counters around them")
    parser.add_argument("--no-http", action="store_true",
                        help="the same events straight to the writer (orjson, Memory.prepare, GroupWriter.append): "
                             "what HTTP adds is the difference")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="urchin-intake-cpu-") as home:
        _measure(args, home)


def _measure(args: argparse.Namespace, home: str) -> None:
    memory = Memory(Settings.resolve(home))
    memory.warm()
    writer, follower = GroupWriter(memory), Follower(memory)
    app = build_app(DaemonState(memory, writer, f"http://{ADDRESS[0]}:{ADDRESS[1]}"), TOKEN)
    edge = Edge(EdgeLimits(idle_s=3600))     # as uvicorn's keep-alive below: a connection waits between rounds
    config = uvicorn.Config(app, http=_http_protocol(edge), lifespan="off", log_config=None, log_level="warning",
                            access_log=False, timeout_keep_alive=3600, server_header=False, proxy_headers=False)
    config.load()
    writer.start()
    follower.start()

    async def drive() -> None:
        loop = asyncio.get_running_loop()
        pending = 0
        waiter: asyncio.Future[None] = loop.create_future()

        def answered() -> None:
            nonlocal pending
            pending -= 1
            if pending == 0:
                waiter.set_result(None)

        state = ServerState()
        connections = []
        for _ in range(args.c):
            protocol = config.http_protocol_class(config=config, server_state=state, app_state={})
            protocol.connection_made(_Transport(answered))
            connections.append(protocol)

        async def direct(body: bytes) -> None:
            event = memory.prepare(orjson.loads(body))
            if (await writer.append([event]))[0].status != "appended":
                raise SystemExit("not appended")

        async def rounds(n: int, tag: str) -> None:
            nonlocal pending, waiter
            for r in range(n // args.c):
                if args.no_http:
                    await asyncio.gather(*(direct(_request(tag, r * args.c + k).split(b"\r\n\r\n", 1)[1])
                                           for k in range(args.c)))
                    continue
                waiter, pending = loop.create_future(), args.c
                for k, protocol in enumerate(connections):
                    protocol.data_received(_request(tag, r * args.c + k))
                await waiter

        await rounds(args.warm, "warm")
        await asyncio.sleep(12)     # the start-up threads (views, ids, digests) finish
        await rounds(80, "warm2")
        before = writer.stats.batches, writer.stats.events
        if args.callgrind:
            subprocess.run(["callgrind_control", "-z", str(os.getpid())], capture_output=True, check=False)
        wall, cpu = time.perf_counter(), time.process_time()
        await rounds(args.n, "run")
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        if args.callgrind:
            subprocess.run(["callgrind_control", "-d", str(os.getpid())], capture_output=True, check=False)
        n = args.n // args.c * args.c
        writes = writer.stats.batches - before[0]
        print(f"{n} requests over {args.c} connections: process CPU {cpu / n * 1e6:.0f} us/request, "
              f"{n / wall:,.0f} requests/s; {writes} writes ({n / max(writes, 1):.1f} events per fsync)")

    import uvloop

    uvloop.run(drive())
    writer.close()
    follower.stop()
    memory.close()


if __name__ == "__main__":
    main()
