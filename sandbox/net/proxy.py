"""The egress proxy: a sandbox's only way out, every connection a decision.

A sandbox below full-access has a network namespace of its own, with nothing
in it but loopback. The proxy listens inside it (`governor.sandbox.net.netns`: the
listening sockets are made in the sandbox's namespace and accepted on from the
host's), on the port the proxy variables name (`proxy_env`) and on each
allowed loopback ``host:port`` it forwards (for clients that ignore proxy
variables for loopback: the model stand-ins of the tests, a local gateway).

Rules of this file (everything between an accepted socket and an upstream one):

1. Nothing is forwarded before the judge answered. The judge (the governor's
   gate, or `governor sandbox`'s) decides and records; the proxy only carries
   out its answer, connecting to exactly the addresses the judge was told
   (no second DNS lookup between the check and the connect).
2. HTTP is read by `governor.sandbox.net.http1` (strict heads, bodies forwarded as they
   came): ``CONNECT host:port`` opens a tunnel (bytes both ways, never parsed
   again: a second ``CONNECT`` inside goes to the allowed host as data); an
   absolute-form request (``GET http://host/path``) is forwarded, its Host
   header must agree with its target and is forwarded as the judged
   ``host[:port]`` (`judged_host`), never as the client spelled it, and each request of a kept-alive
   connection is judged on its own (a request smuggled after an allowed one
   is decided like any other). What no real request holds (a host longer
   than DNS allows) is refused by its length (`bounded`), never judged at it. ``Expect: 100-continue`` is answered by the
   proxy; other informational responses are not passed on.
3. Bounded: a request head over ``ProxyLimits.head_bytes`` is a 431, a first head
   not complete in ``ProxyLimits.head_timeout`` is a 408 (a kept-alive connection
   with no next request in that time is closed), at most
   ``ProxyLimits.connections`` at once per proxy (more are answered 503, and
   recorded as refusals: the log counts a burst of them), a
   tunnel or forward idle for ``ProxyLimits.idle_timeout`` is closed.
4. DNS is the proxy's, on the host (`resolve`); the sandbox has no resolver
   to ask (its ``/etc/resolv.conf`` names servers it cannot reach).

5. A host a credential is bound to (`Interception`) is terminated once
   judged: its requests read, the real key swapped in, each call recorded
   (`governor.sandbox.net.terminate`); a placeholder in a plain-HTTP request to
   any other host (or to a host its key goes to inside TLS only) is refused,
   read before the host is judged or looked up (`_exfiltration`): the try is
   recorded as one whatever the name. Every other host stays a tunnel.

What the proxy cannot see: what goes inside an allowed tunnel to a host that
is not terminated (TLS: the path, the headers, the body), nor whether an
allowed host relays further.
"""

from __future__ import annotations

import contextlib
import errno
import math
import socket
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Final
from urllib.parse import urlsplit

import structlog
import trio

from governor.sandbox.net import http1, terminate
from governor.sandbox.net.accepting import accept_forever
from governor.sandbox.net.credentials import Leak
from governor.sandbox.net.judge import (
    CONNECT_FAILURES,
    ConnectionAnswer,
    ConnectionRequest,
    Judge,
    ProxyLimits,
    bounded,
    literal_address,
    resolve,
)
from governor.sandbox.net.netns import Helper
from governor.sandbox.net.terminate import Interception
from governor.sandbox.net.wire import Wire, error_response, response_head, splice
from governor.sandbox.plan.egress import PROXY_PORT, Egress

log = structlog.get_logger("governor.sandbox.net.proxy")


