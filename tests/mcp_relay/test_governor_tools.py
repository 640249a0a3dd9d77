"""The governor's own tools (``[mcp] governor_tools``) as an agent reaches them:
the official SDK's stdio client spawning the real shim, against a real relay's
socket, the gate's fs and terminal paths behind it, commands in the real sandbox."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_harness import REPO, Governed, bound, connect

from governor.audit.log import AuditLog
from governor.audit.tally import Tally, tally
from governor.confine import egress as network
from governor.confine.sandboxes import GovernedTerminals
from governor.gate.approver import Approver, Ask, Callback, Unattended
from governor.gate.gatekeeper import Gate
from governor.job.spec import AttemptSpec, prepare
from governor.mcp.relay import open_relay
from governor.policies.errors import ConfigError
from governor.policies.policy import Policy, parse_policy
from governor.sandbox.net.proxy import open_egress

EDIT = """
capability = "edit-workspace"

[mcp]
governor_tools = true

[deny]
commands = ["rm *"]
"""

READ_ONLY = """
capability = "read-only"

[mcp]
governor_tools = true
"""


@asynccontextmanager
async def governed(
    policy: Policy, log: Path, approver: Approver | None = None
) -> AsyncIterator[Governed]:
    """What an attempt opens for the governor's tools: the log, the gate with its
    terminals (the sandbox's), the egress proxy and the relay."""
    audit = AuditLog(log, "att")
    audit.record("attempt-start", agent="mcp-test", workspace=policy.workspace, roots=list(policy.roots))
    events: list[tuple[str, dict[str, object]]] = []
    async with trio.open_nursery() as nursery:
        proxy = None
        terminals = GovernedTerminals(nursery, policy, dict(os.environ), proxy=lambda: proxy)
        gate = Gate(
            policy,
            audit,
            approver or Unattended(),
            terminals=terminals,
            on_event=lambda kind, info: events.append((kind, info)),
        )
        try:
            async with (
                open_egress(network.judge(gate)) as proxy,
                open_relay(gate, policy, dict(os.environ), lambda: proxy) as relay,
            ):
                assert relay is not None
                yield Governed(relay, gate, log, events)
        finally:
            await terminals.close()
        nursery.cancel_scope.cancel()


@asynccontextmanager
async def tools(g: Governed) -> AsyncIterator[ClientSession]:
    """The SDK's client on the shim command the agent gets for ``governor``."""
    (entry,) = [e for e in g.relay.entries() if e["name"] == "governor"]
    params = StdioServerParameters(
        command=str(entry["command"]),
        args=[str(a) for a in entry["args"]],  # type: ignore[union-attr]
        env={str(v["name"]): str(v["value"]) for v in entry["env"]},  # type: ignore[union-attr,index]
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        init = await session.initialize()
        assert init.server_info.name == "governor"
        assert init.instructions and "`run`" in init.instructions
        yield session


def _text(result: object) -> str:
    return " ".join(getattr(c, "text", "") for c in getattr(result, "content", []))


def _all(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def _decisions(log: Path) -> list[tuple[str, str, str]]:
    """(kind, what, verdict) of each request, in order: a command's parts are
    records of one request, refused when one part is; each record says it came
    via MCP."""
    found: dict[object, tuple[str, str, str]] = {}
    for r in _all(log):
        if r["kind"] in ("read", "write", "terminal"):
            subject = r["subject"]
            assert isinstance(subject, dict)
            assert subject["via"] == "mcp:governor", r
            what = str(subject.get("path") or subject.get("command"))
            before = found.get(r["request"])
            verdict = "deny" if before and before[2] == "deny" else str(r["verdict"])
            found[r["request"]] = (str(r["kind"]), what, verdict)
    return list(found.values())


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("one\ntwo\nthree\n")
    (ws / ".env").write_text("TOKEN=sk-abcdef\n")
    (ws / "keep.txt").write_text("keep me\n")
    return ws


async def test_each_tool_call_is_the_fs_or_terminal_request_it_stands_for_decided_sandboxed_and_recorded(
    tmp_path: Path, workspace: Path
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("beside the workspace\n")
    policy = bound(EDIT, workspace)
    log = tmp_path / "audit.jsonl"
    async with governed(policy, log) as g, tools(g) as session:
        listed = await session.list_tools()
        assert sorted(t.name for t in listed.tools) == ["blocked", "read", "run", "write"]

        read = await session.call_tool("read", {"path": "notes.txt", "line": 2, "limit": 1})
        assert not read.is_error and _text(read) == "two\n"
        hidden = await session.call_tool("read", {"path": str(workspace / ".env")})
        assert hidden.is_error and "Refused by the governor" in _text(hidden)
        assert "sk-abcdef" not in _text(hidden)
        beside = await session.call_tool("read", {"path": str(outside)})
        assert beside.is_error and "outside the roots" in _text(beside)

        wrote = await session.call_tool("write", {"path": "made.txt", "content": "made by the tool\n"})
        assert not wrote.is_error, _text(wrote)
        assert (workspace / "made.txt").read_text() == "made by the tool\n"
        out = await session.call_tool("write", {"path": str(outside), "content": "overwritten"})
        assert out.is_error and "Refused by the governor" in _text(out)
        git = await session.call_tool("write", {"path": ".git/hooks/pre-commit", "content": "x"})
        assert git.is_error and "protected" in _text(git)

        ran = await session.call_tool("run", {"command": "cat made.txt; echo to-stderr >&2; exit 3"})
        assert not ran.is_error, _text(ran)
        assert _text(ran).startswith("exit code 3\n")
        assert "made by the tool" in _text(ran) and "to-stderr" in _text(ran)
        assert ran.structured_content is not None and ran.structured_content["exit_code"] == 3
        # the same sandbox as a terminal's: the host's /tmp beside the workspace is not there
        peek = await session.call_tool("run", {"command": f"cat {outside}"})
        assert "beside the workspace" not in _text(peek) and not _text(peek).startswith("exit code 0")
        denied = await session.call_tool("run", {"command": "rm keep.txt"})
        assert denied.is_error and "Refused by the governor" in _text(denied)
        assert "rm *" in _text(denied)

        bad = await session.call_tool("run", {"command": "true", "timeout": 0})
        assert bad.is_error and "timeout" in _text(bad)
        unknown = await session.call_tool("search", {"pattern": "x"})
        assert unknown.is_error and "no tool 'search'" in _text(unknown)

    assert (workspace / "keep.txt").exists()
    assert outside.read_text() == "beside the workspace\n"
    assert _decisions(log) == [
        ("read", str(workspace / "notes.txt"), "allow"),
        ("read", str(workspace / ".env"), "deny"),
        ("read", str(outside), "deny"),
        ("write", str(workspace / "made.txt"), "allow"),
        ("write", str(outside), "deny"),
        ("write", str(workspace / ".git/hooks/pre-commit"), "deny"),
        ("terminal", "cat made.txt; echo to-stderr >&2; exit 3", "allow"),
        ("terminal", f"cat {outside}", "allow"),
        ("terminal", "rm keep.txt", "deny"),
    ]
    # counted as the fs and terminal requests they are, and nothing else was asked
    assert g.gate.audit.tallier.tally() == Tally(asked=9, allowed=4, refused=5)
    assert tally(_all(log)) == Tally(asked=9, allowed=4, refused=5)
    assert str(workspace / "made.txt") in g.gate.carried.written  # evidence for the change
    assert "sk-abcdef" not in log.read_text()
    assert g.verified()
    # `governor audit --mcp` tells them apart from the agent's ACP requests: one line a request
    shown = subprocess.run(
        [str(Path(sys.executable).with_name("governor")), "audit", "--mcp", str(log)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    assert "allow    tools/call read: " in shown and "deny     tools/call run: rm keep.txt" in shown
    assert shown.count("tools/call run: cat made.txt") == 1, shown  # three parts, one request
    assert "server governor: the governor's own tools, answered in-process (writable; network: none)" in shown
    assert "tools of governor: run, read, write, blocked; hidden: none" in shown, shown
    assert "governor: 9 call(s), 4 allowed, 5 refused or waiting" in shown, shown
    story = subprocess.run(
        [str(Path(sys.executable).with_name("governor")), "audit", "--attempt", "att", str(log)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    assert f"write request 4 via mcp:governor: {workspace / 'made.txt'} -> allow" in story, story
    # and replay re-decides them as the requests they are
    stricter = tmp_path / "stricter.toml"
    stricter.write_text('capability = "read-only"\n')
    replayed = subprocess.run(
        [str(Path(sys.executable).with_name("governor")), "audit", "replay", str(log), "--policy", str(stricter)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    assert f"write: {workspace / 'made.txt'}\n      allowed -> refused [capability: read-only]" in replayed


async def test_at_read_only_write_and_a_writing_run_are_refused_and_the_sandbox_stops_the_rest(
    tmp_path: Path, workspace: Path
) -> None:
    policy = bound(READ_ONLY, workspace)
    log = tmp_path / "audit.jsonl"
    async with governed(policy, log) as g, tools(g) as session:
        listed = await session.list_tools()
        assert sorted(t.name for t in listed.tools) == ["blocked", "read", "run"]  # every write is refused
        (offered,) = [r for r in _all(log) if r["kind"] == "mcp-tools"]
        assert offered["subject"] == {"server": "governor", "tools": ["run", "read", "blocked"], "hidden": ["write"]}
        read = await session.call_tool("read", {"path": "notes.txt"})
        assert not read.is_error and "three" in _text(read)
        wrote = await session.call_tool("write", {"path": "notes.txt", "content": "changed"})
        assert wrote.is_error and "read-only" in _text(wrote)
        redirect = await session.call_tool("run", {"command": "echo changed > notes.txt"})
        assert redirect.is_error and "read-only" in _text(redirect)
        # a command is allowed at read-only, as a terminal's is: its sandbox cannot write
        touch = await session.call_tool("run", {"command": "touch made.txt"})
        assert not touch.is_error and not _text(touch).startswith("exit code 0"), _text(touch)
        listing = await session.call_tool("run", {"command": "ls"})
        assert _text(listing).startswith("exit code 0\n") and "notes.txt" in _text(listing)
    assert (workspace / "notes.txt").read_text() == "one\ntwo\nthree\n"
    assert not (workspace / "made.txt").exists()
    assert _decisions(log) == [
        ("read", str(workspace / "notes.txt"), "allow"),
        ("write", str(workspace / "notes.txt"), "deny"),
        ("terminal", "echo changed > notes.txt", "deny"),
        ("terminal", "touch made.txt", "allow"),
        ("terminal", "ls", "allow"),
    ]
    assert g.verified()


async def test_a_run_over_its_timeout_is_killed_and_says_so(tmp_path: Path, workspace: Path) -> None:
    policy = bound(EDIT, workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g, tools(g) as session:
        slow = await session.call_tool("run", {"command": "echo started; sleep 600", "timeout": 0.5})
        assert slow.is_error and _text(slow).startswith("timed out after 0.5 s and was killed")
        assert "started" in _text(slow)
        assert len(g.gate.relay.terminals.inner) == 0  # type: ignore[union-attr]  # released


def test_the_tools_are_off_by_default_and_their_name_is_the_governors(tmp_path: Path) -> None:
    assert not parse_policy('capability = "read-only"\n', "job.toml").mcp.governor_tools
    named = '[mcp]\ngovernor_tools = true\n[[mcp.servers]]\nname = "governor"\ncommand = ["x"]\n'
    with pytest.raises(ConfigError, match=r"mcp\.servers\[0\]\.name.*governor's own tools"):
        parse_policy(named, "job.toml")
    with pytest.raises(ConfigError, match=r"mcp\.governor_tools: expected true or false"):
        parse_policy('[mcp]\ngovernor_tools = "yes"\n', "job.toml")
    # off, a server may take the name
    assert parse_policy(named.replace("true", "false"), "job.toml").mcp.servers[0].name == "governor"


def test_a_library_call_cannot_hand_the_agent_a_server_named_governor_while_the_tools_are_on(
    tmp_path: Path,
) -> None:
    from governor.job.spec import RefusedBeforeStart
    from governor.policies.mcp import McpServer

    policy = tmp_path / "policy.toml"
    policy.write_text(READ_ONLY)
    spec = AttemptSpec(
        prompt="x",
        argv=[sys.executable, "-c", "pass"],
        workspace=tmp_path,
        policy=policy,
        mcp_servers=[McpServer("governor", command=(sys.executable,))],
    )
    with pytest.raises(RefusedBeforeStart, match="the name of the governor's own tools"):
        prepare(spec)


def test_a_run_without_mcp_does_not_import_the_sdk() -> None:
    code = (
        "import sys, governor.attempt.lifecycle, governor.cli.run, governor.mcp.relay; "
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith(('mcp.', 'governor.mcp.own'))))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert found.stdout.strip() == "[]", found.stdout


async def test_a_client_that_sends_garbage_or_a_line_without_end_loses_its_session_and_nothing_else(
    tmp_path: Path, workspace: Path
) -> None:
    """Anything may connect to the socket (the agent, a copy of the shim it made):
    a line that is not JSON-RPC is dropped, a line over 16 MiB ends that
    session, and the next connection is served as the first was."""
    policy = bound(EDIT, workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g:
        raw = await connect(g, g.relay.own_socket_path())
        ping = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
        await raw.send_all(b"not json\n[1, 2]\n" + json.dumps(ping).encode() + b"\n")
        with trio.fail_after(30):
            answer = json.loads(await raw.receive_some(65536))
        assert answer == {"jsonrpc": "2.0", "id": 7, "result": {}}
        with contextlib.suppress(trio.BrokenResourceError):
            await raw.send_all(b"x" * (17 * 2**20))
        with trio.fail_after(30), contextlib.suppress(trio.BrokenResourceError):
            while await raw.receive_some(65536):
                pass  # the governor closed it (reset: it left unread bytes)
        async with tools(g) as session:
            read = await session.call_tool("read", {"path": "notes.txt"})
        assert not read.is_error and "two" in _text(read)
        assert g.verified()


def test_governor_tools_from_the_command_line_turn_them_on_for_a_policy_that_does_not(
    tmp_path: Path,
) -> None:
    from governor.cli import build_parser

    assert build_parser().parse_args(["run", "--governor-tools", "x"]).governor_tools
    assert not build_parser().parse_args(["run", "x"]).governor_tools
    spec = AttemptSpec(prompt="x", argv=[sys.executable], workspace=tmp_path, governor_tools=True)
    assert prepare(spec).policy.mcp.governor_tools
    assert not prepare(AttemptSpec(prompt="x", argv=[sys.executable], workspace=tmp_path)).policy.mcp.governor_tools


async def test_a_client_that_hangs_up_during_a_run_has_its_command_killed_and_the_governor_goes_on(
    tmp_path: Path, workspace: Path
) -> None:
    policy = bound(EDIT, workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g:
        inner = g.gate.relay.terminals.inner  # type: ignore[union-attr]
        raw = await connect(g, g.relay.own_socket_path())
        hello = {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        }  # fmt: skip
        run = {
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "run", "arguments": {"command": "sleep 600"}},
        }  # fmt: skip
        await raw.send_all(json.dumps(hello).encode() + b"\n")
        with trio.fail_after(30):
            assert b'"id":1' in await raw.receive_some(65536)
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        await raw.send_all(json.dumps(initialized).encode() + b"\n" + json.dumps(run).encode() + b"\n")
        with trio.fail_after(30):
            while len(inner) == 0:
                await trio.sleep(0.02)
        await raw.aclose()
        with trio.fail_after(30):
            while len(inner):
                await trio.sleep(0.02)  # killed and released
        async with tools(g) as session:
            ran = await session.call_tool("run", {"command": "echo still here"})
        assert "still here" in _text(ran)
        assert g.verified()


async def test_an_ask_goes_to_the_approver_and_the_run_waits_for_its_answer(
    tmp_path: Path, workspace: Path
) -> None:
    asked: list[Ask] = []

    def person(ask: Ask) -> bool:
        asked.append(ask)
        return ask.subject == "touch yes.txt"

    policy = bound(EDIT + '\n[ask]\ncommands = ["touch *"]\n', workspace)
    log = tmp_path / "audit.jsonl"
    async with governed(policy, log, Callback(person)) as g, tools(g) as session:
        yes = await session.call_tool("run", {"command": "touch yes.txt"})
        no = await session.call_tool("run", {"command": "touch no.txt"})
    assert not yes.is_error and _text(yes).startswith("exit code 0"), _text(yes)
    assert no.is_error and "Refused by the governor" in _text(no)
    assert (workspace / "yes.txt").exists() and not (workspace / "no.txt").exists()
    assert [(a.kind, a.subject) for a in asked] == [("terminal", "touch yes.txt"), ("terminal", "touch no.txt")]
    assert [(r["verdict"], r["by"]) for r in _all(log) if r["kind"] == "terminal"] == [
        ("allow", "person"), ("deny", "person")
    ]
    assert g.gate.audit.tallier.tally() == Tally(asked=2, allowed=1, waited=2, refused=1)
    assert g.verified()
