"""The model stand-in answers like the Messages API, picking its step from the history."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

from standin import StandIn, bash, write

TOOLS = [{"name": "Write"}, {"name": "mcp__acp__Write"}, {"name": "Bash"}]


def post(url: str, body: dict[str, Any]) -> tuple[str, bytes]:
    request = urllib.request.Request(
        url, json.dumps(body).encode(), {"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return response.headers["Content-Type"], response.read()


def sse(data: bytes) -> list[tuple[str, dict[str, Any]]]:
    """(event, data) pairs; every event's data names its own type."""
    out = []
    for chunk in data.decode().strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in chunk.splitlines())
        payload = json.loads(lines["data"])
        assert payload["type"] == lines["event"]
        out.append((lines["event"], payload))
    return out


def result(n: int) -> dict[str, Any]:
    return {"role": "user", "content": [{"type": "tool_result", "tool_use_id": f"t{n}"}]}


def test_a_streamed_tool_call_uses_the_first_offered_tool_and_its_input_reassembles() -> None:
    with StandIn([write("/w/a.txt", "hi\n")]) as model:
        kind, data = post(
            f"{model.url}/v1/messages?beta=true",
            {"stream": True, "tools": TOOLS, "messages": [{"role": "user", "content": "go"}]},
        )
    assert kind == "text/event-stream"
    events = sse(data)
    assert [e for e, _ in events] == [
        "message_start",
        "content_block_start",
        "content_block_delta",
        "content_block_stop",
        "message_delta",
        "message_stop",
    ]
    block = events[1][1]["content_block"]
    assert (block["type"], block["name"]) == ("tool_use", "mcp__acp__Write")
    assert json.loads(events[2][1]["delta"]["partial_json"]) == {
        "file_path": "/w/a.txt",
        "content": "hi\n",
    }
    assert events[4][1]["delta"]["stop_reason"] == "tool_use"
    assert model.tool_uses() == ["mcp__acp__Write"]


def test_the_step_is_the_number_of_tool_results_and_past_the_last_comes_the_final_text() -> None:
    steps = [write("/w/a.txt", "a"), bash("ls")]
    with StandIn(steps, final="All done.") as model:
        history: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
        answers = []
        for n in range(3):
            _, data = post(f"{model.url}/v1/messages", {"tools": TOOLS, "messages": history})
            answers.append(json.loads(data))
            history.append(result(n))
    assert [a["content"][0].get("name") for a in answers[:2]] == ["mcp__acp__Write", "Bash"]
    assert [a["stop_reason"] for a in answers] == ["tool_use", "tool_use", "end_turn"]
    assert answers[2]["content"] == [{"type": "text", "text": "All done."}]


def test_a_side_request_without_tools_and_a_token_count_get_valid_json() -> None:
    with StandIn([bash("ls")]) as model:
        _, side = post(f"{model.url}/v1/messages", {"messages": [{"role": "user", "content": "t"}]})
        _, count = post(f"{model.url}/v1/messages/count_tokens", {"messages": []})
    message = json.loads(side)
    assert (message["type"], message["stop_reason"]) == ("message", "end_turn")
    assert message["content"][0]["type"] == "text"
    assert json.loads(count)["input_tokens"] > 0
    assert [s.answer for s in model.served] == ["text", "count_tokens"]
