"""How fast the connection layer moves messages, against baselines measured in the same run.

    python bench/connection.py [--count 100000] [--round-trips 5000] [--repeat 3]

Notifications: a peer process streams `--count` ``session/update``
(``agent_message_chunk``) notifications through a real pipe, as fast as the
pipe takes them. Measured, in notifications per second:

  (a) a bare trio loop that only reads the pipe, splits lines and ``json.loads`` each;
  (b) `Connection` delivering each to a callback that validates it with
      ``acp.schema.SessionNotification.model_validate`` (what the governor does);
  (c) `Connection` delivering each to a callback that only counts;
  (d) the official asyncio SDK (``acp.connect_to_agent``), whose router validates too.

Permission round trips: a peer sends `--round-trips` ``session/request_permission``
requests one after the other, each waiting for its answer. Measured, in round
trips per second: a bare trio loop that parses and answers with a canned line;
`Connection` with a handler validated against ``RequestPermissionRequest``
returning a ``RequestPermissionResponse``; the official SDK's client doing the same.

Each figure is the best of `--repeat` runs. The peer builds its messages before
a "go" line, so the clock measures the consumer, not the producer. Ratios, not
absolute numbers, are the point: the targets are (b) >= 0.5 x (a), and our round
trip cheaper than the official SDK's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import trio

HERE = __file__


@dataclass(frozen=True)
class Sample:
    """One run: messages per wall-clock second, and our process's CPU time per message."""

    rate: float
    cpu_us: float


class Clock:
    """Wall and CPU time from now; CPU time is what a busy machine disturbs least."""

    def __init__(self) -> None:
        self.wall = time.perf_counter()
        self.cpu = time.process_time()

    def stop(self, count: int) -> Sample:
        wall = time.perf_counter() - self.wall
        cpu = time.process_time() - self.cpu
        return Sample(count / wall, cpu / count * 1e6)


# --- the peer (runs in its own process) ------------------------------------------------


def ready() -> None:
    """Tell the bench (on stderr) that the messages are built: start the clock at "go"."""
    sys.stderr.write("ready\n")
    sys.stderr.flush()


def peer_notifications(count: int) -> None:
    lines = [
        json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {
                    "sessionId": "sess-1",
                    "update": {
                        "sessionUpdate": "agent_message_chunk",
                        "content": {
                            "type": "text",
                            "text": f"chunk {i} of the agent's answer, a few words",
                        },
                    },
                },
            },
            separators=(",", ":"),
        ).encode()
        for i in range(count)
    ]
    blob = b"\n".join(lines) + b"\n"
    ready()
    sys.stdin.buffer.readline()  # "go"
    sys.stdout.buffer.write(blob)
    sys.stdout.buffer.flush()


def peer_permissions(count: int) -> None:
    params = {
        "sessionId": "sess-1",
        "toolCall": {
            "toolCallId": "call_1",
            "title": "Write f",
            "kind": "edit",
            "status": "pending",
        },
        "options": [
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"},
        ],
    }
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    ready()
    stdin.readline()  # "go"
    for i in range(count):
        message = {
            "jsonrpc": "2.0",
            "id": i,
            "method": "session/request_permission",
            "params": params,
        }
        stdout.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")
        stdout.flush()
        while True:  # skip anything that is not the answer (there is nothing else)
            answer = json.loads(stdin.readline())
            if answer.get("id") == i:
                break
        assert "allow" in json.dumps(answer), answer


def peer_argv(kind: str, count: int) -> list[str]:
    return [sys.executable, HERE, "--peer", kind, str(count)]


async def start_peer(nursery: trio.Nursery, kind: str, count: int) -> trio.Process:
    """The peer, started and ready (its stderr said so); its stdin waits for "go"."""
    process: trio.Process = await nursery.start(
        partial(
            trio.run_process,
            peer_argv(kind, count),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            check=False,
        )
    )
    assert process.stderr is not None
    said = b""
    while not said.endswith(b"ready\n"):
        chunk = await process.stderr.receive_some(64)
        assert chunk, "the peer died before it was ready"
        said += chunk
    return process


