"""The relay's sans-IO wire (`governor.mcp.wire`): lines, shapes, the messages it writes."""

from __future__ import annotations

import json

import pytest

from governor.mcp import wire


def test_lines_are_split_across_chunks_and_bounded() -> None:
    lines = wire.Lines(limit=16)
    assert lines.feed(b'{"a":') == []
    assert lines.feed(b'1}\n\n{"b":2}\n{"c"') == [b'{"a":1}', b'{"b":2}']
    with pytest.raises(wire.LineTooLong):
        lines.feed(b"x" * 17)


@pytest.mark.parametrize(
    ("line", "shape"),
    [
        (b'{"jsonrpc":"2.0","id":1,"method":"tools/call"}', wire.Shape.REQUEST),
        (b'{"jsonrpc":"2.0","method":"notifications/x"}', wire.Shape.NOTIFICATION),
        (b'{"jsonrpc":"2.0","id":"a","result":{}}', wire.Shape.RESPONSE),
        (b'{"jsonrpc":"2.0","id":1,"result":{},"error":{}}', wire.Shape.INVALID),
        (b'{"jsonrpc":"2.0","id":{"x":1},"result":{}}', wire.Shape.INVALID),
        (b'{"jsonrpc":"2.0","id":true,"result":{}}', wire.Shape.INVALID),
        (b'{"jsonrpc":"1.0","id":1,"method":"x"}', wire.Shape.INVALID),
        (b"[1,2]", wire.Shape.INVALID),
        (b"\xff\xfe", wire.Shape.INVALID),
    ],
)
def test_a_line_is_read_as_exactly_one_shape(line: bytes, shape: wire.Shape) -> None:
    assert wire.read_message(line).shape is shape


def test_ids_one_and_string_one_are_two_ids() -> None:
    one = wire.read_message(b'{"jsonrpc":"2.0","id":1,"result":{}}')
    text = wire.read_message(b'{"jsonrpc":"2.0","id":"1","result":{}}')
    assert one.key != text.key


def test_a_governed_requests_params_are_validated_by_the_sdks_model() -> None:
    good = wire.read_message(
        b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1}}}'
    )
    assert wire.governed_params(good) == ("t", {"a": 1})
    bad = wire.read_message(b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":1}}')
    problem = wire.governed_params(bad)
    assert isinstance(problem, str) and problem.startswith("invalid params for tools/call")


def test_a_refused_tool_call_is_a_tool_result_the_model_reads_and_a_refused_read_an_error() -> None:
    tool = wire.refusal(7, "tools/call", "no")
    assert tool["result"]["isError"] is True
    assert tool["result"]["content"] == [{"type": "text", "text": "Refused by the governor: no"}]
    read = wire.refusal(8, "resources/read", "no")
    assert read["error"] == {"code": wire.REFUSED, "message": "Refused by the governor: no"}
    assert json.loads(wire.encode(read)) == read


def test_tools_list_loses_only_the_hidden_tools_and_initialize_its_server_asks() -> None:
    body = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [{"name": "a"}, {"name": "b"}], "x": 1}}
    assert wire.without_tools(body, {"b"})["result"] == {"tools": [{"name": "a"}], "x": 1}
    assert wire.tool_names(body["result"]) is None  # no inputSchema: not a tools/list result
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"capabilities": {"sampling": {}, "elicitation": {}, "roots": {}}}}  # fmt: skip
    assert wire.relayed_initialize(init, elicitation=False)["params"]["capabilities"] == {"roots": {}}
    asked = wire.relayed_initialize(init, elicitation=True)["params"]["capabilities"]
    assert asked == {"roots": {}, "elicitation": {}}
    bare = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
    assert wire.relayed_initialize(bare, elicitation=False)["params"]["capabilities"] == {"roots": {}}


def test_a_servers_form_is_the_gates_request_naming_the_server_and_no_acp_session() -> None:
    """A server cannot pass its form off as the agent's: the session and tool
    call it names are dropped, and the message says who asks."""
    from governor.gate import elicitation

    request = elicitation.from_server(
        "rogue", "ask-1",
        {"message": "Name it", "sessionId": "s1", "toolCallId": "t1", "requestedSchema": {"type": "object"}},
    )  # fmt: skip
    assert not isinstance(request, str)
    assert request.root.message == "the MCP server rogue asks: Name it"
    assert not hasattr(request.root, "session_id") and request.root.request_id == "ask-1"
    assert elicitation.subject_of(request.root) == {"message": "the MCP server rogue asks: Name it", "mode": "form"}
    assert elicitation.from_server("rogue", 1, {"message": 3}) == (
        "invalid params for elicitation/create: a message is required"
    )
    said = elicitation.from_server("rogue", 1, {"message": "x", "mode": "url"})
    assert isinstance(said, str) and said.startswith("invalid params for elicitation/create: ")
    assert "Create" not in said
