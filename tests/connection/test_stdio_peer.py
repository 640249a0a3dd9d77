"""The stdlib agents' shared JSON-RPC loop (`governor/agents/stdio_peer.py`):
what it skips, how it matches an answer to the agent's request, what it sets
aside meanwhile; and that an agent built on it needs nothing but the standard
library and its own folder."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from governor.agents.stdio_peer import Closed, Peer, encode

AGENTS = Path(__file__).resolve().parents[2] / "governor" / "agents"


def peer_reading(*lines: bytes) -> tuple[Peer, io.BytesIO]:
    out = io.BytesIO()
    return Peer(stdin=io.BytesIO(b"".join(lines)), stdout=out), out


def line(message: dict[str, Any]) -> bytes:
    return json.dumps(message).encode() + b"\n"


def test_lines_that_are_not_json_objects_are_skipped_not_fatal() -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
    peer, _ = peer_reading(
        b"not json\n", b"\xff\xfe not utf-8\n", b"[1,2,3]\n", b"\n", b'"text"\n', line(request)
    )
    assert peer.read() == request
    assert peer.read() is None


def test_an_answer_is_matched_by_id_and_what_came_before_it_is_set_aside() -> None:
    update = {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s"}}
    asked = {"jsonrpc": "2.0", "id": "c1", "method": "session/prompt", "params": {}}
    stray = {"jsonrpc": "2.0", "id": 99, "result": {}}
    cancel = {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s"}}
    answer = {"jsonrpc": "2.0", "id": 5, "result": {"content": "x"}}
    peer, out = peer_reading(line(update), line(asked), line(stray), line(cancel), line(answer))
    peer.next_id = 5
    assert peer.request("fs/read_text_file", {"path": "/a"}) == answer
    assert out.getvalue() == (
        b'{"jsonrpc":"2.0","id":5,"method":"fs/read_text_file","params":{"path":"/a"}}\n'
    )
    assert peer.cancelled
    assert peer.inbox == [update, asked]  # the stray answer is dropped
    assert peer.receive() == update and peer.receive() == asked and peer.receive() is None
    assert peer.next_id == 6


def test_the_end_of_stdin_while_an_answer_is_awaited_is_a_quiet_exit() -> None:
    peer, _ = peer_reading(line({"jsonrpc": "2.0", "id": 7, "result": {}}))  # not its answer
    with pytest.raises(Closed) as closed:
        peer.request("fs/read_text_file", {"path": "/a"})
    assert isinstance(closed.value, SystemExit) and closed.value.code == 0


def test_answers_and_notifications_are_one_compact_line_each() -> None:
    peer, out = peer_reading()
    peer.respond(3, {"stopReason": "end_turn"})
    peer.fail("x", -32601, "no")
    peer.notify("session/update", {"sessionId": "s"})
    assert out.getvalue().split(b"\n") == [
        b'{"jsonrpc":"2.0","id":3,"result":{"stopReason":"end_turn"}}',
        b'{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"no"}}',
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s"}}',
        b"",
    ]
    assert encode({"id": 1}) == b'{"jsonrpc":"2.0","id":1}\n'


def test_the_demo_runs_from_its_folder_alone_with_no_site_packages(tmp_path: Path) -> None:
    for name in ("demo.py", "stdio_peer.py"):
        shutil.copy(AGENTS / name, tmp_path / name)
    messages = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 1, "method": "session/new", "params": {"cwd": str(tmp_path)}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": {"prompt": []}},
    ]
    ran = subprocess.run(
        [sys.executable, "-I", "-S", str(tmp_path / "demo.py"), "--steps", "0"],
        input=b"".join(line(m) for m in messages),
        capture_output=True,
        timeout=60,
        check=False,
    )
    assert ran.returncode == 0, ran.stderr.decode()
    answers = {m["id"]: m for m in map(json.loads, ran.stdout.splitlines()) if "id" in m}
    assert answers[0]["result"]["agentInfo"]["name"] == "demo"
    assert answers[1]["result"] == {"sessionId": "demo-session-1"}
    assert answers[2]["result"] == {"stopReason": "end_turn"}