async def start_sdk_peer(kind: str, count: int) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        *peer_argv(kind, count),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        limit=64 * 1024 * 1024,
    )
    assert process.stderr is not None
    assert await process.stderr.readline() == b"ready\n"
    return process


# --- notifications ---------------------------------------------------------------------


async def bare_notifications(count: int) -> Sample:
    """(a): read, split, json.loads; nothing else."""
    async with trio.open_nursery() as nursery:
        process = await start_peer(nursery, "notifications", count)
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send_all(b"go\n")
        clock = Clock()
        seen = 0
        rest = b""
        loads = json.loads
        while seen < count:
            data = await process.stdout.receive_some(256 * 1024)
            if not data:
                break
            lines = (rest + data).split(b"\n")
            rest = lines.pop()
            for line in lines:
                loads(line)
                seen += 1
        sample = clock.stop(count)
    assert seen == count
    return sample


async def connection_notifications(count: int, callback_kind: str) -> Sample:
    """(b) and (c): our Connection, with or without schema validation per notification."""
    from acp.schema import SessionNotification

    from governor.acp.connection import Connection

    seen = 0
    done = trio.Event()
    validate = SessionNotification.model_validate

    def validating(method: str, params: Any) -> None:
        nonlocal seen
        validate(params)
        seen += 1
        if seen == count:
            done.set()

    def counting(method: str, params: Any) -> None:
        nonlocal seen
        seen += 1
        if seen == count:
            done.set()

    callback = validating if callback_kind == "validate" else counting
    async with trio.open_nursery() as nursery:
        process = await start_peer(nursery, "notifications", count)
        assert process.stdin is not None and process.stdout is not None
        connection = Connection(process.stdin, process.stdout)
        await nursery.start(connection.serve, {}, callback)
        await connection.notify("go", {})
        clock = Clock()
        await done.wait()
        sample = clock.stop(count)
        nursery.cancel_scope.cancel()
    return sample


async def sdk_notifications(count: int) -> Sample:
    """(d): the official asyncio SDK's client side, for reference."""
    import acp

    seen = 0
    done = asyncio.Event()

    class Client:
        async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
            nonlocal seen
            seen += 1
            if seen == count:
                done.set()

    process = await start_sdk_peer("notifications", count)
    assert process.stdin is not None and process.stdout is not None
    connection = acp.connect_to_agent(Client(), process.stdin, process.stdout)  # type: ignore[arg-type]
    process.stdin.write(b"go\n")
    await process.stdin.drain()
    clock = Clock()
    await done.wait()
    sample = clock.stop(count)
    await process.wait()
    await connection.close()
    return sample


# --- permission round trips ------------------------------------------------------------


async def bare_round_trips(count: int) -> Sample:
    async with trio.open_nursery() as nursery:
        process = await start_peer(nursery, "permissions", count)
        assert process.stdin is not None and process.stdout is not None
        await process.stdin.send_all(b"go\n")
        clock = Clock()
        rest = b""
        answered = 0
        while answered < count:
            data = await process.stdout.receive_some(256 * 1024)
            if not data:
                break
            lines = (rest + data).split(b"\n")
            rest = lines.pop()
            for line in lines:
                request = json.loads(line)
                answer = {
                    "jsonrpc": "2.0",
                    "id": request["id"],
                    "result": {"outcome": {"outcome": "selected", "optionId": "allow"}},
                }
                await process.stdin.send_all(
                    json.dumps(answer, separators=(",", ":")).encode() + b"\n"
                )
                answered += 1
        await process.wait()
        sample = clock.stop(count)
    return sample


async def connection_round_trips(count: int) -> Sample:
    from acp.schema import AllowedOutcome, RequestPermissionRequest, RequestPermissionResponse

    from governor.acp.connection import Connection

    async def permission(params: RequestPermissionRequest) -> RequestPermissionResponse:
        option = next(o for o in params.options if o.kind == "allow_once")
        return RequestPermissionResponse(
            outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
        )

    handlers = {"session/request_permission": (RequestPermissionRequest, permission)}
    async with trio.open_nursery() as nursery:
        process = await start_peer(nursery, "permissions", count)
        assert process.stdin is not None and process.stdout is not None
        connection = Connection(process.stdin, process.stdout)
        await nursery.start(connection.serve, handlers, lambda method, params: None)
        await connection.notify("go", {})
        clock = Clock()
        await process.wait()
        sample = clock.stop(count)
        nursery.cancel_scope.cancel()
    assert process.returncode == 0
    return sample