class EgressProxy:
    """The proxy of one attempt: accept loops for each sandbox attached, each
    connection judged by ``judge``. Open it with `open_egress`."""

    def __init__(
        self,
        nursery: trio.Nursery,
        judge: Judge,
        limits: ProxyLimits,
        interception: Interception | None = None,
    ) -> None:
        self._nursery = nursery
        self.judge = judge
        self.limits = limits
        self.interception = interception
        """The credentials and CA of the hosts whose requests the proxy reads
        (`governor.sandbox.net.terminate`); None: every host a tunnel."""
        self._slots = trio.Semaphore(limits.connections)
        self._spare: Helper | None = None
        """A namespace helper started ahead of the next `attach` (its ~15 ms
        interpreter start is then off the sandbox's path)."""

    def keep_spare(self) -> None:
        """Start the next attach's helper now, if none waits."""
        if self._spare is None:
            self._spare = Helper()

    def drop_spare(self) -> None:
        if self._spare is not None:
            self._spare.close()
            self._spare = None

    async def attach(self, pid: int, egress: Egress, origin: str) -> None:
        """Listen inside the network namespace of ``pid`` (a sandbox's pid 1) on
        the proxy port and the forwards, and serve them until the proxy closes."""
        places = [("127.0.0.1", egress.port), *egress.forwards]
        helper, self._spare = self._spare or Helper(), None
        try:
            listeners = await trio.to_thread.run_sync(helper.listen, pid, places)
        finally:
            self.keep_spare()
        for index, (sock, (host, port)) in enumerate(zip(listeners, places, strict=True)):
            self.serve(sock, origin, None if index == 0 else (host, port))

    def serve(
        self, listener: socket.socket, origin: str, forward: tuple[str, int] | None = None
    ) -> None:
        """Serve the connections of ``listener`` (a listening TCP socket, now
        the proxy's) until the proxy closes: as the proxy port, or as the
        loopback ``forward`` ``(host, port)``."""
        self._nursery.start_soon(self._accept, listener, origin, forward)

    async def _accept(
        self, listener: socket.socket, origin: str, forward: tuple[str, int] | None
    ) -> None:
        def take(sock: socket.socket) -> None:
            self._nursery.start_soon(self._serve, Wire(sock), origin, forward)

        await accept_forever(listener, take)

    async def _serve(self, wire: Wire, origin: str, forward: tuple[str, int] | None) -> None:
        try:
            try:
                self._slots.acquire_nowait()
            except trio.WouldBlock:
                over = f"over {self.limits.connections} connections at once"
                await self._ask(ConnectionRequest("-", 0, via="http", origin=origin, problem=over))
                with contextlib.suppress(OSError):
                    await wire.send_all(
                        error_response(503, f"over {self.limits.connections} connections")
                    )
                return
            try:
                if forward is not None:
                    await self._forward(wire, origin, *forward)
                else:
                    await self._proxy(wire, origin)
            except OSError:
                pass  # a reset or a closed peer: this connection ends
            finally:
                self._slots.release()
        finally:
            wire.close()

    async def _ask(self, request: ConnectionRequest) -> ConnectionAnswer:
        """The judge's answer on ``request``, bounded first (`bounded`)."""
        return await self.judge(bounded(request))

    # -- a forwarded loopback port -------------------------------------------------

    async def _forward(self, wire: Wire, origin: str, host: str, port: int) -> None:
        answer = await self._ask(ConnectionRequest(host, port, via="forward", origin=origin))
        if not answer.allowed:
            return
        upstream = await self._connect(answer, port)
        if isinstance(upstream, str):
            return
        try:
            if not await self._terminated(wire, upstream, host, port, origin, tunnel=False):
                await self._relay(wire, upstream)
        finally:
            upstream.close()

    async def _terminated(
        self, wire: Wire, upstream: Wire, host: str, port: int, origin: str, *, tunnel: bool
    ) -> bool:
        """Serve a judged connection whose host a credential is bound to
        (`governor.sandbox.net.terminate`); False when it is not one (relay it).
        A tunnel to a plain-HTTP binding is read as plain HTTP (undici tunnels
        ``http://`` too). Only the agent's connections are terminated: its sandbox holds the placeholders and trusts
        the attempt's CA; a command's or an MCP server's stays a tunnel."""
        if self.interception is None or origin != "agent":
            return False
        binding = self.interception.terminated(host, port)
        if binding is None:
            return False  # a plain binding's tunnel is read as plain HTTP
        pending = bytes(wire.pending)
        wire.pending.clear()
        await terminate.serve(
            wire.sock, pending, upstream.sock, host, port, binding, self.interception,
            self.limits, origin, self._ask,
        )  # fmt: skip
        return True

    # -- the proxy port: CONNECT and absolute-form HTTP ----------------------------

    async def _proxy(self, wire: Wire, origin: str) -> None:
        # One deadline for the connection, moved as it goes (a head must come
        # in head_timeout, an exchange may idle idle_timeout): two scopes a
        # request cost ~15 us of a small request's time (bench/README.md).
        kept, served, waiting = _Kept(), 0, True
        problem: tuple[int, str] | None = None
        timer = trio.CancelScope()
        try:
            with timer:
                while True:
                    timer.deadline = trio.current_time() + self.limits.head_timeout
                    waiting = True
                    try:
                        block = await wire.head(self.limits.head_bytes)
                        if block is None:
                            return
                        head = http1.parse_request(block)
                        waiting = False
                        if head.method == b"CONNECT":
                            kept.drop()
                            timer.deadline = math.inf  # the tunnel keeps its own
                            await self._tunnel(wire, head, origin)
                            return
                        framing = http1.request_framing(head)
                    except http1.HttpError as e:
                        problem = (e.status, e.reason)
                        break
                    timer.deadline = math.inf  # the judge may ask a person: no limit on them
                    if await self._exfiltration(wire, head, origin):
                        return
                    if await self._read_plain(wire, block, head, origin, kept):
                        return
                    if not await self._forward_http(wire, head, framing, origin, kept, timer):
                        return
                    served += 1
        finally:
            kept.drop()
        if timer.cancelled_caught and waiting and not (served and not wire.pending.strip()):
            # no complete head in time (a kept-alive connection with no next
            # request is just closed)
            problem = (408, f"no complete request head in {self.limits.head_timeout:g} s")
        if problem is not None:
            await self._refuse_problem(wire, origin, *problem)

    async def _refuse_problem(self, wire: Wire, origin: str, status: int, reason: str) -> None:
        """A request refused whatever the rules: recorded, then answered."""
        if status == 431:
            reason = f"the request head is over {self.limits.head_bytes} bytes"
        elif status == 400:
            reason = f"malformed request ({reason})"
        await self._ask(ConnectionRequest("-", 0, via="http", origin=origin, problem=reason))
        await self._refuse(wire, status, reason)

    async def _refuse(self, wire: Wire, status: int, reason: str) -> None:
        """Send the error, then read and drop what the client still sends for a
        moment (bounded), so that it reads the answer instead of a reset."""
        with contextlib.suppress(OSError):
            await wire.send_all(error_response(status, reason))
            wire.shut()
            with trio.move_on_after(1.0):
                drained = 0
                while drained < 16 * 1024 * 1024:
                    data = await wire.recv(self.limits.chunk)
                    if not data:
                        break
                    drained += len(data)

    async def _tunnel(self, wire: Wire, head: http1.Head, origin: str) -> None:
        target = head.target.decode("ascii", "replace")
        host, port = _authority(target)
        problem = None if port is not None else f"CONNECT target {target[:200]!r} is not host:port"
        asked = ConnectionRequest(host or "-", port or 0, "CONNECT", None, "connect", origin, problem)
        answer = await self._ask(asked)
        if not answer.allowed:
            await self._refuse(wire, 403 if problem is None else 400, answer.reason)
            return
        assert port is not None and host is not None
        upstream = await self._connect(answer, port)
        if isinstance(upstream, str):
            await self._refuse(wire, 502, f"cannot connect to {host}:{port}: {upstream}")
            return
        try:
            await wire.send_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
            if not await self._terminated(wire, upstream, host, port, origin, tunnel=True):
                await self._relay(wire, upstream)
        finally:
            upstream.close()

    async def _exfiltration(self, wire: Wire, head: http1.Head, origin: str) -> bool:
        """Refuse, as its own record, a plain-HTTP request carrying a placeholder
        its credential may not take to the host it names: read before the host
        is judged or looked up, so that a try sent to an allowed name that does
        not resolve (or is refused, or asked about) is recorded as the
        exfiltration try it is, never as a failure. Whether it was one."""
        if self.interception is None:
            return False
        url = urlsplit(head.target.decode("ascii", "replace"))
        try:
            host, port = url.hostname or "", url.port or 80
        except ValueError:
            return False  # a bad target: `_forward_http` refuses it
        if url.scheme != "http" or not host:
            return False
        path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        target = path.encode("ascii", "replace")
        method = head.method.decode("ascii", "replace")
        try:
            self.interception.credentials.swap(
                target, head.forwarded(), host, port, tls=False, method=method
            )
        except Leak as e:
            asked = ConnectionRequest(host, port, method, url.path or "/", "http", origin, str(e))
            await self._ask(asked)
            await self._refuse(wire, 403, str(e))
            return True
        return False

    async def _read_plain(
        self, wire: Wire, block: bytes, head: http1.Head, origin: str, kept: _Kept
    ) -> bool:
        """Serve the agent's plain-HTTP requests to a host a credential is
        bound to (``http://`` base URL, not on loopback: through the proxy in
        absolute form) as a terminated connection, from this request on
        (`governor.sandbox.net.terminate`): judged once, then each request's key
        swapped and each call recorded. False when it is not one (forward it)."""
        if self.interception is None or origin != "agent":
            return False
        url = urlsplit(head.target.decode("ascii", "replace"))
        try:
            host, port = url.hostname or "", url.port or 80
        except ValueError:
            return False
        binding = self.interception.terminated(host, port) if url.scheme == "http" else None
        if binding is None or binding.tls:
            return False
        method = head.method.decode("ascii", "replace")
        path = url.path or "/"
        answer = await self._ask(ConnectionRequest(host, port, method, path, "http", origin))
        if not answer.allowed:
            await self._refuse(wire, 403, answer.reason)
            return True
        kept.drop()
        upstream = await self._connect(answer, port)
        if isinstance(upstream, str):
            await self._refuse(wire, 502, f"cannot connect to {host}:{port}: {upstream}")
            return True
        pending = block + b"\r\n\r\n" + bytes(wire.pending)  # the request, read again there
        wire.pending.clear()
        try:
            await terminate.serve(
                wire.sock, pending, upstream.sock, host, port, binding, self.interception,
                self.limits, origin, self._ask,
            )  # fmt: skip
        finally:
            upstream.close()
        return True

    async def _forward_http(
        self,
        wire: Wire,
        head: http1.Head,
        framing: http1.Framing,
        origin: str,
        kept: _Kept,
        idle: trio.CancelScope,
    ) -> bool:
        """Judge and forward one absolute-form request; whether the connection
        may carry another. The upstream connection is kept for the next
        request to the same place (each request is judged all the same)."""
        target = head.target.decode("ascii", "replace")
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
        hosts = head.values(b"host")
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
        method = head.method.decode("ascii", "replace")
        answer = await self._ask(ConnectionRequest(host or "-", port or 0, method, path, "http", origin, problem))
        idle.deadline = trio.current_time() + self.limits.idle_timeout
        if not answer.allowed:
            await self._refuse(wire, 403 if problem is None else 400, answer.reason)
            return False
        assert port is not None
        fields = [(k, v) for k, v in head.forwarded() if k not in _NOT_FORWARDED]
        if framing.length or head.values(b"content-length"):  # one value, however it came
            fields.append((b"content-length", b"%d" % framing.length))
        # the Host the upstream reads is the one judged, whatever the client spelled
        fields.insert(0, (b"host", judged_host(host, port)))
        if framing.chunked:
            fields.append((b"transfer-encoding", b"chunked"))
        target_bytes = path.encode("ascii", "replace")
        if self.interception is not None:
            try:
                target_bytes, fields, _ = self.interception.credentials.swap(
                    target_bytes, fields, host, port, tls=False, method=method
                )
            except Leak as e:
                shown = path.split("?", 1)[0]
                await self._ask(ConnectionRequest(host, port, method, shown, "http", origin, str(e)))
                await self._refuse(wire, 403, str(e))
                return False
        out = _head_bytes(b"%s %s %s" % (head.method, target_bytes, head.version), fields)
        key = (answer.addresses, port)
        reused = kept.key == key and kept.wire is not None
        if not reused:
            kept.drop()
            upstream = await self._connect(answer, port)
            if isinstance(upstream, str):
                await self._refuse(wire, 502, f"cannot connect to {host}:{port}: {upstream}")
                return False
            kept.key, kept.wire = key, upstream
        if b"100-continue" in (v.lower() for v in head.values(b"expect")) and not framing.empty:
            await wire.send_all(b"HTTP/1.1 100 Continue\r\n\r\n")  # ours: Expect is not forwarded
        # A kept connection the server closed meanwhile fails at once: a request
        # without a body is sent again on a new one.
        again = bytes(out) if reused and framing.empty else None
        try:
            assert kept.wire is not None
            try:
                response = await self._request(wire, kept.wire, framing, out, idle)
            except OSError:
                if again is None:
                    raise
                response = None
            if response is None and again is not None:
                kept.drop()
                upstream = await self._connect(answer, port)
                if not isinstance(upstream, str):
                    kept.key, kept.wire = key, upstream
                    await upstream.send_all(again)
                    response = await self._response(upstream, idle)
            if response is None:
                kept.drop()
                await self._refuse(wire, 502, f"{host}:{port} closed without a response")
                return False
            return await self._answer(wire, head, response, kept, idle)
        except http1.HttpError as e:
            kept.drop()
            await self._refuse(wire, e.status, e.reason)
            return False

    async def _request(
        self, wire: Wire, upstream: Wire, framing: http1.Framing, out: bytearray,
        idle: trio.CancelScope,
    ) -> http1.Head | None:
        """Send the request (``out``, its head, then its body) and read the
        response head (None if the upstream closed before one)."""
        if not await self._body(wire, upstream, framing, out, idle):
            raise OSError("the client's request body ended early")
        return await self._response(upstream, idle)

    async def _response(self, upstream: Wire, idle: trio.CancelScope) -> http1.Head | None:
        """The upstream's final response head (informational ones skipped: the
        proxy answers ``Expect`` itself), or None if it closed before one."""

        def idle_again() -> None:
            idle.deadline = trio.current_time() + self.limits.idle_timeout

        return await response_head(upstream, self.limits.head_bytes, idle_again)

    async def _answer(
        self, wire: Wire, head: http1.Head, response: http1.Head, kept: _Kept, idle: trio.CancelScope
    ) -> bool:
        """Send ``response`` and its body to the client; whether both
        connections may carry another request."""
        assert kept.wire is not None
        try:
            framing = http1.response_framing(response, head.method)
        except http1.HttpError as e:
            kept.drop()
            await self._refuse(wire, e.status, e.reason)
            return False
        ends = head.close or framing.until_close
        fields = response.forwarded()
        if framing.chunked:
            fields.append((b"transfer-encoding", b"chunked"))
        if ends:
            fields.append((b"connection", b"close"))
        first = b"HTTP/1.1 %d %s" % (response.status, response.reason)
        try:
            complete = await self._body(kept.wire, wire, framing, _head_bytes(first, fields), idle)
        except http1.HttpError:
            complete = False  # a malformed chunked body from the server: cut where it broke
        if not complete or response.close or framing.until_close or head.version != b"HTTP/1.1":
            kept.drop()
        return complete and not ends

    async def _body(
        self, source: Wire, sink: Wire, framing: http1.Framing, out: bytearray, idle: trio.CancelScope
    ) -> bool:
        """Send ``out`` (a head) and then the body ``framing`` describes from
        ``source`` to ``sink``, each read written as it comes (a stream is not
        held back); whether the body came whole with its end known, so that
        both connections may go on (never for a body that runs until close). A
        body of `_RAW_BODY_BYTES` or more is spliced once its head is out.
        Bytes after the body stay pending on ``source``."""
        limit, chunk = self.limits.idle_timeout, self.limits.chunk
        if framing.length:
            left = framing.length
            taken = source.pending[:left]
            del source.pending[:left]
            out += taken
            left -= len(taken)
            await sink.send_all(out)
            if left >= _RAW_BODY_BYTES:
                spliced = await splice(source.sock, sink.sock, idle, limit, chunk, left)
                if spliced is not None:
                    return spliced == 0
            while left > 0:
                data = await source.recv(min(chunk, left))
                if not data:
                    return False
                idle.deadline = trio.current_time() + limit
                left -= len(data)
                await sink.send_all(data)
            return True
        if framing.chunked:
            body = http1.Chunked()
            while True:
                if not source.pending:
                    if out:
                        await sink.send_all(out)
                        out.clear()
                    if not await source.recv_more(chunk):
                        return False
                    idle.deadline = trio.current_time() + limit
                used = body.feed(source.pending)
                out += source.pending[:used]
                del source.pending[:used]
                if body.done:
                    await sink.send_all(out)
                    return True
        await sink.send_all(out)
        if framing.until_close:
            if source.pending:
                await sink.send_all(source.pending)
                source.pending.clear()
            if await splice(source.sock, sink.sock, idle, limit, chunk) is None:
                while data := await source.recv(chunk):
                    idle.deadline = trio.current_time() + limit
                    await sink.send_all(data)
            return False
        return True

    # -- upstream and relay --------------------------------------------------------

    async def _connect(self, answer: ConnectionAnswer, port: int) -> Wire | str:
        """A connection to the first of the judged addresses that takes one, or
        what happened (`CONNECT_FAILURES`); told to the judge either way
        (``answer.connected``), so that a host that does not answer is recorded
        as failed, never left looking allowed and done."""
        failure = "unreachable"
        for address in answer.addresses:
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setblocking(False)
            try:
                with trio.move_on_after(self.limits.connect_timeout) as waited:
                    error = sock.connect_ex((address, port))
                    if error == errno.EINPROGRESS:
                        await trio.lowlevel.wait_writable(sock)
                        error = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if error == 0:
                        if answer.connected is not None:
                            await answer.connected(None)
                        return Wire(sock)
                failure = "timeout" if waited.cancelled_caught else _failure(error)
            except BaseException:
                sock.close()
                raise
            sock.close()
        if answer.connected is not None:
            await answer.connected(failure)
        return CONNECT_FAILURES[failure]

    async def _relay(self, inside: Wire, upstream: Wire) -> None:
        """Bytes both ways (what is pending first) until both sides are done,
        or nothing moves for ``idle_timeout`` seconds."""
        idle = trio.CancelScope(deadline=trio.current_time() + self.limits.idle_timeout)
        limit = self.limits.idle_timeout

        async def pump(source: Wire, sink: Wire) -> None:
            with contextlib.suppress(OSError):
                if source.pending:
                    await sink.send_all(source.pending)
                    source.pending.clear()
                if await splice(source.sock, sink.sock, idle, limit, self.limits.chunk) is not None:
                    return
                while data := await source.recv(self.limits.chunk):
                    idle.deadline = trio.current_time() + limit
                    await sink.send_all(data)
                sink.shut()

        with idle:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(pump, inside, upstream)
                nursery.start_soon(pump, upstream, inside)


