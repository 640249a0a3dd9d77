"""The npm filesystem server (@modelcontextprotocol/server-filesystem) through the relay:
its own roots, the policy's argument rules, and its sandbox beneath both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import trio
from mcp import types
from mcp_harness import bound, client, governed, npm_server
from pydantic import FileUrl

POLICY = """
capability = "read-only"

[[mcp.servers]]
name = "fs"
command = {command}

[mcp.allow]
tools = ["fs.read_text_file", "fs.list_allowed_directories"]

[mcp.deny]
tools = [{{ tool = "fs.read_text_file", args = {{ path = "*.env" }} }}]
"""


def _text(result: object) -> str:
    return " ".join(getattr(c, "text", "") for c in getattr(result, "content", []))


def _policy(workspace: Path, *roots: str) -> str:
    command = [*npm_server("server-filesystem"), *roots]
    return POLICY.format(command=json.dumps(command))


async def test_the_filesystem_server_reads_inside_its_roots_and_not_outside(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("inside the roots\n")
    (workspace / "prod.env").write_text("TOKEN=abc\n")
    policy = bound(_policy(workspace, str(workspace)), workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "fs") as session:
        inside = await session.call_tool("read_text_file", {"path": str(workspace / "notes.txt")})
        assert not inside.is_error and "inside the roots" in _text(inside)
        outside = await session.call_tool("read_text_file", {"path": "/etc/hostname"})
        assert outside.is_error and "Refused by the governor" not in _text(outside)  # the server's own word
        env = await session.call_tool("read_text_file", {"path": str(workspace / "prod.env")})
        assert env.is_error and "Refused by the governor" in _text(env)
        assert "TOKEN" not in _text(env)
        # unlisted and a write: asked, and unattended refused; never reaches the server
        write = await session.call_tool("write_file", {"path": str(workspace / "x"), "content": "x"})
        assert write.is_error and "Refused by the governor" in _text(write)
    assert not (workspace / "x").exists()
    verdicts = [(r["subject"]["name"], r["verdict"], r["rule"]) for r in g.records()]
    assert verdicts == [
        ("read_text_file", "allow", "mcp.allow: fs.read_text_file"),
        ("read_text_file", "allow", "mcp.allow: fs.read_text_file"),
        ("read_text_file", "deny", "mcp.deny: fs.read_text_file (path=*.env)"),
        ("write_file", "deny", "capability: read-only"),
    ]
    assert g.records()[3]["subject"]["arguments"]["content"] == "<1 characters>"
    assert g.verified()


async def test_the_servers_roots_are_the_jobs_answered_by_the_relay_never_what_the_agent_says(
    tmp_path: Path,
) -> None:
    """MCP lets the client name the server's roots (``roots/list``): the relay
    answers it with the job's roots, what the server's sandbox shows, and the
    agent, which would hand it ``/tmp``, is never asked. The server is started
    with no directory of its own, so that it takes its roots from that answer."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("inside\n")
    beside = tmp_path / "beside-the-workspace.txt"  # under the host's /tmp, not a root
    beside.write_text("host only\n")
    policy = bound(_policy(workspace), workspace)
    asked: list[object] = []

    async def roots(context: Any) -> types.ListRootsResult:
        asked.append(context)
        return types.ListRootsResult(roots=[types.Root(uri=FileUrl("file:///tmp"))])

    async with governed(policy, tmp_path / "audit.jsonl") as g, client(
        g, "fs", list_roots_callback=roots
    ) as session:
        for _ in range(100):  # the server asks for the roots once it is initialized
            listed = _text(await session.call_tool("list_allowed_directories", {}))
            if str(workspace) in listed:
                break
            await trio.sleep(0.05)
        assert listed.splitlines()[1:] == [str(workspace)], listed  # not /tmp
        refused = await session.call_tool("read_text_file", {"path": str(beside)})
        assert refused.is_error and "host only" not in _text(refused)
        assert "Refused by the governor" not in _text(refused)  # the server's own word: outside its roots
        seen = await session.call_tool("read_text_file", {"path": str(workspace / "notes.txt")})
        assert not seen.is_error and "inside" in _text(seen)
    assert asked == []
    assert {r["verdict"] for r in g.records()} == {"allow"}
