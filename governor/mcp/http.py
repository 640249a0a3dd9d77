"""An HTTP MCP server behind the relay: MCP Streamable HTTP, spoken by the governor.

The agent is given the same stdio shim as for a stdio server and never the
URL; behind the shim, `governor.mcp.relay_session.RelaySession` decides every
governed request as for a stdio server and hands what it forwards to
`HttpServer`, which speaks to the URL with the official SDK's streamable HTTP
client (`mcp.client.streamable_http`: the session id header, JSON and SSE
answers, the server's own stream of notifications and requests, ``DELETE``
at the end, redirects followed only within the URL's origin). It is
anyio-based and runs under trio as the relay does.

Rules of this file:

- **Every connection is decided**: the HTTP client opens its sockets
  through `_GovernedBackend`, which asks the attempt's network judge before
  a session's first connection to a host (kind ``network``, origin
  ``mcp:NAME``, recorded) and connects only to the addresses the judge named
  (no second lookup, for the session's later connections either). The URL's
  own host and port are allowed because the operator named them
  (`governor.policies.mcp.McpServer.hosts`); nothing else is.
- **A redirect away is refused and recorded**: the SDK does not follow it,
  and the relay records it as a refused ``network`` decision of the server's
  origin, naming the host it pointed to.
- **Headers are the operator's**: their values come from the variables the
  policy names (`governor.mcp.servers.server_headers`), are never logged, and
  are masked in every record (`governor.mcp.servers.secrets`) and in every
  message the server sends the agent (`governor.mcp.servers.Unsaid`): a server that quotes the
  token it was sent ("invalid token Bearer ...") hands it to no agent.
- **A body is bounded**: an answer that is not an event stream is cut off
  past `MAX_BODY` bytes (`_Capped`: the SDK would buffer it whole, endless
  or not), and that request answered an error saying so; an event stream's
  events are bounded by the SDK (``max_sse_event_size``).
- **The server's failures are that server's**: a host that cannot be reached,
  an HTTP error, a body that is not JSON-RPC end in an error the agent reads
  for its pending requests and a notice in the outcome (``problem``), never
  in the attempt's end.
"""

from __future__ import annotations

import contextlib
import json
import logging
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from typing import Any, Final

import httpcore2
import httpx2
import trio
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage
from mcp_types import jsonrpc_message_adapter
from pydantic import ValidationError

from governor.mcp import wire
from governor.mcp.servers import Unsaid
from governor.policies.mcp import McpServer, url_host
from governor.sandbox.net.judge import ConnectionRequest, Judge

# The SDK's client logs each failure it answers (a body it cannot parse, a
# redirect it does not follow) through the standard library, which the
# governor does not configure: Python's last-resort handler would print them
# on the person's terminal. What went wrong is the outcome's notice instead.
_sdk_log = logging.getLogger("mcp.client.streamable_http")
_sdk_log.addHandler(logging.NullHandler())
_sdk_log.propagate = False

CONNECT_TIMEOUT: Final = 30.0
"""Seconds one connection to the server may take (the server's ``timeout`` if shorter)."""
EXIT_GRACE: Final = 2.0
"""Seconds the session's end (its ``DELETE``) may take once the agent hung up."""
PARSE_ERROR: Final = -32700
"""The code the SDK's client gives a body it could not read as JSON-RPC."""
MAX_BODY: Final = wire.MAX_LINE
"""Bytes of one answer that is not an event stream: a stdio server's line is bounded the same."""
VIA: Final = "mcp-http"
"""A ``network`` record's ``via`` for a connection the governor makes for an HTTP server."""

Deliver = Callable[[wire.Message], Awaitable[None]]


class _GovernedBackend(httpcore2.AsyncNetworkBackend):
    """httpcore's network with connections judged first (see the module docstring).
    One per HTTP session: a host and port allowed once stay allowed for it, at
    the addresses judged then (its later connections -- the server's stream,
    a keep-alive closed by the server, the ``DELETE`` after the turn -- are
    that decision's, not new ones); a refusal is decided (and recorded) anew."""

    def __init__(self, judge: Judge, origin: str) -> None:
        self._judge = judge
        self._origin = origin
        self._inner = httpcore2.TrioBackend()
        self._allowed: dict[tuple[str, int], tuple[str, ...]] = {}

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        host = host.strip("[]")
        addresses = self._allowed.get((host, port))
        if addresses is None:
            answer = await self._judge(ConnectionRequest(host, port, via=VIA, origin=self._origin))
            if not answer.allowed:
                raise httpcore2.ConnectError(f"refused by the governor: {answer.reason}")
            addresses = self._allowed[(host, port)] = answer.addresses
        last: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as e:
                last = e
        raise last or httpcore2.ConnectError(f"{host}:{port}: no address to connect to")

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("an MCP server is reached over TCP only")

    async def sleep(self, seconds: float) -> None:
        await trio.sleep(seconds)