def _failure(error: int) -> str:
    """The `CONNECT_FAILURES` word of a connect's ``errno``."""
    return "refused" if error == errno.ECONNREFUSED else "unreachable"


_NOT_FORWARDED: Final = (b"expect", b"content-length", b"host")
"""Fields the proxy writes itself (it answers ``Expect``; the Host is the judged one)."""


def judged_host(host: str, port: int) -> bytes:
    """The Host header of a forwarded request: the host and port the judge was
    asked about, never the client's spelling. A Host that a reader other than
    ours splits otherwise (``BAD\\@OK`` is ``OK`` to `urlsplit`, but may be
    ``BAD`` to an upstream that routes on it) never reaches the upstream."""
    name = f"[{host}]" if ":" in host else host
    text = name if port == 80 else f"{name}:{port}"
    return text.encode("ascii", "replace")


def _head_bytes(first: bytes, fields: Sequence[tuple[bytes, bytes]]) -> bytearray:
    out = bytearray(first)
    out += b"\r\n"
    for name, value in fields:
        out += b"%s: %s\r\n" % (name, value)
    out += b"\r\n"
    return out


_RAW_BODY_BYTES: Final = 1 << 20
"""A body at least this long is spliced once its head is out."""


class _Kept:
    """The upstream connection of one client connection, kept between its requests."""

    def __init__(self) -> None:
        self.key: tuple[tuple[str, ...], int] | None = None
        self.wire: Wire | None = None

    def drop(self) -> None:
        if self.wire is not None:
            self.wire.close()
        self.key, self.wire = None, None


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
async def open_egress(
    judge: Judge, limits: ProxyLimits | None = None, interception: Interception | None = None
) -> AsyncIterator[EgressProxy]:
    """An `EgressProxy` whose accept loops and connections live in this block;
    leaving it closes every listener and connection."""
    async with trio.open_nursery() as nursery:
        proxy = EgressProxy(nursery, judge, limits or ProxyLimits(), interception)
        try:
            yield proxy
        finally:
            nursery.cancel_scope.cancel()
            proxy.drop_spare()


__all__ = [
    "PROXY_PORT",
    "ConnectionAnswer",
    "ConnectionRequest",
    "Egress",
    "EgressProxy",
    "Interception",
    "Judge",
    "ProxyLimits",
    "error_response",
    "literal_address",
    "open_egress",
    "resolve",
]
