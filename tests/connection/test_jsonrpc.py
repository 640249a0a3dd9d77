"""The sans-IO core, driven with plain bytes (no I/O, no trio)."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governor.acp.jsonrpc import (
    ErrorResponse,
    Event,
    JsonRpc,
    Malformed,
    Notification,
    Request,
    Response,
    UnknownResponse,
)


def line(message: Any) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


def feed_all(rpc: JsonRpc, chunks: list[bytes]) -> list[Event]:
    events: list[Event] = []
    for chunk in chunks:
        events += rpc.feed(chunk)
    return events + rpc.feed_eof()


def test_requests_notifications_and_our_responses_become_events() -> None:
    rpc = JsonRpc()
    ours, sent = rpc.request("session/new", {"cwd": "/w"})
    assert json.loads(sent) == {"jsonrpc": "2.0", "id": 0, "method": "session/new", "params": {"cwd": "/w"}}
    stream = (
        line({"jsonrpc": "2.0", "id": 0, "method": "fs/read_text_file", "params": {"p": 1}})
        + line({"jsonrpc": "2.0", "method": "session/update", "params": {"u": 2}})
        + line({"jsonrpc": "2.0", "id": ours, "result": {"sessionId": "s"}})
    )
    assert rpc.feed(stream) == [
        Request(0, "fs/read_text_file", {"p": 1}),
        Notification("session/update", {"u": 2}),
        Response(0, {"sessionId": "s"}),
    ]
    assert rpc.pending == frozenset()


def test_a_notification_carrying_an_id_is_a_request() -> None:
    (event,) = JsonRpc().feed(line({"jsonrpc": "2.0", "id": None, "method": "x"}))
    assert event == Request(None, "x", None)


def test_an_answer_is_correlated_once_and_a_second_one_is_unknown() -> None:
    rpc = JsonRpc()
    id, _ = rpc.request("a", {})
    answer = line({"jsonrpc": "2.0", "id": id, "error": {"code": -32000, "message": "auth"}})
    assert rpc.feed(answer) == [ErrorResponse(id, -32000, "auth", None)]
    assert rpc.feed(answer) == [UnknownResponse(id, -32000)]


def test_a_forgotten_request_makes_its_late_answer_unknown() -> None:
    rpc = JsonRpc()
    id, _ = rpc.request("slow", {})
    rpc.forget(id)
    assert rpc.feed(line({"jsonrpc": "2.0", "id": id, "result": 1})) == [UnknownResponse(id)]


def test_a_string_or_boolean_id_never_matches_our_integer_ids() -> None:
    rpc = JsonRpc()
    rpc.request("a", {})
    rpc.request("b", {})
    assert rpc.feed(line({"id": "0", "result": 1}) + line({"id": True, "result": 1})) == [
        UnknownResponse("0"),
        UnknownResponse(True),
    ]
    assert rpc.pending == frozenset({0, 1})


def test_a_garbled_error_object_still_fails_the_request() -> None:
    rpc = JsonRpc()
    id, _ = rpc.request("a", {})
    (event,) = rpc.feed(line({"id": id, "error": "boom"}))
    assert isinstance(event, ErrorResponse) and event.code == -32603 and event.data == "boom"


def test_an_answer_without_result_is_a_null_result() -> None:
    rpc = JsonRpc()
    id, _ = rpc.request("a", {})
    assert rpc.feed(line({"jsonrpc": "2.0", "id": id})) == [Response(id, None)]


def test_bad_lines_get_the_right_error_replies_with_null_id() -> None:
    rpc = JsonRpc()
    events = rpc.feed(
        b"not json\n\xff\xfe\n[1]\n42\n{}\n{\"id\":{},\"method\":\"m\"}\n{\"method\":5,\"id\":1}\n"
    )
    replies = [json.loads(e.reply) for e in events if isinstance(e, Malformed) and e.reply]
    assert [(r["id"], r["error"]["code"]) for r in replies] == [
        (None, -32700),
        (None, -32700),
        (None, -32600),
        (None, -32600),
        (None, -32600),
        (None, -32600),
        (None, -32600),
    ]
    assert replies[2]["error"]["message"] == "JSON-RPC batches are not supported"


def test_an_id_no_answer_could_echo_is_refused_with_a_null_id() -> None:
    events = JsonRpc().feed(b'{"id":1e400,"method":"m"}\n{"id":NaN,"method":"m"}\n')
    assert [json.loads(e.reply)["id"] for e in events if isinstance(e, Malformed) and e.reply] == [
        None,
        None,
    ]


def test_a_malformed_event_shows_only_a_short_prefix() -> None:
    (event,) = JsonRpc().feed(b"console output: password=hunter2 and more\n")
    assert isinstance(event, Malformed)
    assert "hunter2" not in event.prefix and event.length == 41


def test_an_over_long_request_is_answered_with_its_id_and_the_limit() -> None:
    rpc = JsonRpc(max_line_bytes=100)
    head = b'{"jsonrpc":"2.0","id":"req-1","method":"fs/write_text_file","params":{"content":"'
    chunks = [head, b"x" * 300, b"x" * 300, b'"}}\n', line({"method": "after"})]
    events = feed_all(rpc, chunks)
    assert rpc.buffered == 0
    too_long, after = events
    assert isinstance(too_long, Malformed)
    assert too_long.length == len(head) + 600 + 3
    assert "100-byte limit" in too_long.reason
    assert too_long.reply is not None
    reply = json.loads(too_long.reply)
    assert reply["id"] == "req-1" and "100-byte" in reply["error"]["message"]
    assert after == Notification("after", None)


def test_an_over_long_line_whose_id_cannot_be_seen_is_not_answered() -> None:
    rpc = JsonRpc(max_line_bytes=50)
    (event,) = rpc.feed(b'{"params":{"content":"' + b"x" * 100 + b'"},"id":3,"method":"m"}\n')
    assert isinstance(event, Malformed) and event.reply is None


def test_the_buffer_never_holds_more_than_the_limit() -> None:
    rpc = JsonRpc(max_line_bytes=1000)
    for _ in range(100):
        rpc.feed(b"y" * 999)
        assert rpc.buffered <= 1000


def test_an_unterminated_last_line_counts_at_eof() -> None:
    rpc = JsonRpc()
    assert rpc.feed(b'{"method":"bye"}') == []
    assert rpc.feed_eof() == [Notification("bye", None)]


def test_encoders_write_compact_utf8_lines_and_survive_lone_surrogates() -> None:
    rpc = JsonRpc()
    assert rpc.result(3, {"text": "héllo"}) == '{"jsonrpc":"2.0","id":3,"result":{"text":"héllo"}}\n'.encode()
    assert rpc.notify("session/cancel", {"sessionId": "s"}) == (
        b'{"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId":"s"}}\n'
    )
    assert json.loads(rpc.error("x", -32602, "bad", {"field": "path"})) == {
        "jsonrpc": "2.0",
        "id": "x",
        "error": {"code": -32602, "message": "bad", "data": {"field": "path"}},
    }
    surrogate = rpc.result(1, {"path": "/w/\udcff"})
    assert surrogate.count(b"\n") == 1 and b"\\udcff" in surrogate


# --- properties -----------------------------------------------------------------------

json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**40), 2**40), st.floats(), st.text(max_size=20)
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
ids = st.one_of(st.integers(0, 5), st.text(max_size=6), st.none(), st.floats(), st.booleans())
messages = st.one_of(
    st.builds(lambda i, m, p: {"jsonrpc": "2.0", "id": i, "method": m, "params": p}, ids, st.text(max_size=12), json_values),
    st.builds(lambda m, p: {"jsonrpc": "2.0", "method": m, "params": p}, st.text(max_size=12), json_values),
    st.builds(lambda i, r: {"jsonrpc": "2.0", "id": i, "result": r}, ids, json_values),
    st.builds(lambda i, c: {"jsonrpc": "2.0", "id": i, "error": {"code": c, "message": "m"}}, ids, st.integers(-33000, 0)),
    json_values,
)
raw_lines = st.one_of(
    messages.map(lambda m: json.dumps(m, ensure_ascii=False, separators=(",", ":")).encode()),
    st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")),
    st.integers(60, 200).map(lambda n: b'{"jsonrpc":"2.0","id":1,"method":"m","params":"' + b"z" * n + b'"}'),
)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@settings(max_examples=300, deadline=None)
@given(st.lists(raw_lines, max_size=12), st.lists(st.integers(0, 10_000), max_size=20), st.booleans())
def test_any_split_of_a_stream_yields_the_same_events(
    lines: list[bytes], cuts: list[int], terminated: bool
) -> None:
    data = b"\n".join(lines) + (b"\n" if terminated else b"")

    def fresh() -> JsonRpc:
        rpc = JsonRpc(max_line_bytes=64)
        for _ in range(3):
            rpc.request("ours", None)
        return rpc

    whole = feed_all(fresh(), [data])
    chunked = feed_all(fresh(), split(data, cuts))
    bytewise = feed_all(fresh(), [data[i : i + 1] for i in range(len(data))])
    assert chunked == whole
    assert bytewise == whole


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=200), max_size=10), st.integers(1, 300))
def test_arbitrary_bytes_never_raise_and_every_reply_is_one_json_line(
    chunks: list[bytes], limit: int
) -> None:
    rpc = JsonRpc(max_line_bytes=limit)
    for event in feed_all(rpc, chunks):
        assert isinstance(event, Request | Notification | Response | ErrorResponse | UnknownResponse | Malformed)
        if isinstance(event, Malformed) and event.reply is not None:
            assert event.reply.endswith(b"\n") and event.reply.count(b"\n") == 1
            assert json.loads(event.reply)["error"]["code"] in (-32700, -32600)
        assert rpc.buffered <= limit


@pytest.mark.parametrize(
    "value",
    ["NaN", "Infinity", "-Infinity", "1e400", '"\\ud800"', '"a\\udc00b"', "[" * 65 + "]" * 65],
    ids=["nan", "infinity", "minus-infinity", "beyond-a-double", "lone-high", "lone-low", "deep"],
)
def test_json_no_strict_reader_takes_is_answered_with_a_parse_error(value: str) -> None:
    line = f'{{"jsonrpc":"2.0","method":"session/update","params":{{"x":{value}}}}}\n'
    (event,) = JsonRpc().feed(line.encode())
    assert isinstance(event, Malformed) and event.reply is not None
    assert json.loads(event.reply)["error"]["code"] == -32700
    # the neighbour: the same message with an ordinary value, and nesting at the bound
    for ordinary in ['"ok"', "1e300", '"\\ud83d\\ude00"', "[" * 60 + "]" * 60]:
        fine = f'{{"jsonrpc":"2.0","method":"session/update","params":{{"x":{ordinary}}}}}\n'
        (event,) = JsonRpc().feed(fine.encode())
        assert isinstance(event, Notification), ordinary


strict_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)  # fmt: skip


@settings(max_examples=500, deadline=None)
@given(strict_values.map(lambda v: json.dumps(v, ensure_ascii=False, allow_nan=False)))
def test_whatever_the_wire_takes_a_strict_reader_reads_back_the_same(text: str) -> None:
    line = f'{{"jsonrpc":"2.0","method":"m","params":{{"x":{text}}}}}\n'.encode()
    (event,) = JsonRpc().feed(line)
    assert isinstance(event, Notification)  # strict JSON is always taken
    assert orjson.loads(orjson.dumps(event.params)) == event.params == {"x": json.loads(text)}
