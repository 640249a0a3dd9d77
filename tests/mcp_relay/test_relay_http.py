"""HTTP MCP servers behind the relay: a real one nobody here wrote
(@modelcontextprotocol/server-everything in its streamableHttp mode, on
loopback) and a hostile stand-in of ours, driven by the official SDK's client
through the same stdio shim an agent is given. The agent never sees the URL;
the governor's connection to it is a recorded ``network`` decision."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from http_standin import FLOOD, StandIn
from mcp import MCPError
from mcp_harness import bound, client, everything_http, free_port, governed

from governor.mcp import http as mcp_http
from governor.mcp.servers import problems, secrets
from governor.policies.mcp import McpConfig, McpServer

TOKEN = "opensesame-4711-relay"
"""The header's value: its variable's name does not look secret, and still it is masked."""

EVERYTHING = """
capability = "read-only"

[[mcp.servers]]
name = "everything"
url = "{url}"
headers = {{ Authorization = "RELAY_TEST_HEADER" }}
timeout = {timeout}

[mcp.allow]
tools = ["everything.echo", "everything.get-env"]

[mcp.deny]
tools = ["everything.get-sum", {{ tool = "everything.echo", args = {{ message = "*forbidden*" }} }}]
"""


def _text(result: object) -> str:
    return " ".join(getattr(c, "text", "") for c in getattr(result, "content", []))


def _verifies(log: Path) -> bool:
    """Whether ``governor audit verify`` passes the (ended) log."""
    governor = Path(sys.executable).with_name("governor")
    done = subprocess.run([str(governor), "audit", "verify", str(log)], capture_output=True, timeout=60)
    return done.returncode == 0


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


@pytest.fixture
def everything(tmp_path: Path) -> Iterator[str]:
    """server-everything's streamable HTTP endpoint on loopback."""
    with everything_http(tmp_path) as url:
        yield url


