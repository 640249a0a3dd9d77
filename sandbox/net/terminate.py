"""The proxy's side of a terminated connection: HTTP read request by request,
the credential swapped in, each call recorded with what its response cost.

Rules of this file (everything between a judged, terminated connection and its
upstream):

1. Only hosts a credential is bound to come here (`Interception.terminated`):
   the connection was judged like any other first. TLS is terminated with a
   leaf of the attempt's CA for exactly the host judged (`governor.sandbox.net.tls`),
   and the real host is verified against the host's trust store.
2. Each request is read strictly (`governor.sandbox.net.http1`), its
   placeholders replaced by the real values (`governor.sandbox.net.credentials`;
   a placeholder bound elsewhere is refused before anything is sent), its Host
   set to the host judged, then sent to the addresses the judge named.
3. Each response is passed on as it comes (a stream is never held back) and
   read on its way by a `governor.sandbox.net.model_calls.UsageReader`; once
   it ended, one `ModelCall` goes to the recorder, with no prompt, completion
   or key in it (the path without its query string).
"""

from __future__ import annotations

import contextlib
import socket
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final
from urllib.parse import urlsplit

import trio

from governor.sandbox.net import http1
from governor.sandbox.net.credentials import Binding, Credentials, Leak
from governor.sandbox.net.judge import ConnectionAnswer, ConnectionRequest, ProxyLimits
from governor.sandbox.net.model_calls import READ_CODINGS, Usage, UsageReader, spending_call
from governor.sandbox.net.tls import UPSTREAM_CA_ENV, AttemptCA
from governor.sandbox.net.wire import error_response, response_head

_READ: Final = 64 * 1024


@dataclass(frozen=True, slots=True)
class ModelCall:
    """One request to a terminated host and what its response said: a record
    of kind ``model``."""

    host: str
    port: int
    method: str
    path: str
    status: int | None
    usage: Usage
    first_byte_s: float | None
    duration_s: float
    origin: str
    credentials: tuple[str, ...] = ()
    """The variables whose real value was put in."""
    streamed: bool = False
    response_bytes: int = 0
    unread: bool = False
    """A call that spends tokens, answered, whose usage could not be read:
    a tokens limit fails closed on it (`governor.attempt.budget.Budget.unread`)."""


Recorder = Callable[[ModelCall], Awaitable[None]]


async def _nothing(call: ModelCall) -> None:
    return None


@dataclass
class Interception:
    """What the proxy needs to terminate: the credentials (which hosts, what to
    swap), the CA (None: plain-HTTP bindings only), the upstream's trust, and
    who records each call."""

    credentials: Credentials
    ca: AttemptCA | None = None
    upstream: ssl.SSLContext | None = None
    record: Recorder = field(default=_nothing)
    refusal: Callable[[], str | None] = field(default=lambda: None)
    """Why the next request is refused (a budget passed), or None: asked
    before each request is sent."""
    metered: bool = False
    """A ``[limits] tokens`` or ``cost_usd`` is set: the model API carries only
    the calls whose usage is read (`spending_call`), one at a time, so that
    no call starts before the one in flight was counted (calls opened at once
    would each pass the check before any ended, the limit run past as many
    times over)."""
    in_flight: trio.Lock = field(default_factory=trio.Lock)

    def terminated(self, host: str, port: int) -> Binding | None:
        """The binding of ``host:port`` when the proxy reads its requests
        (a TLS one only with a CA to terminate it)."""
        found = self.credentials.terminated(host, port)
        if found is None or (found.tls and (self.ca is None or self.upstream is None)):
            return None
        return found


class _Prefixed(trio.abc.Stream):
    """A stream whose first bytes were already read (a ClientHello sent right
    after a CONNECT head)."""

    def __init__(self, stream: trio.abc.Stream, first: bytes) -> None:
        self._stream = stream
        self._first = first

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self._stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self._stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self._first:
            data, self._first = self._first, b""
            return data
        return await self._stream.receive_some(max_bytes)

    async def send_eof(self) -> None:
        with contextlib.suppress(AttributeError, trio.BrokenResourceError, OSError):
            await self._stream.send_eof()  # type: ignore[attr-defined]

    async def aclose(self) -> None:
        await self._stream.aclose()


