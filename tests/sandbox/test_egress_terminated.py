"""The proxy terminating TLS for a host a credential is bound to: the real key
put in where the sandbox sent its placeholder, the model call's tokens read
from its event stream, a placeholder sent elsewhere refused and recorded.

Real sockets throughout: the proxy (`governor.sandbox.net.proxy`) serves a
listener on the host, judged by the real gate writing a real audit log; the
origin is a loopback HTTPS server with a certificate of a test CA the proxy is
told to trust upstream, reading requests with h11; the client speaks TLS to the
proxy trusting the attempt's CA only, and h11 reads its answers.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
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
from governor.sandbox.net.credentials import (
    Binding,
    Credential,
    Credentials,
    binding,
    placeholder_for,
)
from governor.sandbox.net.model_calls import UsageReader
from governor.sandbox.net.proxy import EgressProxy, open_egress
from governor.sandbox.net.terminate import Interception, ModelCall
from governor.sandbox.net.tls import AttemptCA, upstream_context

KEY = "sk-ant-api03-" + "R3alS3cretKeyValue" * 4
OPENAI_KEY = "sk-proj-" + "0penAIRealKey" * 5
USAGE = {
    "input_tokens": 120,
    "output_tokens": 1,
    "cache_creation_input_tokens": 7,
    "cache_read_input_tokens": 300,
}


def sse() -> bytes:
    """An Anthropic Messages event stream reporting 120 in, 300 cache read, 42 out."""
    start = {"type": "message_start", "message": {"model": "claude-standin-1", "usage": USAGE}}
    events = [
        ("message_start", start),
        ("content_block_delta", {"type": "content_block_delta", "delta": {"text": "SECRET-COMPLETION"}}),
        ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                           "usage": {"output_tokens": 42}}),
        ("message_stop", {"type": "message_stop"}),
    ]  # fmt: skip
    return b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)


@dataclass
class Origin:
    context: ssl.SSLContext
    ca_pem: bytes = b""
    port: int = 0
    seen: list[list[tuple[bytes, bytes]]] = field(default_factory=list)
    targets: list[bytes] = field(default_factory=list)


async def serve_origin(origin: Origin, task_status: trio.TaskStatus[None]) -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    origin.port = listener.socket.getsockname()[1]
    task_status.started()

    async def one(plain: trio.SocketStream) -> None:
        stream = trio.SSLStream(plain, origin.context, server_side=True)
        conn = h11.Connection(h11.SERVER)
        with _quiet():
            while True:
                event = conn.next_event()
                if event is h11.NEED_DATA:
                    conn.receive_data(await stream.receive_some(65536))
                    continue
                if not isinstance(event, h11.Request):
                    return
                while not isinstance(part := conn.next_event(), h11.EndOfMessage):
                    if part is h11.NEED_DATA:
                        conn.receive_data(await stream.receive_some(65536))
                origin.seen.append(list(event.headers.raw_items()))
                origin.targets.append(event.target)
                body = sse()
                # chunked, in pieces cut inside events: the reader must join them
                head = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
                await stream.send_all(head)
                for at in range(0, len(body), 37):
                    piece = body[at : at + 37]
                    await stream.send_all(b"%x\r\n%s\r\n" % (len(piece), piece))
                await stream.send_all(b"0\r\n\r\n")
                conn = h11.Connection(h11.SERVER)

    async with listener, trio.open_nursery() as nursery:
        while True:
            nursery.start_soon(one, await listener.accept())


class _quiet:
    """A client that went away ends its connection quietly."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, *rest: object) -> bool:
        return kind is not None and issubclass(kind, (trio.BrokenResourceError, ssl.SSLError, OSError))  # type: ignore[arg-type]


@dataclass
class Setup:
    origin: Origin
    port: int
    log: Path
    ca: AttemptCA
    credentials: Credentials
    calls: list[ModelCall]
    other: int
    """A second allowed host (plain HTTP), the credential not bound to it."""
    other_seen: list[bytes]
    proxy: EgressProxy | None = None

    def network(self) -> list[dict[str, object]]:
        lines = self.log.read_text().splitlines()
        return [r for r in map(json.loads, lines) if r.get("kind") == "network"]


async def serve_other(seen: list[bytes], task_status: trio.TaskStatus[int]) -> None:
    listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    task_status.started(listener.socket.getsockname()[1])

    async def one(stream: trio.SocketStream) -> None:
        data = await stream.receive_some(65536)
        seen.append(data)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    async with listener, trio.open_nursery() as nursery:
        while True:
            nursery.start_soon(one, await listener.accept())


