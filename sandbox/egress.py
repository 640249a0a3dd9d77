"""The egress proxy: a sandbox's only way out, every connection a decision.

A sandbox below full-access has a network namespace of its own, with nothing
in it but loopback. The proxy listens inside it (`sandbox.netns`: the
listening sockets are made in the sandbox's namespace and accepted on from the
host's), on the port the proxy variables name (`proxy_env`) and on each
allowed loopback ``host:port`` it forwards (for clients that ignore proxy
variables for loopback: the model stand-ins of the tests, a local gateway).

Rules of this file (everything between an accepted socket and an upstream one):

1. Nothing is forwarded before the judge answered. The judge (the governor's
   gate, or `governor sandbox`'s) decides and records; the proxy only carries
   out its answer, connecting to exactly the addresses the judge was told
   (no second DNS lookup between the check and the connect).
2. HTTP is parsed with h11: ``CONNECT host:port`` opens a tunnel (bytes both
   ways, never parsed again: a second ``CONNECT`` inside goes to the allowed
   host as data); an absolute-form request (``GET http://host/path``) is
   forwarded, its Host header must agree with its target, and each request
   of a kept-alive connection is judged on its own (a request smuggled after
   an allowed one is decided like any other).
3. Bounded: a request head over ``Limits.head_bytes`` is a 431, a head not
   complete in ``Limits.head_timeout`` ends the connection, at most
   ``Limits.connections`` at once per proxy (more are answered 503), a
   tunnel or forward idle for ``Limits.idle_timeout`` is closed.
4. DNS is the proxy's, on the host (`resolve`); the sandbox has no resolver
   to ask (its ``/etc/resolv.conf`` names servers it cannot reach).

What the proxy cannot see: what goes inside an allowed tunnel (TLS: the
path, the headers, the body), nor whether an allowed host relays further.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

import h11
import structlog
import trio

from sandbox.netns import PROXY_PORT, Egress, listen_inside

log = structlog.get_logger("sandbox.egress")


_HOP_BY_HOP: Final = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)


@dataclass(frozen=True, slots=True)
class Limits:
    """The proxy's bounds (see rule 3 of the module docstring)."""

    head_bytes: int = 64 * 1024
    head_timeout: float = 20.0
    idle_timeout: float = 600.0
    connect_timeout: float = 15.0
    connections: int = 256
    chunk: int = 1024 * 1024


@dataclass(frozen=True, slots=True)
class Request:
    """One connection (or one plain-HTTP request) to judge.

    ``via``: ``connect`` (a CONNECT tunnel), ``http`` (a forwarded request),
    ``forward`` (a loopback port forwarded as is). ``problem`` is set when the
    proxy refuses it whatever the rules (the judge records it as refused)."""

    host: str
    port: int
    method: str | None = None
    path: str | None = None
    via: str = "connect"
    origin: str = "command"
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class Answer:
    """The judge's word: allowed or not, why, and where to connect."""

    allowed: bool
    reason: str
    addresses: tuple[str, ...] = ()


Judge = Callable[[Request], Awaitable[Answer]]


async def resolve(host: str, port: int) -> tuple[str, ...]:
    """The addresses of ``host`` (the host's resolver), an IP literal as itself;
    empty when it does not resolve."""
    try:
        return (str(ipaddress.ip_address(host.strip("[]"))),)
    except ValueError:
        pass
    try:
        infos = await trio.socket.getaddrinfo(host, port, type=trio.socket.SOCK_STREAM)
    except OSError:
        return ()
    return tuple(dict.fromkeys(str(info[4][0]) for info in infos))