class _Reader:
    """A stream with what was read from it and not yet used; every read moves
    the idle deadline of ``idle``."""

    def __init__(self, stream: trio.abc.Stream, idle: trio.CancelScope, limit: float) -> None:
        self.stream = stream
        self.buffer = bytearray()
        self._idle = idle
        self._limit = limit

    async def more(self) -> bytes:
        try:
            data = bytes(await self.stream.receive_some(_READ))
        except (trio.BrokenResourceError, ssl.SSLError, OSError):
            data = b""
        self._idle.deadline = trio.current_time() + self._limit
        self.buffer += data
        return data

    async def head(self, limit: int) -> bytes | None:
        searched = 0
        while True:
            end = http1.head_end(self.buffer, limit, max(0, searched - 3))
            searched = len(self.buffer)
            if end >= 0:
                block = bytes(self.buffer[: end - 4])
                del self.buffer[:end]
                return block
            if not await self.more():
                if self.buffer.strip():
                    raise http1.HttpError(400, "the connection ended inside a head")
                return None

    async def send(self, data: bytes | bytearray) -> None:
        await self.stream.send_all(data)


def _stream(sock: socket.socket) -> trio.SocketStream:
    return trio.SocketStream(trio.socket.from_stdlib_socket(sock))


async def serve(
    client: socket.socket,
    pending: bytes,
    upstream: socket.socket,
    host: str,
    port: int,
    binding: Binding,
    interception: Interception,
    limits: ProxyLimits,
    origin: str,
    ask: Callable[[ConnectionRequest], Awaitable[ConnectionAnswer]],
) -> None:
    """Serve one terminated connection (``client``, already judged; ``upstream``
    connected to the addresses judged) until either side ends it. The sockets
    stay the caller's to close."""
    idle = trio.CancelScope(deadline=trio.current_time() + limits.idle_timeout)
    with idle:
        inside: trio.abc.Stream = _Prefixed(_stream(client), pending)
        outside: trio.abc.Stream = _stream(upstream)
        if binding.tls:
            assert interception.ca is not None and interception.upstream is not None
            inside = trio.SSLStream(inside, interception.ca.server_context(host), server_side=True)
            outside = trio.SSLStream(outside, interception.upstream, server_hostname=host)
            try:
                await inside.do_handshake()
                await outside.do_handshake()
            except (trio.BrokenResourceError, ssl.SSLError, OSError) as e:
                await _tell(inside, 502, f"TLS with {host}:{port} failed: {_why(e)}")
                return
        exchange = _Exchange(
            _Reader(inside, idle, limits.idle_timeout),
            _Reader(outside, idle, limits.idle_timeout),
            host, port, binding.tls, interception, limits, origin, ask,
        )  # fmt: skip
        with contextlib.suppress(trio.BrokenResourceError, ssl.SSLError, OSError):
            try:
                while await exchange.one():
                    pass
            except http1.HttpError as e:
                # a malformed message (a chunk size of `zz`, a head past its bound)
                # ends this connection, answered if it still can be, never the proxy
                # and every other connection with it
                await _tell(inside, e.status, e.reason)


def _why(error: BaseException) -> str:
    """What went wrong with a TLS handshake, for a person: an untrusted
    certificate names the variable that adds a CA."""
    cause = error.__cause__ or error.__context__ or error
    if isinstance(cause, ssl.SSLCertVerificationError):
        return (
            f"certificate verify failed ({cause.verify_message}): the host's certificate is "
            f"not trusted here; name its CA in {UPSTREAM_CA_ENV} if it should be"
        )
    return str(getattr(cause, "reason", None) or cause)[:300]


async def _tell(stream: trio.abc.Stream, status: int, reason: str) -> None:
    with contextlib.suppress(trio.BrokenResourceError, ssl.SSLError, OSError):
        await stream.send_all(error_response(status, reason))


_OURS: Final = (b"host", b"content-length", b"transfer-encoding", b"expect", b"accept-encoding")