async def sdk_round_trips(count: int) -> Sample:
    import acp
    from acp.schema import AllowedOutcome, RequestPermissionResponse

    class Client:
        async def request_permission(
            self, session_id: str, tool_call: Any, options: list[Any], **kwargs: Any
        ) -> RequestPermissionResponse:
            option = next(o for o in options if o.kind == "allow_once")
            return RequestPermissionResponse(
                outcome=AllowedOutcome(outcome="selected", option_id=option.option_id)
            )

    process = await start_sdk_peer("permissions", count)
    assert process.stdin is not None and process.stdout is not None
    connection = acp.connect_to_agent(Client(), process.stdin, process.stdout)  # type: ignore[arg-type]
    process.stdin.write(b"go\n")
    await process.stdin.drain()
    clock = Clock()
    await process.wait()
    sample = clock.stop(count)
    await connection.close()
    assert process.returncode == 0
    return sample


# --- driver ----------------------------------------------------------------------------


def measure(repeat: int, runs: dict[str, Callable[[], Sample]]) -> dict[str, Sample]:
    """Best rate and best CPU time of each, over `repeat` interleaved rounds."""
    samples: dict[str, list[Sample]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, run in runs.items():
            samples[name].append(run())
    return {
        name: Sample(max(s.rate for s in got), min(s.cpu_us for s in got))
        for name, got in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--round-trips", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--peer", nargs=2, metavar=("KIND", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.peer:
        kind, count = args.peer
        {"notifications": peer_notifications, "permissions": peer_permissions}[kind](int(count))
        return

    n, rt, r = args.count, args.round_trips, args.repeat
    got = measure(
        r,
        {
            "a": lambda: trio.run(bare_notifications, n),
            "b": lambda: trio.run(connection_notifications, n, "validate"),
            "c": lambda: trio.run(connection_notifications, n, "count"),
            "d": lambda: asyncio.run(sdk_notifications(n)),
        },
    )
    a, b, c, d = (got[k] for k in "abcd")
    print(f"notifications ({n:,} agent_message_chunk updates through a pipe; best of {r}):")
    print("                                        per second  x (a)    CPU us each  x (a)")
    rows = [
        ("(a) bare read + json.loads", a),
        ("(b) Connection + model_validate", b),
        ("(c) Connection, no validation", c),
        ("(d) official asyncio SDK client", d),
    ]
    for label, x in rows:
        print(
            f"  {label:<34}{x.rate:>12,.0f}  {x.rate / a.rate:5.2f}   {x.cpu_us:10.2f}  {x.cpu_us / a.cpu_us:5.2f}"
        )
    print(f"  target: (b) >= 0.50 x (a) in rate; (b) is {b.rate / d.rate:.2f} x the SDK's rate")
    print(f"  schema validation costs {b.cpu_us - c.cpu_us:.2f} us CPU per notification ((b) - (c))")

    got = measure(
        r,
        {
            "bare": lambda: trio.run(bare_round_trips, rt),
            "ours": lambda: trio.run(connection_round_trips, rt),
            "sdk": lambda: asyncio.run(sdk_round_trips(rt)),
        },
    )
    bare, ours, sdk = got["bare"], got["ours"], got["sdk"]
    print(f"permission round trips ({rt:,}, one at a time; best of {r}):")
    print("                                        per second  wall us each  CPU us each")
    for label, x in [
        ("bare trio parse + canned answer", bare),
        ("Connection + schema models", ours),
        ("official asyncio SDK client", sdk),
    ]:
        print(f"  {label:<34}{x.rate:>12,.0f}  {1e6 / x.rate:12.1f}  {x.cpu_us:11.1f}")
    print(
        f"  ours / SDK per round trip: wall {sdk.rate / ours.rate:.2f} x, CPU {ours.cpu_us / sdk.cpu_us:.2f} x"
        " (target < 1.00)"
    )


if __name__ == "__main__":
    main()