@pytest.fixture
async def setup(tmp_path: Path) -> AsyncIterator[Setup]:
    test_ca = AttemptCA.make("the stand-in's own test CA")
    ca_file = tmp_path / "test-ca.pem"
    ca_file.write_bytes(test_ca.cert_pem)
    origin = Origin(test_ca.server_context("127.0.0.1"), test_ca.cert_pem)
    other_seen: list[bytes] = []
    async with trio.open_nursery() as nursery:
        await nursery.start(serve_origin, origin)
        other = await nursery.start(serve_other, other_seen)
        hosts = (f"127.0.0.1:{origin.port}", f"127.0.0.1:{other}")
        patterns = tuple(parse_pattern(h) for h in hosts)
        rules = NetworkRules(enabled=True, allow=patterns, agent=patterns)  # commands' too
        ws = tmp_path / "ws"
        ws.mkdir()
        policy = Policy(capability=Capability.EDIT_WORKSPACE, network_rules=rules).bind(str(ws))
        audit = AuditLog(tmp_path / "audit.jsonl", "egress-terminated")
        ca = AttemptCA.make("test attempt")
        bound = (Binding("127.0.0.1", origin.port, tls=True),)
        gateway = (Binding("127.0.0.1", other, tls=False),)  # a plain-HTTP gateway
        credentials = Credentials([
            Credential("ANTHROPIC_API_KEY", KEY, placeholder_for(KEY), bound),
            Credential("OPENAI_API_KEY", OPENAI_KEY, placeholder_for(OPENAI_KEY), gateway),
        ])  # fmt: skip
        calls: list[ModelCall] = []

        async def record(call: ModelCall) -> None:
            calls.append(call)

        interception = Interception(credentials, ca, upstream_context(str(ca_file)), record)
        async with open_egress(judge(Gate(policy, audit, Unattended())), None, interception) as proxy:
            listener = socket.create_server(("127.0.0.1", 0))
            port = listener.getsockname()[1]
            proxy.serve(listener, "agent")
            yield Setup(
                origin, port, tmp_path / "audit.jsonl", ca, credentials, calls, other, other_seen, proxy
            )
        audit.close()
        nursery.cancel_scope.cancel()