class _Exchange:
    """The requests of one terminated connection, one at a time."""

    def __init__(
        self,
        inside: _Reader,
        outside: _Reader,
        host: str,
        port: int,
        tls: bool,
        interception: Interception,
        limits: ProxyLimits,
        origin: str,
        ask: Callable[[ConnectionRequest], Awaitable[ConnectionAnswer]],
    ) -> None:
        self.inside, self.outside = inside, outside
        self.host, self.port, self.tls = host, port, tls
        self.interception = interception
        self.limits = limits
        self.origin = origin
        self.ask = ask
        name = f"[{host}]" if ":" in host else host
        default = 443 if tls else 80
        self.host_field = (name if port == default else f"{name}:{port}").encode()

    async def one(self) -> bool:
        """Carry one request and its response; whether the connection goes on."""
        with trio.move_on_after(self.limits.head_timeout) as waiting:
            try:
                block = await self.inside.head(self.limits.head_bytes)
            except http1.HttpError as e:
                await _tell(self.inside.stream, e.status, e.reason)
                return False
        if waiting.cancelled_caught or block is None:
            return False
        try:
            head = http1.parse_request(block)
            framing = http1.request_framing(head)
        except http1.HttpError as e:
            await _tell(self.inside.stream, e.status, e.reason)
            return False
        method = head.method.decode("ascii", "replace")
        if head.target.startswith(b"http://"):  # absolute form, through the proxy port
            origin_form = self._origin_form(head.target)
            if origin_form is None:
                reason = (
                    f"a request to another host on a connection read for {self.host}:{self.port}: "
                    "open a connection per host"
                )
                await _tell(self.inside.stream, 400, reason)
                return False
            head.target = origin_form
        path = head.target.split(b"?", 1)[0].decode("ascii", "replace")[:512]
        try:
            target, fields, used = self.interception.credentials.swap(
                head.target, head.forwarded(), self.host, self.port, tls=self.tls, method=method
            )
        except Leak as e:
            request = ConnectionRequest(self.host, self.port, method, path, "http", self.origin, str(e))
            await self.ask(request)
            await _tell(self.inside.stream, 403, str(e))
            return False
        spends = spending_call(method, path)
        if self.interception.metered and spends is None:
            reason = (
                f"{method} {path[:200]} may spend tokens whose usage the governor cannot read "
                "(a batch, a file for one): with [limits] tokens or cost_usd set, a model API "
                "carries only the calls whose usage is read on the wire (refused)"
            )
            request = ConnectionRequest(self.host, self.port, method, path, "http", self.origin, reason)
            await self.ask(request)
            await _tell(self.inside.stream, 403, reason)
            return False
        one_at_a_time = self.interception.metered and spends is True
        async with self.interception.in_flight if one_at_a_time else contextlib.nullcontext():
            return await self._carried(head, framing, method, path, target, fields, used, spends)

    async def _carried(
        self,
        head: http1.Head,
        framing: http1.Framing,
        method: str,
        path: str,
        target: bytes,
        fields: list[tuple[bytes, bytes]],
        used: tuple[str, ...],
        spends: bool | None,
    ) -> bool:
        """Send one request on (unless the budget refuses it) and pass its
        response back. Every request sent upstream is recorded however its
        exchange ends (the client gone mid-stream, the upstream closed, the
        attempt cancelled), with the usage read so far: the API billed it."""
        refused = self.interception.refusal()
        if refused is not None:
            request = ConnectionRequest(self.host, self.port, method, path, "http", self.origin, refused)
            await self.ask(request)
            await _tell(self.inside.stream, 403, refused)
            return False
        out = [(b"host", self.host_field)]
        out += [(k, v) for k, v in fields if k not in _OURS]
        # the usage is read in the codings the reader knows, whatever the agent accepts
        out.append((b"accept-encoding", READ_CODINGS))
        if framing.length:
            out.append((b"content-length", b"%d" % framing.length))
        if framing.chunked:
            out.append((b"transfer-encoding", b"chunked"))
        if b"100-continue" in (v.lower() for v in head.values(b"expect")) and not framing.empty:
            await self.inside.send(b"HTTP/1.1 100 Continue\r\n\r\n")
        started = trio.current_time()
        status: int | None = None
        first_byte: float | None = None
        reader: UsageReader | None = None
        try:
            await self.outside.send(_head(b"%s %s HTTP/1.1" % (head.method, target), out))
            if not await _body(self.inside, self.outside, framing, None):
                return False
            response = await self._response()
            if response is None:
                await _tell(self.inside.stream, 502, f"{self.host}:{self.port} closed without a response")
                return False
            first_byte = trio.current_time() - started
            status = response.status
            rframing = http1.response_framing(response, head.method)
            content_type = b"".join(response.values(b"content-type")[:1]).decode("latin-1")
            coding = b"".join(response.values(b"content-encoding")[:1]).decode("latin-1")
            reader = UsageReader(content_type, chunked=rframing.chunked, encoding=coding)
            fields_back = response.forwarded()
            if rframing.chunked:
                fields_back.append((b"transfer-encoding", b"chunked"))
            ends = head.close or rframing.until_close or response.close
            if ends:
                fields_back.append((b"connection", b"close"))
            first = b"HTTP/1.1 %d %s" % (response.status, response.reason)
            await self.inside.send(_head(first, fields_back))
            complete = await _body(self.outside, self.inside, rframing, reader)
        finally:
            with trio.CancelScope(shield=True):  # recorded even as the attempt is cancelled
                usage = reader.usage() if reader is not None else Usage()
                unread = bool(spends) and status is not None and 200 <= status < 300 and not usage.tokens
                await self._record(method, path, status, usage, first_byte, started, used, reader, unread)
        if rframing.until_close:
            with contextlib.suppress(AttributeError, trio.BrokenResourceError, ssl.SSLError, OSError):
                await self.inside.stream.send_eof()  # type: ignore[attr-defined]
        return complete and not ends

    def _origin_form(self, target: bytes) -> bytes | None:
        """An absolute-form target's path and query when it names this
        connection's host and port, else None."""
        url = urlsplit(target.decode("ascii", "replace"))
        try:
            port = url.port or 80
        except ValueError:
            return None
        if (url.hostname or "").lower().rstrip(".") != self.host.lower() or port != self.port:
            return None
        rest = (url.path or "/") + (f"?{url.query}" if url.query else "")
        return rest.encode("ascii", "replace")

    async def _response(self) -> http1.Head | None:
        return await response_head(self.outside, self.limits.head_bytes)

    async def _record(
        self,
        method: str,
        path: str,
        status: int | None,
        usage: Usage,
        first_byte: float | None,
        started: float,
        used: tuple[str, ...],
        reader: UsageReader | None,
        unread: bool = False,
    ) -> None:
        call = ModelCall(
            self.host, self.port, method, path, status, usage, first_byte,
            trio.current_time() - started, self.origin, used,
            reader.streamed if reader is not None else False,
            reader.bytes if reader is not None else 0,
            unread,
        )  # fmt: skip
        await self.interception.record(call)