class _Refused(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


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


class EgressProxy:
    """The proxy of one attempt: accept loops for each sandbox attached, each
    connection judged by ``judge``. Open it with `open_egress`."""

    def __init__(self, nursery: trio.Nursery, judge: Judge, limits: Limits) -> None:
        self._nursery = nursery
        self.judge = judge
        self.limits = limits
        self._slots = trio.Semaphore(limits.connections)
        self.active = 0

    async def attach(self, pid: int, egress: Egress, origin: str) -> None:
        """Listen inside the network namespace of ``pid`` (a sandbox's pid 1) on
        the proxy port and the forwards, and serve them until the proxy closes."""
        places = [("127.0.0.1", egress.port), *egress.forwards]
        listeners = await trio.to_thread.run_sync(listen_inside, pid, places)
        for index, (sock, (host, port)) in enumerate(zip(listeners, places, strict=True)):
            listener = trio.SocketListener(trio.socket.from_stdlib_socket(sock))
            forward = None if index == 0 else (host, port)
            self._nursery.start_soon(self._accept, listener, origin, forward)

    async def _accept(
        self, listener: trio.SocketListener, origin: str, forward: tuple[str, int] | None
    ) -> None:
        async with listener:
            while True:
                stream = await listener.accept()
                self._nursery.start_soon(self._serve, stream, origin, forward)

    async def _serve(
        self, stream: trio.SocketStream, origin: str, forward: tuple[str, int] | None
    ) -> None:
        async with stream:
            try:
                self._slots.acquire_nowait()
            except trio.WouldBlock:
                with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                    await stream.send_all(
                        error_response(503, f"over {self.limits.connections} connections")
                    )
                return
            self.active += 1
            try:
                if forward is not None:
                    await self._forward(stream, origin, *forward)
                else:
                    await self._proxy(stream, origin)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            finally:
                self.active -= 1
                self._slots.release()

    # -- a forwarded loopback port -------------------------------------------------

    async def _forward(self, stream: trio.SocketStream, origin: str, host: str, port: int) -> None:
        answer = await self.judge(Request(host, port, via="forward", origin=origin))
        if not answer.allowed:
            return
        upstream = await self._connect(answer.addresses, port)
        if upstream is None:
            return
        async with upstream:
            await self._relay(stream, upstream, b"")

    # -- the proxy port: CONNECT and absolute-form HTTP ----------------------------

    async def _proxy(self, stream: trio.SocketStream, origin: str) -> None:
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.head_bytes)
        kept = _Kept()
        try:
            while True:
                try:
                    request = await self._head(conn, stream)
                except _Refused as refused:
                    problem = Request("-", 0, via="http", origin=origin, problem=refused.reason)
                    await self.judge(problem)
                    await self._refuse(stream, refused.status, refused.reason)
                    return
                if request is None:
                    return
                if request.method == b"CONNECT":
                    await kept.drop()
                    await self._tunnel(conn, stream, request, origin)
                    return
                if not await self._forward_http(conn, stream, request, origin, kept):
                    return
                if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                    return
                conn.start_next_cycle()
        finally:
            with trio.CancelScope(shield=True):
                await kept.drop()

    async def _head(self, conn: h11.Connection, stream: trio.SocketStream) -> h11.Request | None:
        """The next request head, or None when the client closed between requests."""
        with trio.move_on_after(self.limits.head_timeout):
            while True:
                try:
                    event = conn.next_event()
                except h11.RemoteProtocolError as e:
                    status = e.error_status_hint if e.error_status_hint in _PHRASES else 400
                    if status == 431:
                        why = f"the request head is over {self.limits.head_bytes} bytes"
                    else:
                        why = f"malformed request ({e})"
                    raise _Refused(status, why) from None
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(self.limits.chunk)
                    conn.receive_data(data)
                    continue
                if isinstance(event, h11.Request):
                    return event
                return None  # ConnectionClosed (or PAUSED at the end)
        raise _Refused(408, f"no complete request head in {self.limits.head_timeout:g} s")

    async def _refuse(self, stream: trio.SocketStream, status: int, reason: str) -> None:
        """Send the error, then read and drop what the client still sends for a
        moment (bounded), so that it reads the answer instead of a reset."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            await stream.send_all(error_response(status, reason))
            await stream.send_eof()
            with trio.move_on_after(1.0):
                drained = 0
                while drained < 16 * 1024 * 1024:
                    data = await stream.receive_some(self.limits.chunk)
                    if not data:
                        break
                    drained += len(data)

    async def _tunnel(
        self, conn: h11.Connection, stream: trio.SocketStream, request: h11.Request, origin: str
    ) -> None:
        target = request.target.decode("ascii", "replace")
        host, port = _authority(target)
        problem = None if port is not None else f"CONNECT target {target[:200]!r} is not host:port"
        asked = Request(host or "-", port or 0, "CONNECT", None, "connect", origin, problem)
        answer = await self.judge(asked)
        if not answer.allowed:
            await self._refuse(stream, 403 if problem is None else 400, answer.reason)
            return
        assert port is not None
        upstream = await self._connect(answer.addresses, port)
        if upstream is None:
            await self._refuse(stream, 502, f"cannot connect to {host}:{port}")
            return
        async with upstream:
            await stream.send_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            early, _ = conn.trailing_data
            await self._relay(stream, upstream, bytes(early))

    async def _forward_http(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        request: h11.Request,
        origin: str,
        kept: _Kept,
    ) -> bool:
        """Judge and forward one absolute-form request; whether the connection
        may carry another. The upstream connection is kept for the next
        request to the same place (each request is judged all the same)."""
        target = request.target.decode("ascii", "replace")
        method = request.method.decode("ascii", "replace")
        url = urlsplit(target)
        host, port, problem = url.hostname or "", None, None
        try:
            port = url.port or 80
        except ValueError:
            problem = f"the request target {target[:200]!r} has a bad port"
        if url.scheme != "http" or not host:
            problem = (
                f"{target[:200]!r} is not an absolute http:// URL (a proxy forwards "
                "http://host/path; use CONNECT for anything else)"
            )
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        hosts = [v for k, v in request.headers if k == b"host"]
        if problem is None and hosts:
            given = hosts[0].decode("ascii", "replace").lower()
            expected = {url.netloc.lower(), f"{url.hostname}:{port}".lower()}
            if port == 80:
                expected.add((url.hostname or "").lower())
            if given not in expected:
                problem = (
                    f"the Host header ({given[:200]!r}) disagrees with the target "
                    f"({url.netloc[:200]!r})"
                )
        asked = Request(host or "-", port or 0, method, path, "http", origin, problem)
        answer = await self.judge(asked)
        if not answer.allowed:
            await self._refuse(stream, 403 if problem is None else 400, answer.reason)
            return False
        assert port is not None
        key = (answer.addresses, port)
        if kept.key != key or kept.stream is None:
            await kept.drop()
            upstream = await self._connect(answer.addresses, port)
            if upstream is None:
                await self._refuse(stream, 502, f"cannot connect to {host}:{port}")
                return False
            kept.key, kept.stream, kept.client = key, upstream, h11.Connection(h11.CLIENT)
        try:
            reusable = await self._exchange(conn, stream, kept, request, path)
        except (trio.BrokenResourceError, trio.ClosedResourceError, h11.ProtocolError):
            await kept.drop()
            return False
        if not reusable:
            await kept.drop()
        elif kept.client is not None:
            kept.client.start_next_cycle()
        return conn.our_state is h11.DONE

    async def _exchange(
        self,
        conn: h11.Connection,
        stream: trio.SocketStream,
        kept: _Kept,
        request: h11.Request,
        path: str,
    ) -> bool:
        """One request and its response, streamed as they come; whether the
        upstream connection may carry another."""
        upstream, client = kept.stream, kept.client
        assert upstream is not None and client is not None
        headers = [(k, v) for k, v in request.headers if k not in _HOP_BY_HOP]
        # What each side is sent is gathered and written once per read from the
        # other side (a small exchange is one write each way, not three).
        out = bytearray(client.send(h11.Request(method=request.method, target=path, headers=headers)) or b"")
        while True:  # the request body
            event = conn.next_event()
            if event is h11.NEED_DATA:
                if out:
                    await upstream.send_all(out)
                    out.clear()
                with trio.fail_after(self.limits.idle_timeout):
                    conn.receive_data(await stream.receive_some(self.limits.chunk))
                continue
            if isinstance(event, h11.Data):
                out += client.send(h11.Data(data=event.data)) or b""
            elif isinstance(event, h11.EndOfMessage):
                out += client.send(h11.EndOfMessage()) or b""
                await upstream.send_all(out)
                break
            else:
                return False
        remaining: int | None = None
        back = bytearray()
        while True:  # the response
            event = client.next_event()
            if event is h11.NEED_DATA:
                if back:
                    await stream.send_all(back)
                    back.clear()
                if remaining is not None:
                    return await self._raw_body(conn, stream, upstream, remaining)
                with trio.move_on_after(self.limits.idle_timeout) as idle:
                    client.receive_data(await upstream.receive_some(self.limits.chunk))
                if idle.cancelled_caught:
                    return False
                continue
            if isinstance(event, h11.InformationalResponse):
                continue
            if isinstance(event, h11.Response):
                kept_headers = [(k, v) for k, v in event.headers if k not in _HOP_BY_HOP]
                remaining = _big_body(event, request.method)
                if remaining is not None:  # copied raw below: this connection ends with it
                    kept_headers.append((b"connection", b"close"))
                response = h11.Response(
                    status_code=event.status_code, headers=kept_headers, reason=event.reason
                )
                back += conn.send(response) or b""
            elif isinstance(event, h11.Data):
                if remaining is not None:
                    remaining -= len(event.data)
                back += conn.send(h11.Data(data=event.data)) or b""
            elif isinstance(event, h11.EndOfMessage):
                back += conn.send(h11.EndOfMessage()) or b""
                await stream.send_all(back)
                return client.our_state is h11.DONE and client.their_state is h11.DONE
            else:  # the upstream closed early
                if back:
                    await stream.send_all(back)
                return False

    async def _raw_body(
        self, conn: h11.Connection, stream: trio.SocketStream, upstream: trio.SocketStream,
        remaining: int,
    ) -> bool:
        """The rest of a large Content-Length body, copied without parsing it
        (h11 would copy each chunk twice more: spliced where the kernel can);
        neither connection is reused after it."""
        idle = trio.CancelScope(deadline=trio.current_time() + self.limits.idle_timeout)
        left: int | None = 0
        with idle:
            left = await _splice(
                upstream, stream, idle, self.limits.idle_timeout, self.limits.chunk, remaining
            )
        if idle.cancelled_caught or left is not None:
            return False  # spliced (or idle too long): the client's connection ends here
        while remaining > 0:
            with trio.move_on_after(self.limits.idle_timeout) as idle:
                data = await upstream.receive_some(min(self.limits.chunk, remaining))
            if idle.cancelled_caught or not data:
                return False
            remaining -= len(data)
            await stream.send_all(conn.send(h11.Data(data=data)) or b"")
        await stream.send_all(conn.send(h11.EndOfMessage()) or b"")
        return False

    # -- upstream and relay --------------------------------------------------------

    async def _connect(self, addresses: Sequence[str], port: int) -> trio.SocketStream | None:
        for address in addresses:
            with trio.move_on_after(self.limits.connect_timeout):
                try:
                    return await trio.open_tcp_stream(address, port)
                except OSError:
                    continue
        return None

    async def _relay(self, inside: trio.SocketStream, upstream: trio.SocketStream, early: bytes) -> None:
        """Bytes both ways until both sides are done, or nothing moves for
        ``idle_timeout`` seconds."""
        if early:
            await upstream.send_all(early)
        idle = trio.CancelScope(deadline=trio.current_time() + self.limits.idle_timeout)
        limit = self.limits.idle_timeout

        async def pump(source: trio.SocketStream, sink: trio.SocketStream) -> None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                if await _splice(source, sink, idle, limit, self.limits.chunk) is not None:
                    return
                while True:
                    data = await source.receive_some(self.limits.chunk)
                    idle.deadline = trio.current_time() + limit
                    if not data:
                        with contextlib.suppress(OSError):
                            await sink.send_eof()
                        return
                    await sink.send_all(data)

        with idle:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pump, inside, upstream)
                nursery.start_soon(pump, upstream, inside)


async def _splice(
    source: trio.SocketStream,
    sink: trio.SocketStream,
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
    src, dst = source.socket.fileno(), sink.socket.fileno()
    pipe_r, pipe_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    flags = os.SPLICE_F_MOVE | os.SPLICE_F_NONBLOCK
    left = count
    try:
        while left is None or left > 0:
            want = chunk if left is None else min(chunk, left)
            try:
                moved = os.splice(src, pipe_w, want, flags=flags)
            except BlockingIOError:
                await trio.lowlevel.wait_readable(source.socket)
                continue
            idle.deadline = trio.current_time() + limit
            if moved == 0:
                if count is None:
                    with contextlib.suppress(OSError):
                        await sink.send_eof()
                return left if left is not None else 0
            if left is not None:
                left -= moved
            while moved:
                try:
                    moved -= os.splice(pipe_r, dst, moved, flags=flags)
                except BlockingIOError:
                    await trio.lowlevel.wait_writable(sink.socket)
        return 0
    finally:
        os.close(pipe_r)
        os.close(pipe_w)


_RAW_BODY_BYTES: Final = 1 << 20
"""A response body at least this long is copied raw once its head is parsed."""


def _big_body(response: h11.Response, method: bytes) -> int | None:
    """The body length of a response worth copying raw, else None."""
    if method == b"HEAD" or response.status_code in (204, 304):
        return None
    for name, value in response.headers:
        if name == b"content-length" and value.isdigit() and int(value) >= _RAW_BODY_BYTES:
            return int(value)
    return None


class _Kept:
    """The upstream connection of one client connection, kept between its requests."""

    def __init__(self) -> None:
        self.key: tuple[tuple[str, ...], int] | None = None
        self.stream: trio.SocketStream | None = None
        self.client: h11.Connection | None = None

    async def drop(self) -> None:
        if self.stream is not None:
            await self.stream.aclose()
        self.key, self.stream, self.client = None, None, None


def _authority(target: str) -> tuple[str | None, int | None]:
    """``host:port`` (``[v6]:port``) of a CONNECT target; (None, None) if not one."""
    if target.startswith("["):
        end = target.find("]")
        host, rest = (target[1:end], target[end + 1 :]) if end > 0 else ("", "")
    else:
        host, _, port_text = target.rpartition(":")
        rest = ":" + port_text if host else ""
    if not host or not rest.startswith(":") or not rest[1:].isdigit():
        return None, None
    port = int(rest[1:])
    if not 0 < port < 65536 or any(c in host for c in "/@ \t"):
        return None, None
    return host, port


@asynccontextmanager
async def open_egress(judge: Judge, limits: Limits | None = None) -> AsyncIterator[EgressProxy]:
    """An `EgressProxy` whose accept loops and connections live in this block;
    leaving it closes every listener and connection."""
    async with trio.open_nursery() as nursery:
        proxy = EgressProxy(nursery, judge, limits or Limits())
        try:
            yield proxy
        finally:
            nursery.cancel_scope.cancel()


__all__ = [
    "PROXY_PORT",
    "Answer",
    "Egress",
    "EgressProxy",
    "Judge",
    "Limits",
    "Request",
    "error_response",
    "open_egress",
    "resolve",
]
