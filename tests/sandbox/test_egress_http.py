"""HTTP through the real egress proxy: bodies as they came, kept connections,
streams not held back, smuggling refused and recorded.

The proxy (`governor.sandbox.net.proxy`) serves a listener on the host here (the same
code serves the sandbox's inside one), judged by the real gate writing a real
audit log; the origin is a loopback server that reads requests with h11 and
writes its responses byte by byte; the client is a raw socket whose answers
h11 reads. So each side is checked by an HTTP reader that is not ours.
"""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import h11
import pytest
import trio

from governor.audit.log import AuditLog
from governor.confine.egress import judge
from governor.gate.approver import Unattended
from governor.gate.gatekeeper import Gate
from governor.policies.capability import Capability
from governor.policies.network import NetworkRules, parse_pattern
from governor.policies.policy import Policy
from governor.sandbox.net.proxy import EgressProxy, open_egress

BIG = 2 * 1024 * 1024 + 17


@dataclass
class Origin:
    port: int = 0
    connections: int = 0
    requests: list[tuple[bytes, bytes, list[tuple[bytes, bytes]], bytes]] = field(
        default_factory=list
    )
    raw: bytearray = field(default_factory=bytearray)
    go_on: trio.Event = field(default_factory=trio.Event)


def reply(target: bytes, method: bytes, body: bytes) -> tuple[bytes, bool]:
    """The origin's bytes for a request, and whether it closes afterwards."""
    if target == b"/hello":
        return b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", False
    if target == b"/echo":
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body), False
    if target == b"/chunked":
        raw = b"4\r\nabcd\r\n3;x=y\r\nefg\r\n0\r\nX-Sum: 7\r\n\r\n"
        return b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" + raw, False
    if target == b"/head":
        return b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", False
    if target == b"/big":
        return b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % BIG + b"b" * BIG, False
    if target == b"/then-close":
        return b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", True
    return b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", False


async def serve_origin(origin: Origin, task_status: trio.TaskStatus[None]) -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    origin.port = listener.socket.getsockname()[1]
    task_status.started()

    async def one(stream: trio.SocketStream) -> None:
        origin.connections += 1
        conn = h11.Connection(h11.SERVER)
        async with stream:
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    data = await stream.receive_some(65536)
                    origin.raw += data
                    conn.receive_data(data)
                    continue
                if not isinstance(event, h11.Request):
                    return
                body = b""
                while not isinstance(part := conn.next_event(), h11.EndOfMessage):
                    if part is h11.NEED_DATA:
                        data = await stream.receive_some(65536)
                        origin.raw += data
                        conn.receive_data(data)
                    elif isinstance(part, h11.Data):
                        body += part.data
                origin.requests.append(
                    (event.method, event.target, list(event.headers.raw_items()), body)
                )
                if event.target == b"/stream":
                    await stream.send_all(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n"
                    )
                    await stream.send_all(b"data: first\n\n")
                    await origin.go_on.wait()
                    await stream.send_all(b"data: last\n\n")
                    return
                out, close = reply(event.target, event.method, body)
                if event.method == b"HEAD":
                    out = out.split(b"\r\n\r\n")[0] + b"\r\n\r\n"
                await stream.send_all(out)
                if close:
                    return
                # h11's state machine wants its own bytes; the raw reply was ours
                conn = h11.Connection(h11.SERVER)

    async with listener, trio.open_nursery() as nursery:
        while True:
            stream = await listener.accept()
            nursery.start_soon(one, stream)


@dataclass
class Setup:
    origin: Origin
    proxy: EgressProxy
    port: int
    log: Path

    def records(self) -> list[dict[str, object]]:
        lines = self.log.read_text().splitlines()
        return [r for r in map(json.loads, lines) if r.get("kind") == "network"]


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    origin = Origin()
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_origin, origin)
        rules = NetworkRules(enabled=True, agent=(parse_pattern(f"127.0.0.1:{origin.port}"),))
        ws = tmp_path / "ws"
        ws.mkdir()
        policy = Policy(capability=Capability.EDIT_WORKSPACE, network_rules=rules).bind(str(ws))
        audit = AuditLog(tmp_path / "audit.jsonl", "egress-http")
        async with open_egress(judge(Gate(policy, audit, Unattended()))) as proxy:
            listener = socket.create_server(("127.0.0.1", 0))
            port = listener.getsockname()[1]
            proxy.serve(listener, "agent")
            yield Setup(origin, proxy, port, tmp_path / "audit.jsonl")
        audit.close()
        nursery.cancel_scope.cancel()


