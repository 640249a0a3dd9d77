"""A relay socket answers only this attempt's shims: a connection must say the
attempt's token first (the shim's entry carries it in its ``env``), else it is
closed unanswered and recorded. The real shim with its token is served, also
where the socket's path is longer than a Unix socket's may be."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import trio
from mcp_harness import bound
from test_governor_tools import EDIT, governed, tools

from governor.mcp.relay import TOKEN_PREFIX
from governor.mcp.servers import TOKEN_VARIABLE

PING = json.dumps({"jsonrpc": "2.0", "id": 7, "method": "ping"}).encode() + b"\n"


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("one\n")
    return ws


async def _answer(path: str, first: bytes) -> bytes:
    """What the relay sends back to a connection that says ``first`` then a ping."""
    stream = await trio.open_unix_socket(path)
    async with stream:
        await stream.send_all(first + PING)
        with trio.fail_after(30):
            try:
                return await stream.receive_some(65536)
            except trio.BrokenResourceError:  # closed with the rest unread: a reset
                return b""


async def test_a_connection_without_the_attempts_token_gets_nothing_and_is_recorded_and_the_shim_with_it_is_served(
    workspace: Path, tmp_path: Path
) -> None:
    log = tmp_path / "audit.jsonl"
    async with governed(bound(EDIT, workspace), log) as g:
        path = g.relay.own_socket_path()
        assert await _answer(path, b"") == b""  # no token: closed, the ping unanswered
        assert await _answer(path, TOKEN_PREFIX + b"x" * 43 + b"\n") == b""  # a wrong one: the same
        served = await _answer(path, TOKEN_PREFIX + g.relay.token.encode() + b"\n")
        assert json.loads(served) == {"jsonrpc": "2.0", "id": 7, "result": {}}  # the neighbour
        async with tools(g) as session:  # the real shim, its entry's env carrying the token
            read = await session.call_tool("read", {"path": "notes.txt"})
        assert not read.is_error and "one" in " ".join(getattr(c, "text", "") for c in read.content)
        (entry,) = g.relay.entries()
        env = {k: v for k, v in os.environ.items() if k != TOKEN_VARIABLE}
        shim = subprocess.run(
            [str(entry["command"]), *map(str, entry["args"])],  # type: ignore[call-overload]
            input="", capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert shim.returncode == 2 and f"{TOKEN_VARIABLE} is not set" in shim.stderr
        notices = g.relay.notices()
        token = g.relay.token
    records = [json.loads(x) for x in log.read_text().splitlines()]
    refused = [r["subject"] for r in records if r["kind"] == "mcp-connection"]
    assert refused == [
        {"server": "governor", "verdict": "deny", "reason": "no token"},
        {"server": "governor", "verdict": "deny", "reason": "a wrong token"},
    ]
    assert any("governor: 2 connection(s) refused" in n for n in notices), notices
    assert token not in log.read_text()


async def test_the_shim_reaches_a_socket_whose_path_is_longer_than_a_unix_sockets_may_be(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep = tmp_path / ("d" * 60) / ("e" * 60)
    monkeypatch.setenv("XDG_STATE_HOME", str(deep))
    async with governed(bound(EDIT, workspace), tmp_path / "audit.jsonl") as g:
        assert len(g.relay.own_socket_path()) > 108
        async with tools(g) as session:
            read = await session.call_tool("read", {"path": "notes.txt"})
    assert not read.is_error
