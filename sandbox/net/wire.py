"""The proxy's sockets: owned, read and written without a trio stream, and
bodies moved by splice(2).

Reads and writes wait only when the kernel says they would block, and every
`CALLS_PER_YIELD` calls that did not wait yield once, so that a connection
whose data is always ready cannot hold the loop.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
from collections.abc import Callable
from typing import Final, Protocol

import trio

from governor.sandbox.net import http1

_PHRASES: Final = {
    400: "Bad Request",
    403: "Forbidden",
    408: "Request Timeout",
    431: "Request Header Fields Too Large",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def error_response(status: int, reason: str) -> bytes:
    """A complete ``Connection: close`` error response whose body is ``reason``."""
    body = f"acp-governor proxy: {reason}\n".encode()
    head = (
        f"HTTP/1.1 {status} {_PHRASES.get(status, 'Error')}\r\n"
        f"Content-Type: text/plain; charset=utf-8\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    )
    return head.encode() + body


class Wire:
    """One socket of the proxy, owned, with what was read from it and not yet
    used (``pending``: a pipelined request, the start of a body).

    Reads and writes wait only when the kernel says they would block: trio's
    SocketStream takes two scheduler checkpoints per call even when it
    completes at once, ~80 us of the ~400 the proxy added to a small request
    (bench/README.md). So that a connection whose data is always ready cannot
    hold the loop, every ``CALLS_PER_YIELD`` calls that did not wait yield once."""

    __slots__ = ("_calls", "pending", "sock")

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.pending = bytearray()
        self._calls = 0

    async def _ran(self) -> None:
        self._calls += 1
        if self._calls >= CALLS_PER_YIELD:
            self._calls = 0
            await trio.lowlevel.checkpoint()

    async def recv(self, size: int) -> bytes:
        """What is pending, else up to ``size`` bytes from the socket (b"" at
        its end)."""
        if self.pending:
            data = bytes(self.pending)
            self.pending.clear()
            return data
        return await self._read(size)

    async def _read(self, size: int) -> bytes:
        while True:
            try:
                data = self.sock.recv(size)
            except BlockingIOError:
                self._calls = 0
                await trio.lowlevel.wait_readable(self.sock)
                continue
            await self._ran()
            return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        view = memoryview(data)
        while view:
            try:
                sent = self.sock.send(view, socket.MSG_NOSIGNAL)
            except BlockingIOError:
                self._calls = 0
                await trio.lowlevel.wait_writable(self.sock)
                continue
            view = view[sent:]
        await self._ran()

    async def head(self, limit: int) -> bytes | None:
        """The next head (up to its empty line, left off; the bytes after it
        stay pending), or None when the peer closed before sending any."""
        searched = 0
        while True:
            end = http1.head_end(self.pending, limit, max(0, searched - 3))
            searched = len(self.pending)
            if end >= 0:
                block = bytes(self.pending[: end - 4])
                del self.pending[:end]
                return block
            data = await self.recv_more(limit)
            if not data:
                if self.pending.strip():
                    raise http1.HttpError(400, "the connection ended inside a head")
                return None

    async def recv_more(self, size: int) -> bytes:
        """Read from the socket onto ``pending``; what was read."""
        data = await self._read(size)
        self.pending += data
        return data

    def shut(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        trio.lowlevel.notify_closing(self.sock)
        self.sock.close()


CALLS_PER_YIELD: Final = 64


async def splice(
    source: socket.socket,
    sink: socket.socket,
    idle: trio.CancelScope,
    limit: float,
    chunk: int,
    count: int | None = None,
) -> int | None:
    """Move bytes from ``source`` to ``sink`` through a pipe with splice(2),
    never through Python: until the source ends (``count`` None: then the sink
    is shut for writing), or ``count`` bytes. The bytes left (0 once done), or
    None when there is no splice here (copy instead)."""
    if not hasattr(os, "splice"):
        return None
    src, dst = source.fileno(), sink.fileno()
    pipe_r, pipe_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    with contextlib.suppress(OSError):  # a splice moves up to a pipe's size: 1 MiB, not 64 KiB
        fcntl.fcntl(pipe_w, fcntl.F_SETPIPE_SZ, chunk)
    flags = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK
    left = count
    moves = 0
    try:
        while left is None or left > 0:
            want = chunk if left is None else min(chunk, left)
            try:
                moved = os.splice(src, pipe_w, want, flags=flags)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(source)
                continue
            idle.deadline = trio.current_time() + limit
            if moved == 0:
                if count is None:
                    with contextlib.suppress(OSError):
                        sink.shutdown(socket.SHUT_WR)
                return left if left is not None else 0
            if left is not None:
                left -= moved
            while moved:
                try:
                    moved -= os.splice(pipe_r, dst, moved, flags=flags)
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(sink)
            moves += 1
            if moves % CALLS_PER_YIELD == 0:
                await trio.lowlevel.checkpoint()  # a fast source does not hold the loop
        return 0
    finally:
        os.close(pipe_r)
        os.close(pipe_w)


class HeadReader(Protocol):
    """What reads HTTP heads off a stream: a `Wire`, the terminating proxy's reader."""

    async def head(self, limit: int) -> bytes | None: ...


async def response_head(
    reader: HeadReader, limit: int, on_head: Callable[[], None] | None = None
) -> http1.Head | None:
    """The server's final response head, informational ones (1xx) skipped
    (the proxy answers ``Expect`` itself), or None when it closed before one;
    ``on_head`` is told of each head read (the proxy's idle clock)."""
    while True:
        try:
            block = await reader.head(limit)
        except http1.HttpError as e:
            raise http1.HttpError(502, f"the server's response head: {e.reason}") from None
        if on_head is not None:
            on_head()
        if block is None:
            return None
        response = http1.parse_response(block)
        if response.status == 101:
            raise http1.HttpError(502, "the server switched protocols (never asked for)")
        if response.status >= 200:
            return response