async def connect_tls(setup: Setup, trusted: bytes) -> trio.SSLStream[trio.SocketStream]:
    stream = await trio.open_tcp_stream("127.0.0.1", setup.port)
    target = f"127.0.0.1:{setup.origin.port}"
    await stream.send_all(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += await stream.receive_some(4096)
    assert answer.startswith(b"HTTP/1.1 200"), answer
    context = ssl.create_default_context(cadata=trusted.decode())
    tls = trio.SSLStream(stream, context, server_hostname="127.0.0.1")
    await tls.do_handshake()
    return tls


async def post(tls: trio.SSLStream[trio.SocketStream], placeholder: str) -> tuple[h11.Response, bytes]:
    body = json.dumps({"model": "claude-standin-1", "stream": True, "messages": [
        {"role": "user", "content": "SECRET-PROMPT"}]}).encode()  # fmt: skip
    client = h11.Connection(h11.CLIENT)
    headers = [("Host", "127.0.0.1"), ("x-api-key", placeholder), ("content-type", "application/json"),
               ("content-length", str(len(body)))]  # fmt: skip
    await tls.send_all(client.send(h11.Request(method="POST", target="/v1/messages?beta=true", headers=headers)))
    await tls.send_all(client.send(h11.Data(data=body)) + client.send(h11.EndOfMessage()))
    head, got = None, b""
    while True:
        event = client.next_event()
        if event is h11.NEED_DATA:
            client.receive_data(await tls.receive_some(65536))
        elif isinstance(event, h11.Response):
            head = event
        elif isinstance(event, h11.Data):
            got += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert head is not None
            return head, got


async def test_the_real_key_reaches_the_bound_host_in_place_of_the_placeholder_and_the_call_is_recorded_with_its_tokens(
    setup: Setup,
) -> None:
    credential = setup.credentials.held[0]
    tls = await connect_tls(setup, setup.ca.cert_pem)
    for _ in range(2):  # two calls on one kept connection: two records
        response, body = await post(tls, credential.placeholder)
        assert response.status_code == 200
        assert body == sse()  # the stream reaches the client as it came
    keys = [dict(seen)[b"x-api-key"] for seen in setup.origin.seen]
    assert keys == [KEY.encode()] * 2  # the real value, never the placeholder
    assert setup.origin.targets == [b"/v1/messages?beta=true"] * 2
    with trio.fail_after(10):  # recorded once its body has passed (after the client read it)
        while len(setup.calls) < 2:
            await trio.sleep(0.01)
    assert len(setup.calls) == 2
    call = setup.calls[0]
    assert (call.method, call.path, call.status) == ("POST", "/v1/messages", 200)
    assert call.usage.model == "claude-standin-1"
    assert call.usage.tokens == {"input": 120, "output": 42, "cache_write": 7, "cache_read": 300}
    assert call.usage.stop == "end_turn"
    assert call.credentials == ("ANTHROPIC_API_KEY",)
    assert call.first_byte_s is not None and call.streamed
    # nothing of the prompt, the completion or the key in what is kept
    kept = repr(call)
    assert "SECRET" not in kept and KEY not in kept and credential.placeholder not in kept


async def test_a_host_the_credential_is_not_bound_to_gets_no_swap_and_a_placeholder_sent_there_is_refused_and_recorded(
    setup: Setup,
) -> None:
    credential = setup.credentials.held[0]
    at = f"127.0.0.1:{setup.other}"

    async def ask(header: str) -> bytes:
        stream = await trio.open_tcp_stream("127.0.0.1", setup.port)
        await stream.send_all(f"GET http://{at}/collect?k=1 HTTP/1.1\r\nHost: {at}\r\nConnection: close\r\n{header}\r\n".encode())
        answer = b""
        while data := await stream.receive_some(65536):
            answer += data
        return answer

    refused = await ask(f"Authorization: Bearer {credential.placeholder}\r\n")
    assert refused.startswith(b"HTTP/1.1 403"), refused
    assert b"placeholder of ANTHROPIC_API_KEY" in refused
    assert b"".join(setup.other_seen) == b""  # nothing was sent
    record = setup.network()[-1]
    assert record["verdict"] == "deny"
    assert "exfiltration" in str(record["reason"])
    assert record["subject"]["path"] == "/collect"  # type: ignore[index]
    # the allowed neighbour: the same host, without the placeholder, is reached
    allowed = await ask("Authorization: Bearer something-else\r\n")
    assert allowed.startswith(b"HTTP/1.1 200"), allowed
    (sent,) = [seen for seen in setup.other_seen if seen]
    assert KEY.encode() not in sent


@pytest.mark.parametrize("via", ["absolute-form", "CONNECT"])
async def test_a_plain_http_gateway_gets_the_real_key_in_place_of_its_placeholder_and_each_call_is_recorded(
    setup: Setup, via: str
) -> None:
    placeholder = setup.credentials.held[1].placeholder
    at = f"127.0.0.1:{setup.other}"
    stream = await trio.open_tcp_stream("127.0.0.1", setup.port)
    if via == "CONNECT":  # undici tunnels http:// too
        await stream.send_all(f"CONNECT {at} HTTP/1.1\r\nHost: {at}\r\n\r\n".encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += await stream.receive_some(4096)
        assert answer.startswith(b"HTTP/1.1 200"), answer
        target = "/v1/chat/completions?x=1"
    else:
        target = f"http://{at}/v1/chat/completions?x=1"
    await stream.send_all(
        f"POST {target} HTTP/1.1\r\nHost: {at}\r\nAuthorization: Bearer {placeholder}\r\n"
        "Content-Length: 2\r\n\r\n{}".encode()
    )
    answer = b""
    with trio.fail_after(10):
        while data := await stream.receive_some(65536):
            answer += data
    assert answer.startswith(b"HTTP/1.1 200"), answer
    (sent,) = setup.other_seen
    assert sent.startswith(b"POST /v1/chat/completions?x=1 HTTP/1.1\r\n"), sent
    assert f"authorization: Bearer {OPENAI_KEY}".encode() in sent
    assert placeholder.encode() not in sent
    with trio.fail_after(10):
        while not setup.calls:
            await trio.sleep(0.01)
    (call,) = setup.calls
    assert (call.method, call.path, call.status) == ("POST", "/v1/chat/completions", 200)
    assert call.credentials == ("OPENAI_API_KEY",)


async def test_the_proxy_presents_the_attempts_ca_only_for_the_bound_host(setup: Setup) -> None:
    # a client that trusts only the origin's own CA fails at the bound host:
    # the proxy, not the origin, answers its TLS there
    other = AttemptCA.make("not the attempt's")
    with pytest.raises(trio.BrokenResourceError):
        await connect_tls(setup, other.cert_pem)
    tls = await connect_tls(setup, setup.ca.cert_pem)
    credential = setup.credentials.held[0]
    response, _ = await post(tls, credential.placeholder)
    assert response.status_code == 200


async def test_a_commands_connection_to_the_bound_host_stays_a_tunnel(setup: Setup) -> None:
    # a command's sandbox holds no placeholder and does not trust the attempt's
    # CA: its TLS is the origin's own, end to end
    assert setup.proxy is not None
    listener = socket.create_server(("127.0.0.1", 0))
    setup.proxy.serve(listener, "command")
    as_command = Setup(setup.origin, listener.getsockname()[1], setup.log, setup.ca,
                       setup.credentials, setup.calls, setup.other, [])  # fmt: skip
    with pytest.raises(trio.BrokenResourceError):  # the attempt's CA is not what answers
        await connect_tls(as_command, setup.ca.cert_pem)
    tls = await connect_tls(as_command, setup.origin.ca_pem)
    response, _ = await post(tls, "no-placeholder")
    assert response.status_code == 200
    assert [dict(seen)[b"x-api-key"] for seen in setup.origin.seen] == [b"no-placeholder"]
    assert setup.calls == []  # nothing read, nothing recorded


async def test_an_upstream_whose_certificate_the_proxy_does_not_trust_is_refused_with_the_reason(
    setup: Setup, tmp_path: Path
) -> None:
    credential = setup.credentials.held[0]
    # the interception's upstream trust without the test CA: the system's only
    interception = Interception(setup.credentials, setup.ca, upstream_context(None))
    ws = tmp_path / "ws2"
    ws.mkdir()
    rules = NetworkRules(enabled=True, agent=(parse_pattern(f"127.0.0.1:{setup.origin.port}"),))
    policy = Policy(capability=Capability.EDIT_WORKSPACE, network_rules=rules).bind(str(ws))
    audit = AuditLog(tmp_path / "audit2.jsonl", "untrusted-upstream")
    async with open_egress(judge(Gate(policy, audit, Unattended())), None, interception) as proxy:
        listener = socket.create_server(("127.0.0.1", 0))
        proxy.serve(listener, "agent")
        moved = Setup(setup.origin, listener.getsockname()[1], setup.log, setup.ca,
                      setup.credentials, [], setup.other, [])  # fmt: skip
        tls = await connect_tls(moved, setup.ca.cert_pem)
        answer = b""
        with trio.move_on_after(10), contextlib.suppress(trio.BrokenResourceError):
            while data := await tls.receive_some(65536):
                answer += data
    audit.close()
    assert answer.startswith(b"HTTP/1.1 502"), answer
    assert b"certificate verify failed" in answer
    assert setup.origin.seen == []  # no request, no key, reached it
    assert credential.placeholder  # (the placeholder was never needed)


def test_the_usage_reader_reads_openai_chat_and_responses_shapes() -> None:
    chat = UsageReader("text/event-stream")
    for line in (
        b'data: {"model":"gpt-5","choices":[{"delta":{"content":"hi"}}]}\n\n',
        b'data: {"model":"gpt-5","choices":[{"finish_reason":"stop","delta":{}}]}\n\n',
        b'data: {"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":9,'
        b'"prompt_tokens_details":{"cached_tokens":20}}}\n\ndata: [DONE]\n\n',
    ):
        chat.feed(line)
    usage = chat.usage()
    assert (usage.model, usage.stop) == ("gpt-5", "stop")
    assert usage.tokens == {"input": 50, "output": 9, "cache_read": 20}
    responses = UsageReader("application/json")
    body = {"object": "response", "model": "gpt-5-codex", "status": "completed", "output": [],
            "usage": {"input_tokens": 70, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 3}}}  # fmt: skip
    responses.feed(json.dumps(body).encode())
    usage = responses.usage()
    assert (usage.model, usage.stop) == ("gpt-5-codex", "completed")
    assert usage.tokens == {"input": 70, "output": 5, "cache_read": 3}


def test_a_placeholder_keeps_the_keys_prefix_and_length_and_is_fresh_each_time() -> None:
    one, two = placeholder_for(KEY), placeholder_for(KEY)
    assert one.startswith("sk-ant-api03-") and len(one) == len(KEY)
    assert one != two and KEY[13:] not in one
    assert placeholder_for("sk-proj-" + "a1B2" * 10).startswith("sk-proj-")


def test_a_wildcard_binding_covers_subdomains_only_as_the_network_rules_read_it() -> None:
    wildcard = binding("*.githubcopilot.com:443")
    assert wildcard.covers("proxy.individual.githubcopilot.com", 443)
    assert wildcard.covers("API.githubcopilot.com.", 443)
    assert not wildcard.covers("githubcopilot.com", 443)  # subdomains only
    assert not wildcard.covers("evilgithubcopilot.com", 443)
    assert not wildcard.covers("api.githubcopilot.com", 80)
    exact = binding("api.anthropic.com:443")
    assert exact.covers("api.anthropic.com", 443) and not exact.covers("x.api.anthropic.com", 443)