def ssl_context() -> ssl.SSLContext:
    """How an https:// server's certificate is checked: the default trust store,
    the host name verified (the URL's name, sent as SNI, though the socket
    goes to the judged address); no variable of the environment changes it."""
    return httpx2.create_ssl_context(trust_env=False)


class _Capped(httpx2.AsyncByteStream):
    """A response body that ends in an error past ``limit`` bytes, ``over``
    told first (before anything past the limit is kept)."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, over: Callable[[], None]) -> None:
        self._inner = inner
        self._limit = limit
        self._over = over

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        async for chunk in self._inner:
            seen += len(chunk)
            if seen > self._limit:
                self._over()
                raise httpx2.StreamError(f"the body is over {self._limit} bytes")
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class _GovernedTransport(httpx2.AsyncHTTPTransport):
    """httpx's transport over `_GovernedBackend`, no proxy from the environment;
    each body that is not an event stream `_Capped` at `MAX_BODY`."""

    def __init__(self, judge: Judge, origin: str, over: Callable[[httpx2.Request], None]) -> None:
        super().__init__(trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=ssl_context(),
            max_connections=8,
            network_backend=_GovernedBackend(judge, origin),
        )
        self._over = over

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        response = await super().handle_async_request(request)
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "text/event-stream":
            assert isinstance(response.stream, httpx2.AsyncByteStream)
            response.stream = _Capped(response.stream, MAX_BODY, lambda: self._over(request))
        return response


class HttpServer:
    """The relay's side of one agent connection to an HTTP server: what the
    session forwards goes out (`send`), what the server sends is delivered
    (`receive`), and the agent's hang-up ends the HTTP session (`close`)."""

    def __init__(
        self,
        server: McpServer,
        headers: Mapping[str, str],
        judge: Judge,
        problem: Callable[[str], None],
    ) -> None:
        assert server.url is not None
        self.server = server
        self.url = server.url
        self.host, self.port = url_host(server.url)
        self.origin = f"mcp:{server.name}"
        self._headers = dict(headers)
        self._unsaid = Unsaid.of(headers.values())
        self._judge = judge
        self._report = problem
        self._outbox, self._queued = trio.open_memory_channel[dict[str, Any]](16)
        self._done = trio.Event()
        self._scope = trio.CancelScope()
        self._deliver: Deliver | None = None
        self._failed: dict[str, str] = {}
        """Request id key -> why its HTTP answer failed (said before the error the SDK delivers for it)."""

    def _problem(self, why: str) -> None:
        """A notice for the outcome, the header values masked in it."""
        self._report(self._unsaid.text(why))

    @property
    def where(self) -> str:
        """The server's host and port, as its messages name it."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    async def send(self, body: Mapping[str, Any]) -> None:
        """Queue one message for the server (back-pressure: the queue is bounded)."""
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await self._outbox.send(dict(body))  # dropped once over: the server's end says why

    async def close(self) -> None:
        """The agent hung up: end the HTTP session (its ``DELETE``), bounded."""
        self._outbox.close()
        self._scope.deadline = min(self._scope.deadline, trio.current_time() + EXIT_GRACE)
        with trio.move_on_after(EXIT_GRACE + 1):
            await self._done.wait()

    async def receive(self, deliver: Deliver) -> str:
        """Speak to the server until the agent or the server ends; why it ended
        (what the session answers the requests still pending)."""
        self._deliver = deliver
        why = f"the MCP server {self.server.name} at {self.where} ended its session"
        try:
            with self._scope:
                timeout = httpx2.Timeout(min(CONNECT_TIMEOUT, self.server.timeout), read=None)
                client = httpx2.AsyncClient(
                    transport=_GovernedTransport(self._judge, self.origin, self._too_long),
                    headers=self._headers,
                    timeout=timeout,
                    follow_redirects=False,
                    trust_env=False,
                    event_hooks={"response": [self._answered]},
                )
                async with (
                    client,
                    streamable_http_client(self.url, http_client=client) as (read, write),
                    trio.open_nursery() as nursery,
                ):
                    nursery.start_soon(self._from_server, read, nursery.cancel_scope)
                    await self._to_server(write)
                    nursery.cancel_scope.cancel()
        except Exception as e:  # the SDK's task group: one failure ends the HTTP session
            why = f"the MCP server {self.server.name} at {self.where}: {_reason(e)}"
            self._problem(why)
        finally:
            self._outbox.close()
            self._done.set()
        return why

    async def _to_server(self, write: Any) -> None:
        async with self._queued:
            async for body in self._queued:
                try:
                    message = jsonrpc_message_adapter.validate_python(body)
                except ValidationError:
                    if "id" in body and "method" in body and self._deliver is not None:
                        # the relay checked its shape; the SDK's model is stricter
                        answer = wire.error(body["id"], wire.INVALID_REQUEST, "not a valid MCP message")
                        await self._deliver(wire.message_of(answer))
                    continue
                await write.send(SessionMessage(message))

    async def _from_server(self, read: Any, done: trio.CancelScope) -> None:
        assert self._deliver is not None
        async for item in read:
            if isinstance(item, Exception):  # a message the SDK could not read
                self._problem(f"the MCP server {self.server.name} at {self.where} sent a message that is not JSON-RPC")
                await self._deliver(wire.Message(wire.Shape.INVALID, None))
                continue
            body = item.message.model_dump(by_alias=True, mode="json", exclude_unset=True)
            error = body.get("error")
            if isinstance(error, dict):
                failed = self._failed.pop(json.dumps(body.get("id")), None)
                if failed is not None:  # the SDK's words, or the server's own error, after ours
                    said = f"{failed} ({str(error.get('message'))[:300]})"
                    body = wire.error(body.get("id"), wire.REFUSED, said)
                elif error.get("code") == PARSE_ERROR:  # the SDK's words quote the body at length
                    said = f"the MCP server {self.server.name} at {self.where} sent a body that is not JSON-RPC"
                    self._problem(said)
                    body = wire.error(body.get("id"), wire.REFUSED, said)
            await self._deliver(wire.message_of(self._unsaid.json(body)))
        done.cancel()

    async def _answered(self, response: httpx2.Response) -> None:
        """Every HTTP answer: a redirect away recorded as refused, an error noted
        (and said to the agent for the request it answered, naming the server)."""
        status, method = response.status_code, response.request.method
        said = None
        if 300 <= status < 400 and "location" in response.headers:
            said = await self._redirected(response)
        elif status >= 400 and not (method in ("GET", "DELETE") and status in (404, 405)):
            said = f"the MCP server {self.server.name} at {self.where} answered HTTP {status} to a {method}"
        elif method == "POST" and status != 202 and 200 <= status < 300:
            kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
            if kind not in ("application/json", "text/event-stream"):
                said = (
                    f"the MCP server {self.server.name} at {self.where} answered {kind or 'no content type'}, "
                    "not JSON-RPC"
                )
        if said is None:
            return
        self._problem(said)
        self._note_failed(response.request, said)

    def _too_long(self, request: httpx2.Request) -> None:
        """An answer to ``request`` went past `MAX_BODY`: noted, and said for its id."""
        said = (
            f"the MCP server {self.server.name} at {self.where} answered a {request.method} with "
            f"more than {MAX_BODY // 2**20} MiB: cut off"
        )
        self._problem(said)
        self._note_failed(request, said)

    def _note_failed(self, request: httpx2.Request, said: str) -> None:
        """``said`` is why the request's answer failed (the error the agent reads for its id)."""
        if request.method == "POST" and len(self._failed) < 1024:
            with contextlib.suppress(ValueError, AttributeError, httpx2.RequestNotRead):
                sent = json.loads(request.content)
                if isinstance(sent, dict) and "id" in sent and "method" in sent:
                    self._failed[json.dumps(sent["id"])] = said

    async def _redirected(self, response: httpx2.Response) -> str | None:
        location = response.headers["location"]
        try:
            target = response.url.join(location)
            host = (target.host or "").strip("[]")
            port = target.port or (443 if target.scheme == "https" else 80)
            path: str | None = target.raw_path.decode("ascii", "replace")
        except (httpx2.InvalidURL, ValueError):
            host, port, path = location[:64] or "?", 0, None
        if (host, port) == (self.host, self.port):
            return None  # within the URL's origin: the SDK follows it (307/308) or says why not
        problem = (
            f"a redirect from the MCP server {self.server.name}'s URL; the governor follows none "
            "away from the host the operator named"
        )
        method = response.request.method
        request = ConnectionRequest(
            host or "?", port, method=method, path=path, via=VIA, origin=self.origin, problem=problem
        )
        await self._judge(request)
        return f"the MCP server {self.server.name} at {self.where} redirected a {method} to {host or '?'}:{port}: refused"


def _reason(error: BaseException) -> str:
    """The first real failure inside an exception group, in words (with what
    it wraps: httpx's error wraps httpcore's, which wraps the OS's or TLS's)."""
    error = _first(error)
    said: list[str] = []
    link: BaseException | None = error
    for _ in range(8):
        if link is None:
            break
        link = _first(link)
        text = str(link)
        if text and not any(text in s for s in said):
            said.append(text)
        link = link.__cause__ or link.__context__
    text = ": ".join(said[:3]) or type(error).__name__
    if isinstance(error, httpx2.ConnectError | httpcore2.ConnectError):
        return f"could not connect: {text}"[:300]
    if isinstance(error, httpx2.TimeoutException):
        return f"timed out: {text}"[:300]
    return f"{type(error).__name__}: {text}"[:300]


def _first(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return error