@pytest.fixture
def standin() -> Iterator[StandIn]:
    server = StandIn()
    yield server
    server.stop()


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture(autouse=True)
def header(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RELAY_TEST_HEADER", TOKEN)


async def test_a_real_http_server_allowed_call_works_denied_one_refused_and_hidden_and_the_url_not_given(
    workspace: Path, tmp_path: Path, everything: str
) -> None:
    policy = bound(EVERYTHING.format(url=everything, timeout=60), workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g:
        entry = next(e for e in g.relay.entries() if e["name"] == "everything")
        assert everything not in json.dumps(entry) and "127.0.0.1" not in json.dumps(entry)
        async with client(g, "everything") as session:
            names = [t.name for t in (await session.list_tools()).tools]
            echoed = await session.call_tool("echo", {"message": "hello over http"})
            summed = await session.call_tool("get-sum", {"a": 1, "b": 2})
            argued = await session.call_tool("echo", {"message": "a forbidden word"})
            again = await session.call_tool("echo", {"message": "still here"})
    assert "echo" in names and "get-sum" not in names
    assert _text(echoed) == "Echo: hello over http" and not echoed.is_error
    assert summed.is_error and "Refused by the governor" in _text(summed)
    assert argued.is_error and "everything.echo" in _text(argued) and "message=*forbidden*" in _text(argued)
    assert _text(again) == "Echo: still here"
    decided = [(r["subject"]["name"], r["verdict"], r["rule"]) for r in g.records()]
    assert decided == [
        ("echo", "allow", "mcp.allow: everything.echo"),
        ("get-sum", "deny", "mcp.deny: everything.get-sum"),
        ("echo", "deny", "mcp.deny: everything.echo (message=*forbidden*)"),
        ("echo", "allow", "mcp.allow: everything.echo"),
    ]
    # the governor's connections to the named host: decided, allowed, recorded
    port = int(everything.split(":")[2].split("/")[0])
    assert [
        (r["subject"]["host"], r["subject"]["port"], r["subject"]["origin"], r["subject"]["via"], r["verdict"])
        for r in g.records("network")
    ] == [("127.0.0.1", port, "mcp:everything", "mcp-http", "allow")]
    assert g.relay.notices() == []
    # what ran: the URL, the headers' names (never their values), the one host it may reach
    (ran,) = g.records("mcp-server")
    assert ran["subject"] == {
        "server": "everything", "command": [], "writable": False, "network": [f"127.0.0.1:{port}"],
        "url": everything, "headers": ["Authorization"],
    }  # fmt: skip
    assert g.verified() and _verifies(g.log)
    shown = subprocess.run(
        [str(Path(sys.executable).with_name("governor")), "audit", "--mcp", str(g.log)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout  # fmt: skip
    assert f"server everything: {everything}" in shown, shown
    assert "allow    tools/call: everything.echo" in shown


async def test_the_servers_own_notifications_reach_the_agent_over_its_stream(
    workspace: Path, tmp_path: Path, everything: str
) -> None:
    text = EVERYTHING.format(url=everything, timeout=60).replace(
        '"everything.get-env"', '"everything.toggle-simulated-logging"'
    )
    logged = trio.Event()
    seen: list[object] = []

    async def on_log(params: object) -> None:
        seen.append(params)
        logged.set()

    async with governed(bound(text, workspace), tmp_path / "audit.jsonl") as g, client(
        g, "everything", logging_callback=on_log
    ) as session:
        started = await session.call_tool("toggle-simulated-logging", {})
        assert "Started simulated" in _text(started), _text(started)
        with trio.fail_after(120):  # it logs every 5 s, on the session's own stream (GET), asked for by no request
            await logged.wait()
    assert seen
    assert g.verified() and _verifies(g.log)


async def test_the_header_reaches_the_server_and_its_value_never_the_log(
    workspace: Path, tmp_path: Path, standin: StandIn
) -> None:
    url = f"http://127.0.0.1:{standin.port}/mcp"
    policy = bound(
        EVERYTHING.format(url=url, timeout=60).replace('"everything"', '"s"').replace("everything.", "s."),
        workspace,
    )
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "s") as session:
        # an agent that learnt the value somehow and puts it in a call's arguments
        out = await session.call_tool("echo", {"message": f"the token is {TOKEN}"})
    # the server's answer reaches the agent, the header's value masked in it (a server that quotes
    # the token it was sent hands it to no agent: test_hostile_mcp)
    assert _text(out) == "the token is [secret]"
    assert standin.headers and all(h.get("Authorization") == TOKEN for h in standin.headers)
    assert standin.deleted  # the session ended with a DELETE of its id
    assert g.verified() and _verifies(g.log)
    text = g.log.read_text()
    assert TOKEN not in text
    assert "the token is [secret]" in text
    assert TOKEN not in json.dumps(g.events) and TOKEN not in " ".join(g.relay.notices())


@pytest.fixture
def tls_standin(tmp_path: Path) -> Iterator[tuple[StandIn, Path]]:
    """The stand-in over https:// with a self-signed certificate for localhost, and that certificate."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server = StandIn(tls=context)
    yield server, cert
    server.stop()


async def test_an_https_server_is_reached_only_with_a_certificate_the_trust_store_vouches_for(
    workspace: Path, tmp_path: Path, tls_standin: tuple[StandIn, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    standin, cert = tls_standin
    policy = bound(
        f'[[mcp.servers]]\nname = "s"\nurl = "https://localhost:{standin.port}/mcp"\n'
        '[mcp.allow]\ntools = ["s.*"]\n',
        workspace,
    )
    # the default trust store does not know the self-signed certificate: refused, said, noticed
    async with governed(policy, tmp_path / "refused.jsonl") as g:
        with pytest.raises(BaseExceptionGroup) as raised:
            async with client(g, "s"):
                pass
        notices = g.relay.notices()
    assert "CERTIFICATE_VERIFY_FAILED" in str(_leaf(raised.value)), _leaf(raised.value)
    assert len(notices) == 1 and "CERTIFICATE_VERIFY_FAILED" in notices[0]
    assert not standin.headers  # no request was sent
    assert g.verified() and _verifies(g.log)
    # the same server, its certificate trusted: reached over TLS at the judged address, by name
    trusted = ssl.create_default_context(cafile=str(cert))
    monkeypatch.setattr(mcp_http, "ssl_context", lambda: trusted)
    async with governed(policy, tmp_path / "trusted.jsonl") as g, client(g, "s") as session:
        ok = await session.call_tool("ok", {})
    assert _text(ok) == "ok done" and standin.headers
    assert [(r["subject"]["host"], r["subject"]["addresses"], r["verdict"]) for r in g.records("network")] == [
        ("localhost", ["127.0.0.1"], "allow")
    ]
    assert g.verified() and _verifies(g.log)


async def test_an_unreachable_url_is_an_error_for_that_server_and_a_notice(
    workspace: Path, tmp_path: Path
) -> None:
    url = f"http://127.0.0.1:{free_port()}/mcp"
    policy = bound(EVERYTHING.format(url=url, timeout=60), workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g:
        with pytest.raises(BaseExceptionGroup) as raised:
            async with client(g, "everything"):
                pass
        notices = g.relay.notices()
    error = _leaf(raised.value)
    assert isinstance(error, MCPError), error
    assert "the MCP server everything at 127.0.0.1" in str(error) and "could not connect" in str(error)
    assert "Connection refused" in str(error)
    assert len(notices) == 1 and "could not connect" in notices[0]
    assert [r["verdict"] for r in g.records("network")] == ["allow"]
    assert g.verified() and _verifies(g.log)


async def test_a_hostile_http_server_each_misdeed_is_that_calls_error_and_the_session_goes_on(
    workspace: Path, tmp_path: Path, standin: StandIn
) -> None:
    policy = bound(
        f"""
capability = "read-only"

[[mcp.servers]]
name = "rogue"
url = "http://127.0.0.1:{standin.port}/mcp"
timeout = 3

[mcp.allow]
tools = ["rogue.*"]
""",
        workspace,
    )
    seen: list[object] = []

    async def logged(params: object) -> None:
        seen.append(params)

    said: dict[str, str] = {}
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(
        g, "rogue", logging_callback=logged
    ) as session:
        for tool in ("not_json", "not_jsonrpc", "html", "error", "redirect", "silent"):
            try:
                result = await session.call_tool(tool, {})
            except MCPError as e:
                said[tool] = str(e)
            else:
                said[tool] = f"answered: {_text(result)}"
        moved = await session.call_tool("moved", {})  # a redirect within the URL's origin: followed
        flooded = await session.call_tool("flood", {})
        ok = await session.call_tool("ok", {})
        notices = g.relay.notices()
    assert _text(moved) == "moved done"
    assert _text(ok) == "ok done"  # after every misdeed, the session still works
    assert _text(flooded) == "flood done" and len(seen) == FLOOD
    named = "the MCP server rogue at 127.0.0.1:"
    assert said["not_json"].startswith(named) and said["not_json"].endswith("sent a body that is not JSON-RPC")
    assert said["not_jsonrpc"].startswith(named) and "not JSON-RPC" in said["not_jsonrpc"]
    assert said["html"].startswith(named) and "answered text/html, not JSON-RPC" in said["html"]
    assert said["error"].startswith(named) and "answered HTTP 500 to a POST" in said["error"]
    assert said["redirect"].startswith(named) and "redirected a POST to example.com:80: refused" in said["redirect"]
    assert said["silent"] == "the MCP server rogue did not answer tools/call within 3 s"
    joined = "\n".join(notices)
    assert "answered HTTP 500 to a POST" in joined
    assert "answered text/html, not JSON-RPC" in joined
    assert "sent a body that is not JSON-RPC" in joined
    assert "redirected a POST to example.com:80: refused" in joined
    assert "did not answer tools/call within 3 s" in joined
    # the redirect's target: a refused network decision of the server's origin, never connected
    # the session's connection decided once (its later ones under that decision)
    decided = [(r["subject"]["host"], r["subject"]["origin"], r["verdict"]) for r in g.records("network")]
    assert decided == [("127.0.0.1", "mcp:rogue", "allow"), ("example.com", "mcp:rogue", "deny")]
    assert g.verified() and _verifies(g.log)


def test_a_header_variable_not_set_is_refused_before_start_and_every_header_value_is_masked() -> None:
    docs = McpServer("docs", url="https://h.example/mcp", headers=(("Authorization", "DOCS_AUTH"),))
    assert problems((docs,), {}) == ["MCP server docs: headers.Authorization names DOCS_AUTH, which is not set"]
    assert problems((docs,), {"DOCS_AUTH": "v4lue-of-docs"}) == []
    given = McpServer("lib", url="https://h.example/mcp", header_values={"X-Key": "given-v4lue"})
    assert secrets(McpConfig((docs, given)), {"DOCS_AUTH": "v4lue-of-docs"}) == ["v4lue-of-docs", "given-v4lue"]