def _head(first: bytes, fields: list[tuple[bytes, bytes]]) -> bytearray:
    out = bytearray(first)
    out += b"\r\n"
    for name, value in fields:
        out += b"%s: %s\r\n" % (name, value)
    out += b"\r\n"
    return out


async def _body(
    source: _Reader, sink: _Reader, framing: http1.Framing, reader: UsageReader | None
) -> bool:
    """Pass the body ``framing`` describes from ``source`` to ``sink`` as it
    comes, each piece fed to ``reader``; whether it came whole."""

    async def out(data: bytes | bytearray) -> None:
        if reader is not None:
            reader.feed(data)
        await sink.send(data)

    if framing.length:
        left = framing.length
        while left > 0:
            if not source.buffer and not await source.more():
                return False
            take = bytes(source.buffer[:left])
            del source.buffer[: len(take)]
            left -= len(take)
            await out(take)
        return True
    if framing.chunked:
        body = http1.Chunked()
        while True:
            if not source.buffer and not await source.more():
                return False
            used = body.feed(source.buffer)
            data = bytes(source.buffer[:used])
            del source.buffer[:used]
            await out(data)
            if body.done:
                return True
    if framing.until_close:
        while True:
            if source.buffer:
                data = bytes(source.buffer)
                source.buffer.clear()
                await out(data)
            if not await source.more():
                return False
    return True
