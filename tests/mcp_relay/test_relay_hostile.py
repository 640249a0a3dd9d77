"""Hostile servers behind the relay: one that reaches for the network, floods,
writes malformed JSON-RPC, never answers, or answers what it was never asked.
Each session goes on or ends with a clear reason, and the log's chain holds."""

from __future__ import annotations

import http.server
import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp_harness import bound, client, governed

from governor.cli.person import Person

ROGUE = Path(__file__).resolve().with_name("rogue_server.py")
PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "python3"

POLICY = """
capability = "read-only"

[[mcp.servers]]
name = "rogue"
command = {command}
env = ["ROGUE_PORT"]
timeout = {timeout}
network = {network}

[mcp.allow]
tools = ["rogue.*"]

[mcp.deny]
tools = ["rogue.refused"]
"""


def _policy(workspace: Path, mode: str, *, timeout: float = 60, network: list[str] | None = None):
    command = json.dumps([PYTHON, str(ROGUE), mode])
    text = POLICY.format(command=command, timeout=timeout, network=json.dumps(network or []))
    return bound(text, workspace)


def _text(result: object) -> str:
    return " ".join(getattr(c, "text", "") for c in getattr(result, "content", []))


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    return ws


@pytest.fixture
def local_http() -> Iterator[int]:
    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"hello from the host")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


async def test_a_server_that_reaches_for_the_network_is_refused_and_recorded_and_its_named_host_answers(
    workspace: Path, tmp_path: Path, local_http: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROGUE_PORT", str(local_http))
    policy = _policy(workspace, "network", network=[f"127.0.0.1:{local_http}"])
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "rogue") as session:
        out = await session.call_tool("fetch", {})
        assert "failed" in _text(out) and "fetched" not in _text(out)
        local = await session.call_tool("fetch_local", {})
        assert "fetched 200: hello from the host" in _text(local)
    connections = [
        (r["subject"]["host"], r["subject"]["origin"], r["verdict"]) for r in g.records("network")
    ]
    assert ("example.com", "mcp:rogue", "deny") in connections
    assert ("127.0.0.1", "mcp:rogue", "allow") in connections
    assert g.verified()


