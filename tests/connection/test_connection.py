"""The connection layer against real peer processes over real pipes."""

from __future__ import annotations

import json
import random
import tracemalloc
from typing import Any

import pytest
import trio
from acp.schema import (
    AllowedOutcome,
    ReadTextFileRequest,
    ReadTextFileResponse,
    RequestPermissionRequest,
    RequestPermissionResponse,
)
from structlog.testing import capture_logs

from governor.acp.connection import Connection, ConnectionClosed, RemoteError, RequestTimeout
from governor.acp.dispatch import RpcError

RPC = "2.0"


def request(id: Any, method: str, params: Any) -> dict[str, Any]:
    return {"send": {"jsonrpc": RPC, "id": id, "method": method, "params": params}}


def notification(method: str, params: Any) -> dict[str, Any]:
    return {"send": {"jsonrpc": RPC, "method": method, "params": params}}


def read_file(id: Any, path: str) -> dict[str, Any]:
    return request(id, "fs/read_text_file", {"sessionId": "s1", "path": path})


PERMISSION = {
    "sessionId": "s1",
    "toolCall": {"toolCallId": "call_1", "title": "Write f", "kind": "edit"},
    "options": [
        {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
        {"optionId": "no", "name": "Reject", "kind": "reject_once"},
    ],
}


class Files:
    """A handler table whose fs/read_text_file answers with the path it was asked for."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def read(self, params: ReadTextFileRequest) -> ReadTextFileResponse:
        self.calls.append(params.path)
        if params.path == "/missing":
            raise RpcError(-32002, "Resource not found", {"path": params.path})
        if params.path == "/boom":
            raise RuntimeError("token=SECRET-TOKEN-123 leaked into an exception")
        return ReadTextFileResponse(content=f"contents of {params.path}")

    def table(self) -> dict[str, Any]:
        return {"fs/read_text_file": (ReadTextFileRequest, self.read)}


def events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == name]


async def test_a_line_over_the_limit_is_an_error_naming_the_limit_and_memory_stays_bounded(
    peer: Any,
) -> None:
    limit = 1 << 20
    size = 24 << 20
    files = Files()
    head = '{"jsonrpc":"2.0","id":7,"method":"fs/write_text_file","params":{"sessionId":"s1",'
    head += '"path":"/w/f","content":"'
    tracemalloc.start()
    try:
        with capture_logs() as logs:
            run = await peer(
                [
                    {"long_line": {"head": head, "size": size, "tail": '"}}'}},
                    read_file(8, "/after"),
                    {"read": {"responses": 2}},
                ],
                files.table(),
                max_line_bytes=limit,
            )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"held {peak} bytes while a {size}-byte line went by"
    too_long = run.answer(7)["error"]
    assert too_long["code"] == -32600
    assert str(limit) in too_long["message"]
    assert run.answer(8)["result"] == {"content": "contents of /after"}
    (malformed,) = events(logs, "agent.malformed_line")
    assert str(limit) in malformed["reason"] and "max_line_bytes" in malformed["reason"]
    assert malformed["length"] == len(head) + size + len('"}}')


async def test_our_ids_and_the_agents_ids_never_collide(peer: Any) -> None:
    files = Files()
    ours: dict[int, Any] = {}

    async def body(connection: Any) -> None:
        async def ask(n: int) -> None:
            ours[n] = await connection.request("test/echo", {"n": n})

        async with trio.open_nursery() as nursery:
            for n in range(3):
                nursery.start_soon(ask, n)

    run = await peer(
        [read_file(0, "/a"), read_file(1, "/b"), read_file("0", "/c"),
         {"read": {"responses": 3, "requests": 3}}],
        files.table(),
        body=body,
    )
    assert ours == {n: {"echo": {"n": n}, "method": "test/echo"} for n in range(3)}
    assert run.answer(0)["result"]["content"] == "contents of /a"
    assert run.answer(1)["result"]["content"] == "contents of /b"
    assert run.answer("0")["result"]["content"] == "contents of /c"
    our_ids = sorted(e["line"]["id"] for e in run.read if "method" in e["line"])
    assert our_ids == [0, 1, 2]


async def test_a_non_json_line_is_answered_minus_32700_with_null_id(peer: Any) -> None:
    files = Files()
    with capture_logs() as logs:
        run = await peer(
            [
                {"write": "Debugger attached. token=SECRET-TOKEN-123 is not JSON\n"},
                {"write_hex": "fffe7b7d0a"},  # invalid UTF-8, then a newline
                {"write": "\n   \n"},  # blank lines are skipped, not answered
                read_file(1, "/still-served"),
                {"read": {"responses": 3}},
            ],
            files.table(),
        )
    parse_errors = [r for r in run.responses if r.get("id") is None]
    assert [r["error"]["code"] for r in parse_errors] == [-32700, -32700]
    assert "not UTF-8" in parse_errors[1]["error"]["message"]
    assert run.answer(1)["result"] == {"content": "contents of /still-served"}
    malformed = events(logs, "agent.malformed_line")
    assert [m["reason"] for m in malformed] == ["not JSON", "not UTF-8"]
    assert "SECRET" not in repr(logs), "a log line showed more than a short prefix"


async def test_a_batch_is_answered_minus_32600(peer: Any) -> None:
    files = Files()
    batch = [read_file(1, "/a")["send"], read_file(2, "/b")["send"]]
    run = await peer(
        [{"send": batch}, {"send": 42}, {"send": {"jsonrpc": RPC}}, {"read": {"responses": 3}}],
        files.table(),
    )
    assert [(r["id"], r["error"]["code"]) for r in run.responses] == [(None, -32600)] * 3
    assert run.responses[0]["error"]["message"] == "JSON-RPC batches are not supported"
    assert files.calls == [], "a request inside a batch was executed"


async def test_an_unknown_method_is_minus_32601_and_unknown_underscore_notifications_are_ignored(
    peer: Any,
) -> None:
    files = Files()
    update = {"sessionId": "s1", "update": {"sessionUpdate": "plan", "entries": []}}
    run = await peer(
        [
            request(1, "no/such_method", {}),
            request(2, "_zed.dev/workspace/buffers", {}),
            notification("_zed.dev/ping", {}),
            notification("no/such_notification", {}),
            notification("session/update", update),
            read_file(3, "/a"),
            {"read": {"responses": 3}},
        ],
        files.table(),
    )
    assert run.answer(1)["error"]["code"] == -32601
    assert "no/such_method" in run.answer(1)["error"]["message"]
    assert run.answer(2)["error"]["code"] == -32601
    assert run.answer(3)["result"] == {"content": "contents of /a"}
    # A reply to a notification would be queued before the answer to 3, so it would show here.
    assert sorted(r["id"] for r in run.responses) == [1, 2, 3], "a notification was answered"
    assert run.notifications == [("session/update", update)]


async def test_invalid_params_name_the_field(peer: Any) -> None:
    granted: list[Any] = []

    async def permission(params: RequestPermissionRequest) -> RequestPermissionResponse:
        granted.append(params)
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id="yes"))

    files = Files()
    handlers = {
        **files.table(),
        "session/request_permission": (RequestPermissionRequest, permission),
    }
    no_call_id = {**PERMISSION, "toolCall": {"title": "Write f"}}
    run = await peer(
        [
            request(1, "fs/read_text_file", {"sessionId": "s1"}),
            request(2, "session/request_permission", no_call_id),
            request(3, "fs/read_text_file", [1, 2]),
            request(4, "session/request_permission", PERMISSION),
            {"read": {"responses": 4}},
        ],
        handlers,
    )
    missing_path = run.answer(1)["error"]
    assert missing_path["code"] == -32602
    assert missing_path["message"].startswith("Invalid params: path:")
    assert run.answer(2)["error"]["message"].startswith("Invalid params: toolCall.toolCallId:")
    assert run.answer(3)["error"]["message"].startswith("Invalid params: params:")
    assert run.answer(4)["result"] == {"outcome": {"outcome": "selected", "optionId": "yes"}}
    assert files.calls == [] and len(granted) == 1


async def test_a_response_to_an_unknown_id_is_dropped_and_serving_goes_on(peer: Any) -> None:
    files = Files()
    timed_out: list[RequestTimeout] = []

    async def body(connection: Any) -> None:
        with pytest.raises(RequestTimeout) as caught:
            await connection.request("slow/thing", {}, timeout=0.2)
        timed_out.append(caught.value)

    with capture_logs() as logs:
        run = await peer(
            [
                {"send": {"jsonrpc": RPC, "id": 99, "result": {}}},
                {"send": {"jsonrpc": RPC, "id": "abc", "error": {"code": -1, "message": "x"}}},
                {"read": {"requests": 1, "delay": 1.0}},  # answers after our timeout
                read_file(5, "/after"),
                {"read": {"responses": 1}},
            ],
            files.table(),
            body=body,
        )
    assert "slow/thing" in str(timed_out[0])
    unknown = events(logs, "agent.unknown_response")
    assert [u["id"] for u in unknown] == ["99", "'abc'", "0"]
    assert unknown[1]["error_code"] == -1
    assert run.answer(5)["result"] == {"content": "contents of /after"}


async def test_a_peer_that_never_reads_stdin_does_not_deadlock_the_governor(peer: Any) -> None:
    files = Files()
    flood = 3000
    done = trio.Event()
    seen: list[int] = []

    def on_update(method: str, params: Any) -> None:
        seen.append(params["seq"])
        if params["seq"] == -1:
            done.set()

    async def body(connection: Any) -> None:
        await done.wait()  # the reader got past the whole flood
        with pytest.raises(RequestTimeout):
            await connection.request("test/ping", {}, timeout=0.5)

    steps = [read_file(i, f"/f{i}") for i in range(flood)]
    steps += [notification("session/update", {"seq": i}) for i in range(100)]
    steps += [notification("session/update", {"seq": -1}), {"sleep": 60}]
    with capture_logs() as logs:
        await peer(
            steps,
            files.table(),
            body=body,
            on_notification=on_update,
            kill=True,
            max_in_flight=32,
            write_buffer=8,
        )
    assert seen == [*range(100), -1]
    assert events(logs, "agent.too_many_requests"), "the flood never hit the in-flight limit"
    assert events(logs, "agent.not_reading")
    assert len(files.calls) < flood, "every request got a task: memory is not bounded"


async def test_an_answer_made_at_once_that_the_pipe_takes_in_part_arrives_whole_and_first(
    peer: Any,
) -> None:
    big = "y" * (4 << 20)  # far beyond a pipe buffer: the first write is partial

    def read(params: ReadTextFileRequest) -> ReadTextFileResponse:  # answers at once
        return ReadTextFileResponse(content=big if params.path == "/big" else "small")

    run = await peer(
        [read_file(1, "/big"), read_file(2, "/small"), read_file(3, "/small"),
         {"read": {"responses": 3}}],
        {"fs/read_text_file": (ReadTextFileRequest, read)},
    )
    assert [r["id"] for r in run.responses] == [1, 2, 3]
    assert run.answer(1)["result"]["content"] == big
    assert run.answer(3)["result"]["content"] == "small"


async def test_a_chatty_stderr_never_blocks_and_its_tail_is_kept(peer: Any) -> None:
    run = await peer(
        [
            {"stderr": "noise " * 10, "repeat": 50_000},  # 3 MB: far beyond a pipe buffer
            {"stderr": "é" * 10_000},
            {"stderr": "last words"},
            notification("session/update", {"done": True}),
        ],
        stderr_lines=20,
        stderr_line_chars=2000,
    )
    assert run.notifications == [("session/update", {"done": True})]
    assert run.connection is not None
    tail = run.connection.stderr_tail
    assert len(tail) == 20
    assert tail[-1] == "last words"
    assert tail[-2] == "é" * 2000
    assert tail[0] == ("noise " * 10)


@pytest.mark.parametrize("style", ["sync", "async"])
async def test_notifications_are_delivered_in_order_while_requests_run_concurrently(
    peer: Any, style: str
) -> None:
    count = 300
    seqs: list[int] = []
    all_seen = trio.Event()
    rng = random.Random(7)

    def record(params: Any) -> None:
        seqs.append(params["seq"])
        if len(seqs) == count:
            all_seen.set()

    def sync_callback(method: str, params: Any) -> None:
        record(params)

    async def async_callback(method: str, params: Any) -> None:
        for _ in range(rng.randrange(3)):
            await trio.sleep(0)
        record(params)

    quick_answered = trio.Event()

    async def permission(params: RequestPermissionRequest) -> RequestPermissionResponse:
        # A slow decision: it waits for messages the agent sent after it, which
        # only arrive if reading goes on while this request is pending.
        await all_seen.wait()
        await quick_answered.wait()
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id="yes"))

    async def quick(params: ReadTextFileRequest) -> ReadTextFileResponse:
        quick_answered.set()
        return ReadTextFileResponse(content="quick")

    handlers = {
        "fs/read_text_file": (ReadTextFileRequest, quick),
        "session/request_permission": (RequestPermissionRequest, permission),
    }
    steps = [request("perm", "session/request_permission", PERMISSION)]
    steps += [notification("session/update", {"seq": i}) for i in range(count)]
    steps += [read_file(2, "/quick"), {"read": {"responses": 2}}]
    run = await peer(
        steps,
        handlers,
        on_notification=sync_callback if style == "sync" else async_callback,
    )
    assert seqs == list(range(count))
    assert run.answer(2)["result"] == {"content": "quick"}
    assert run.answer("perm")["result"]["outcome"]["optionId"] == "yes"


async def test_a_handler_that_raises_answers_minus_32603_and_serving_goes_on(peer: Any) -> None:
    files = Files()
    with capture_logs() as logs:
        run = await peer(
            [read_file(1, "/boom"), read_file(2, "/missing"), read_file(3, "/fine"),
             {"read": {"responses": 3}}],
            files.table(),
        )
    boom = run.answer(1)["error"]
    assert boom["code"] == -32603
    assert "SECRET" not in json.dumps(boom) and "Traceback" not in json.dumps(boom)
    assert run.answer(2)["error"] == {
        "code": -32002,
        "message": "Resource not found",
        "data": {"path": "/missing"},
    }
    assert run.answer(3)["result"] == {"content": "contents of /fine"}
    assert events(logs, "handler.failed")[0]["method"] == "fs/read_text_file"


async def test_an_error_answer_raises_remote_error_with_code_message_and_data(peer: Any) -> None:
    caught: list[RemoteError] = []
    error = {"code": -32000, "message": "Authentication required", "data": {"login": "x"}}

    async def body(connection: Any) -> None:
        with pytest.raises(RemoteError) as raised:
            await connection.request("session/new", {"cwd": "/w", "mcpServers": []})
        caught.append(raised.value)

    await peer([{"read": {"requests": 1, "error": error}}], body=body)
    (remote,) = caught
    assert (remote.code, remote.message, remote.data) == (-32000, "Authentication required", {"login": "x"})
    assert "session/new" in str(remote)


async def test_a_request_fails_with_connection_closed_when_the_agent_exits_first(
    peer: Any,
) -> None:
    outcomes: list[BaseException] = []

    async def body(connection: Any) -> None:
        for _ in range(2):
            with pytest.raises(ConnectionClosed) as raised:
                await connection.request("session/prompt", {"sessionId": "s1", "prompt": []})
            outcomes.append(raised.value)

    await peer([{"read": {"requests": 1, "answer": False}}], body=body)
    assert "session/prompt" in str(outcomes[0])
    assert "closed" in str(outcomes[1])


async def test_the_agent_can_withdraw_a_request_with_cancel_request(peer: Any) -> None:
    started = trio.Event()

    async def permission(params: RequestPermissionRequest) -> RequestPermissionResponse:
        started.set()
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    run = await peer(
        [
            request(9, "session/request_permission", PERMISSION),
            notification("$/cancel_request", {"requestId": 9}),
            {"read": {"responses": 1}},
        ],
        {"session/request_permission": (RequestPermissionRequest, permission)},
    )
    assert run.answer(9)["error"]["code"] == -32800


async def test_close_stdin_ends_the_agents_input_after_what_was_queued(peer: Any) -> None:
    async def body(connection: Any) -> None:
        await connection.notify("session/cancel", {"sessionId": "s1"})
        await connection.close_stdin()
        with pytest.raises(ConnectionClosed):
            await connection.notify("session/cancel", {"sessionId": "s1"})

    run = await peer([{"read_to_eof": True}], body=body)
    assert [entry["line"]["method"] for entry in run.read] == ["session/cancel"]


async def test_any_pair_of_trio_streams_carries_a_connection_as_well_as_a_process() -> None:
    from trio.testing import memory_stream_one_way_pair

    to_agent_send, to_agent_receive = memory_stream_one_way_pair()
    from_agent_send, from_agent_receive = memory_stream_one_way_pair()
    files = Files()
    updates: list[Any] = []
    connection = Connection(to_agent_send, from_agent_receive)

    async def agent() -> None:
        """Asks for a file, sends an update, answers our request, then hangs up."""
        await from_agent_send.send_all(
            b'{"jsonrpc":"2.0","id":"r1","method":"fs/read_text_file","params":{"sessionId":"s","path":"/p"}}\n'
            b'{"jsonrpc":"2.0","method":"session/update","params":{"n":1}}\n'
        )
        seen: list[Any] = []
        buffer = b""
        while len(seen) < 2:
            buffer += await to_agent_receive.receive_some()
            *lines, buffer = buffer.split(b"\n")
            seen += [json.loads(line) for line in lines]
        ours = next(m for m in seen if "method" in m)
        await from_agent_send.send_all(
            json.dumps({"jsonrpc": "2.0", "id": ours["id"], "result": {"ok": True}}).encode() + b"\n"
        )
        answer = next(m for m in seen if "method" not in m)
        assert answer == {"jsonrpc": "2.0", "id": "r1", "result": {"content": "contents of /p"}}
        await from_agent_send.aclose()

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            await nursery.start(
                connection.serve, files.table(), lambda method, params: updates.append(params)
            )
            nursery.start_soon(agent)
            assert await connection.request("session/new", {"cwd": "/w"}) == {"ok": True}
    assert updates == [{"n": 1}]
    assert connection.closed
    with pytest.raises(ConnectionClosed):
        await connection.request("session/new", {"cwd": "/w"})