class Client:
    """A raw connection to the proxy; responses read by h11."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.h11 = h11.Connection(h11.CLIENT)
        self.raw = bytearray()

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def response(self, method: bytes = b"GET") -> tuple[h11.Response, bytes]:
        # h11 must be told what it is reading a response to
        self.h11.send(h11.Request(method=method, target="/", headers=[("Host", "a")]))
        self.h11.send(h11.EndOfMessage())
        body, head = b"", None
        while True:
            event = self.h11.next_event()
            if event is h11.NEED_DATA:
                data = await self.stream.receive_some(65536)
                self.raw += data
                self.h11.receive_data(data)
            elif isinstance(event, h11.Response):
                head = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                assert head is not None
                if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
                    self.h11.start_next_cycle()
                return head, body
            elif isinstance(event, h11.InformationalResponse):
                continue
            else:
                raise AssertionError(event)


async def client(setup: Setup) -> Client:
    return Client(await trio.open_tcp_stream("127.0.0.1", setup.port))


def get(setup: Setup, path: str, method: str = "GET", extra: str = "", body: bytes = b"") -> bytes:
    at = f"127.0.0.1:{setup.origin.port}"
    return f"{method} http://{at}{path} HTTP/1.1\r\nHost: {at}\r\n{extra}\r\n".encode() + body


async def test_requests_on_one_connection_share_one_upstream_each_judged_and_recorded(
    setup: Setup,
) -> None:
    c = await client(setup)
    for path in ("/hello", "/echo", "/hello"):
        body = b"ping" if path == "/echo" else b""
        await c.send(
            get(
                setup,
                path,
                "POST" if body else "GET",
                f"Content-Length: {len(body)}\r\n" if body else "",
                body,
            )
        )
        response, got = await c.response(b"POST" if body else b"GET")
        assert response.status_code == 200 and got == (b"ping" if body else b"hello")
    assert setup.origin.connections == 1
    assert [r[1] for r in setup.origin.requests] == [b"/hello", b"/echo", b"/hello"]
    records = setup.records()
    assert [(r["verdict"], r["subject"]["path"]) for r in records] == [  # type: ignore[index]
        ("allow", "/hello"), ("allow", "/echo"), ("allow", "/hello"),
    ]  # fmt: skip


async def test_chunked_bodies_pass_byte_for_byte_both_ways(setup: Setup) -> None:
    c = await client(setup)
    body = b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
    await c.send(get(setup, "/echo", "POST", "Transfer-Encoding: chunked\r\n", body))
    response, got = await c.response(b"POST")
    assert response.status_code == 200 and got == b"hello world"
    assert setup.origin.requests[0][3] == b"hello world"
    assert body in bytes(setup.origin.raw)  # as the client wrote it, extension and trailer too
    await c.send(get(setup, "/chunked"))
    _response, got = await c.response()
    assert got == b"abcdefg" and b"3;x=y\r\nefg\r\n0\r\nX-Sum: 7\r\n\r\n" in bytes(c.raw)
    assert setup.origin.connections == 1


async def test_a_stream_is_passed_on_as_it_comes_not_held_to_its_end(setup: Setup) -> None:
    c = await client(setup)
    await c.send(get(setup, "/stream"))
    got = b""
    with trio.fail_after(5):
        while b"data: first" not in got:
            got += await c.stream.receive_some(65536)
    assert b"data: last" not in got  # the origin has not sent it yet
    assert (
        b"connection: close" in got.lower()
    )  # a body until close ends the client's connection too
    setup.origin.go_on.set()
    with trio.fail_after(5):
        while data := await c.stream.receive_some(65536):
            got += data
    assert got.endswith(b"data: first\n\ndata: last\n\n")


async def test_expect_100_continue_is_answered_by_the_proxy_and_not_forwarded(setup: Setup) -> None:
    c = await client(setup)
    await c.send(get(setup, "/echo", "POST", "Content-Length: 4\r\nExpect: 100-continue\r\n"))
    with trio.fail_after(5):
        first = await c.stream.receive_some(65536)
    assert first == b"HTTP/1.1 100 Continue\r\n\r\n"
    c.raw += first
    c.h11.receive_data(first)
    await c.send(b"data")
    response, got = await c.response(b"POST")
    assert response.status_code == 200 and got == b"data"
    assert all(name.lower() != b"expect" for name, _ in setup.origin.requests[0][2])


async def test_a_head_response_has_no_body_and_the_connection_goes_on(setup: Setup) -> None:
    c = await client(setup)
    await c.send(get(setup, "/head", "HEAD"))
    response, got = await c.response(b"HEAD")
    assert response.status_code == 200 and got == b""
    assert (b"content-length", b"1234") in list(response.headers.raw_items())
    await c.send(get(setup, "/hello"))
    assert (await c.response())[1] == b"hello"


async def test_a_big_body_is_spliced_and_the_connection_is_kept(setup: Setup) -> None:
    c = await client(setup)
    await c.send(get(setup, "/big"))
    with trio.fail_after(20):
        _response, got = await c.response()
    assert len(got) == BIG and set(got) == {ord("b")}
    await c.send(get(setup, "/hello"))
    assert (await c.response())[1] == b"hello"
    assert setup.origin.connections == 1


async def test_a_kept_connection_the_server_closed_is_replaced_for_the_next_request(
    setup: Setup,
) -> None:
    c = await client(setup)
    await c.send(get(setup, "/then-close"))
    assert (await c.response())[1] == b"ok"
    await trio.sleep(0.1)  # the origin has closed its side by now
    await c.send(get(setup, "/hello"))
    response, got = await c.response()
    assert response.status_code == 200 and got == b"hello"
    assert setup.origin.connections == 2


async def test_an_http_1_0_request_without_host_is_forwarded_and_its_connection_ends(
    setup: Setup,
) -> None:
    c = await client(setup)
    await c.send(f"GET http://127.0.0.1:{setup.origin.port}/hello HTTP/1.0\r\n\r\n".encode())
    got = b""
    with trio.fail_after(5):
        while data := await c.stream.receive_some(65536):
            got += data
    assert got.startswith(b"HTTP/1.1 200 OK\r\n") and got.endswith(b"hello")
    assert b"connection: close" in got.lower()
    host = dict(setup.origin.requests[0][2])[b"host"]
    assert host == f"127.0.0.1:{setup.origin.port}".encode()


SMUGGLED = {
    "both framings": "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n",
    "disagreeing lengths": "Content-Length: 4\r\nContent-Length: 5\r\n",
    "a folded header": "X-A: a\r\n b\r\n",
    "a chunked 1.0 body": None,
}


@pytest.mark.parametrize("name", sorted(SMUGGLED))
async def test_a_smuggling_request_is_refused_recorded_and_never_reaches_the_origin(
    setup: Setup, name: str
) -> None:
    extra = SMUGGLED[name]
    at = f"127.0.0.1:{setup.origin.port}"
    if extra is None:
        bad = f"POST http://{at}/echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n".encode()
    else:
        bad = get(setup, "/echo", "POST", extra, b"0\r\n\r\nGET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
    c = await client(setup)
    await c.send(bad)
    got = b""
    with trio.fail_after(5):
        while data := await c.stream.receive_some(65536):
            got += data
    assert got.startswith(b"HTTP/1.1 400 "), got
    assert setup.origin.connections == 0 and setup.origin.requests == []
    [record] = setup.records()
    assert record["verdict"] == "deny" and "malformed request" in record["subject"]["problem"]  # type: ignore[index]
    # the neighbour: the same request, framed once, goes through
    c = await client(setup)
    await c.send(get(setup, "/echo", "POST", "Content-Length: 4\r\n", b"abcd"))
    assert (await c.response(b"POST"))[1] == b"abcd"


async def test_a_head_sent_a_byte_at_a_time_is_read_whole(setup: Setup) -> None:
    c = await client(setup)
    c.stream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    for byte in get(setup, "/hello"):
        await c.send(bytes([byte]))
        await trio.sleep(0.001)  # each its own segment: the proxy reads them one by one
    assert (await c.response())[1] == b"hello"


async def test_the_host_header_is_forwarded_as_the_host_judged_never_as_the_client_spelled_it(
    setup: Setup,
) -> None:
    at = f"127.0.0.1:{setup.origin.port}"
    c = await client(setup)
    await c.send(f"GET http://BAD\\@{at}/hello HTTP/1.1\r\nHost: BAD\\@{at}\r\n\r\n".encode())
    response, got = await c.response()
    assert response.status_code == 200 and got == b"hello"
    [record] = setup.records()
    assert (record["verdict"], record["subject"]["host"]) == ("allow", "127.0.0.1")  # type: ignore[index]
    hosts = [v for k, v in setup.origin.requests[0][2] if k == b"host"]
    assert hosts == [at.encode()]  # as judged: h11, the origin's reader, saw no BAD
    # the neighbour: a plain request's Host reaches the origin as it was
    await c.send(get(setup, "/hello"))
    assert (await c.response())[1] == b"hello"
    assert [v for k, v in setup.origin.requests[1][2] if k == b"host"] == [at.encode()]