async def test_a_server_with_no_network_hosts_reaches_nothing_not_even_a_loopback_host(
    workspace: Path, tmp_path: Path, local_http: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROGUE_PORT", str(local_http))
    async with governed(_policy(workspace, "network"), tmp_path / "audit.jsonl") as g, client(
        g, "rogue"
    ) as session:
        out = await session.call_tool("fetch", {})
        local = await session.call_tool("fetch_local", {})
    assert "failed" in _text(out) and "failed" in _text(local)
    denied = [r for r in g.records("network") if r["verdict"] == "deny"]
    assert denied and all(r["subject"]["origin"] == "mcp:rogue" for r in denied)
    assert g.verified()


async def test_a_flood_of_notifications_is_passed_on_and_the_call_still_answered(
    workspace: Path, tmp_path: Path
) -> None:
    seen: list[object] = []

    async def logged(params: object) -> None:
        seen.append(params)

    async with governed(_policy(workspace, "flood"), tmp_path / "audit.jsonl") as g, client(
        g, "rogue", logging_callback=logged
    ) as session:
        done = await session.call_tool("ping", {})
    assert _text(done) == "ping done"
    assert len(seen) == 5000
    assert g.verified()


async def test_malformed_lines_are_dropped_and_counted_and_the_session_goes_on(
    workspace: Path, tmp_path: Path
) -> None:
    async with governed(_policy(workspace, "malformed"), tmp_path / "audit.jsonl") as g, client(
        g, "rogue"
    ) as session:
        first = await session.call_tool("ping", {})
        second = await session.call_tool("ping", {})
        assert _text(first) == _text(second) == "ping done"
        assert g.relay.dropped["rogue"] == 12
        assert any("12 messages dropped" in n for n in g.relay.notices())
    assert g.verified()


async def test_a_server_that_never_answers_is_answered_for_after_its_timeout(
    workspace: Path, tmp_path: Path
) -> None:
    async with governed(_policy(workspace, "silent", timeout=1), tmp_path / "audit.jsonl") as g, client(
        g, "rogue"
    ) as session:
        with pytest.raises(Exception, match="did not answer tools/call within 1 s"):
            await session.call_tool("ping", {})
        still = await session.list_tools()  # the session goes on
        assert "ping" in [t.name for t in still.tools]
    assert any("did not answer" in n for n in g.relay.notices())
    assert g.verified()


async def test_answers_to_what_the_server_was_never_sent_are_dropped_a_refused_call_among_them(
    workspace: Path, tmp_path: Path
) -> None:
    async with governed(_policy(workspace, "unasked"), tmp_path / "audit.jsonl") as g, client(
        g, "rogue"
    ) as session:
        refused = await session.call_tool("refused", {})
        assert refused.is_error and "Refused by the governor" in _text(refused)
        after = await session.call_tool("ping", {})
        assert not after.is_error
    assert g.relay.dropped["rogue"] == 50  # the one call forwarded: 50 ids it was not sent
    assert [(r["subject"]["name"], r["verdict"]) for r in g.records()] == [
        ("refused", "deny"), ("ping", "allow")
    ]
    assert g.verified()


async def test_a_servers_requests_are_decided_by_the_governor_and_none_reaches_the_agent(
    workspace: Path, tmp_path: Path
) -> None:
    """Unattended: sampling refused (it would let the server drive the model),
    the form declined as the agent's own would be, the roots the job's (the
    agent's callback never asked), ping answered, any other request refused;
    each decision recorded, naming the server."""
    reached: list[str] = []

    async def sampling(context: object, params: object) -> object:
        reached.append("sampling")
        raise AssertionError("a server reached the agent's model")

    async def elicit(context: object, params: object) -> object:
        reached.append("elicitation")
        raise AssertionError("a server reached the agent's person")

    async def roots(context: object) -> object:
        reached.append("roots")
        raise AssertionError("the agent was asked for the server's roots")

    async with governed(_policy(workspace, "asks"), tmp_path / "audit.jsonl") as g, client(
        g, "rogue", sampling_callback=sampling, elicitation_callback=elicit, list_roots_callback=roots
    ) as session:
        capabilities, *answered = json.loads(_text(await session.call_tool("ping", {})))
    assert reached == []
    # what the server was told it may ask: roots (the relay's), no sampling, no form unattended
    assert capabilities == {"roots": {}}
    sampled, form, listed, pinged, other = answered
    assert sampled["error"]["code"] == -32001
    assert "drive the agent's model" in sampled["error"]["message"]
    assert form["result"] == {"action": "decline"}
    assert listed["result"] == {"roots": [{"uri": workspace.as_uri(), "name": "ws"}]}
    assert pinged["result"] == {}
    assert other["error"]["code"] == -32601 and "Refused by the governor" in other["error"]["message"]
    refused = [r for r in g.records() if r["subject"].get("origin") == "mcp:rogue"]
    assert [(r["subject"]["method"], r["verdict"], r["by"]) for r in refused] == [
        ("sampling/createMessage", "deny", "protocol"),
        ("custom/exfiltrate", "deny", "protocol"),
    ]
    (asked,) = g.records("elicitation")
    assert (asked["verdict"], asked["by"], asked["option"]) == ("deny", "unattended", "decline")
    assert asked["subject"]["origin"] == "mcp:rogue"
    assert asked["subject"]["message"] == "the MCP server rogue asks: Name the project"
    assert g.verified()


async def test_with_a_person_a_servers_form_is_put_to_them_and_their_answer_reaches_the_server(
    workspace: Path, tmp_path: Path
) -> None:
    """``--approvals person``: the relay offers the server elicitation, and the
    form goes to the person at the terminal (a pty here), as the agent's would."""
    master, slave = os.openpty()
    try:
        os.write(master, b"f\nmy-project\n")  # fill in the form; its one field
        person = Person(os.ttyname(slave))
        async with governed(
            _policy(workspace, "asks"), tmp_path / "audit.jsonl", approver=person
        ) as g, client(g, "rogue") as session:
            capabilities, _, form, *_ = json.loads(_text(await session.call_tool("ping", {})))
        shown = os.read(master, 65536).decode(errors="replace")
    finally:
        os.close(master)
        os.close(slave)
    assert capabilities == {"roots": {}, "elicitation": {}}
    assert form["result"] == {"action": "accept", "content": {"name": "my-project"}}
    assert "the MCP server rogue asks: Name the project" in shown
    (asked,) = g.records("elicitation")
    assert (asked["verdict"], asked["by"], asked["option"]) == ("allow", "person", "accept")
    assert "my-project" not in g.log.read_text()  # what the person typed is not logged
    assert g.verified()
