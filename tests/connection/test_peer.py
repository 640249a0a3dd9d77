"""The protocol rules of `governor.acp.peer.Peer`, driven with plain bytes: no trio, no pipes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from structlog.testing import capture_logs

from governor.acp.dispatch import as_result
from governor.acp.jsonrpc import ErrorResponse, Notification, Request, Response
from governor.acp.peer import Action, Cancel, Peer, Reply

RPC = "2.0"


def line(message: Any) -> bytes:
    return json.dumps(message).encode() + b"\n"


def req(id: Any, path: str = "/f") -> bytes:
    params = {"sessionId": "s1", "path": path}
    return line({"jsonrpc": RPC, "id": id, "method": "fs/read_text_file", "params": params})


def note(method: str, params: Any = None) -> bytes:
    return line({"jsonrpc": RPC, "method": method, "params": params or {}})


def cancel(id: Any) -> bytes:
    return note("$/cancel_request", {"requestId": id})


def result(id: int, value: Any) -> bytes:
    return line({"jsonrpc": RPC, "id": id, "result": value})


def replied(action: Action) -> dict[str, Any]:
    """The message a `Reply` sends."""
    assert type(action) is Reply, f"expected a reply, got {action!r}"
    return dict(json.loads(action.line))


def error_of(action: Action) -> dict[str, Any]:
    """The error object a `Reply` sends."""
    return dict(replied(action)["error"])


def ids(actions: list[Action]) -> list[Any]:
    return [a.id for a in actions if type(a) is Request]


def serve_at_once(peer: Peer, data: bytes) -> list[Action]:
    """Consume `peer.receive(data)` the way the connection does with handlers that
    answer at once: each request answered, queued and released before the next line."""
    actions: list[Action] = []
    for action in peer.receive(data):
        actions.append(action)
        if type(action) is Request:
            peer.answer(action, as_result({"content": "x"}))
            peer.done(action.id)
    return actions


# --- the agent's requests ---------------------------------------------------------------


def test_a_request_is_passed_on_and_answered_with_its_handlers_result() -> None:
    peer = Peer()
    (request,) = peer.receive(req(7))
    assert type(request) is Request and request.id == 7
    assert request.params == {"sessionId": "s1", "path": "/f"}
    answer = json.loads(peer.answer(request, as_result({"content": "x"})))
    assert answer == {"jsonrpc": RPC, "id": 7, "result": {"content": "x"}}


def test_a_request_whose_id_is_already_in_flight_is_refused_and_the_first_is_still_served() -> None:
    peer = Peer()
    (first,) = peer.receive(req(1))
    assert type(first) is Request
    (refused,) = peer.receive(req(1, "/again"))
    assert error_of(refused)["code"] == -32600
    assert "already in flight" in error_of(refused)["message"]
    assert replied(refused)["id"] == 1
    peer.answer(first, as_result({"content": "x"}))
    peer.done(1)
    assert ids(list(peer.receive(req(1, "/later")))) == [1], "a finished id is free again"


def test_a_request_answered_at_once_frees_its_id_before_the_next_line_of_the_chunk() -> None:
    peer = Peer()
    actions = serve_at_once(peer, req(1) + req(1) + req(1))
    assert ids(actions) == [1, 1, 1]


def test_beyond_max_in_flight_requests_are_refused_until_one_is_done() -> None:
    peer = Peer(max_in_flight=2)
    first, second, over = peer.receive(req(1) + req(2) + req(3))
    assert ids([first, second]) == [1, 2]
    assert error_of(over) == {
        "code": -32603,
        "message": "Too many requests in flight (the limit is 2)",
    }
    assert type(first) is Request
    peer.answer(first, as_result({}))  # made, but waiting for room: still in flight
    (still_over,) = peer.receive(req(4))
    assert error_of(still_over)["code"] == -32603
    peer.done(1)
    assert ids(list(peer.receive(req(5)))) == [5]


def test_cancel_request_of_a_request_in_flight_cancels_it_and_its_answer_is_minus_32800() -> None:
    peer = Peer()
    request, withdrawn = peer.receive(req("r9") + cancel("r9"))
    assert type(request) is Request
    assert withdrawn == Cancel("r9")
    answer = json.loads(peer.answer(request, None))
    assert answer["id"] == "r9"
    assert answer["error"] == {"code": -32800, "message": "Request cancelled"}


def test_cancel_request_of_an_unknown_or_already_answered_id_is_ignored() -> None:
    peer = Peer()
    (request,) = peer.receive(req(1))
    assert type(request) is Request
    peer.answer(request, as_result({}))  # answered, not yet queued: nothing left to stop
    with capture_logs() as logs:
        data = cancel(1) + cancel(99) + cancel([1]) + note("$/cancel_request")
        actions = list(peer.receive(data))
    assert actions == []
    assert [e["event"] for e in logs] == ["agent.cancel_unknown_request"] * 4


# --- our requests and then_refuse --------------------------------------------------------


def test_a_response_is_passed_on_only_for_a_request_of_ours_still_awaited() -> None:
    peer = Peer()
    first, _ = peer.request("session/new", {"cwd": "/w"})
    second, _ = peer.request("session/new", {"cwd": "/w"})
    peer.forget(second)  # timed out
    error = {"code": -32000, "message": "Authentication required"}
    data = result(first, {"ok": True}) + result(second, {}) + line(
        {"jsonrpc": RPC, "id": 99, "error": error}
    )
    with capture_logs() as logs:
        actions = list(peer.receive(data))
    assert actions == [Response(first, {"ok": True})]
    assert [(e["event"], e["id"]) for e in logs] == [
        ("agent.unknown_response", str(second)),
        ("agent.unknown_response", "99"),
    ]


def test_after_the_answer_to_a_then_refuse_request_is_read_later_requests_are_refused_in_wire_order() -> None:
    peer = Peer()
    prompt, _ = peer.request("session/prompt", {}, then_refuse=(-32000, "the turn is over"))
    other, _ = peer.request("session/new", {})
    chunk = req(1) + result(other, {}) + req(2) + result(prompt, {"stopReason": "end_turn"})
    chunk += req(3) + note("session/update", {"n": 1}) + req(4)
    before, answered_other, between, answered, after, update, later = serve_at_once(peer, chunk)
    assert ids([before, between]) == [1, 2], "requests before the answer are served"
    assert answered_other == Response(other, {})
    assert answered == Response(prompt, {"stopReason": "end_turn"})
    assert error_of(after) == {"code": -32000, "message": "the turn is over"}
    assert replied(after)["id"] == 3
    assert type(update) is Notification, "notifications still pass"
    assert error_of(later)["code"] == -32000
    (next_chunk,) = peer.receive(req(5))
    assert error_of(next_chunk)["message"] == "the turn is over"


def test_then_refuse_does_nothing_for_a_request_forgotten_before_its_answer() -> None:
    peer = Peer()
    prompt, _ = peer.request("session/prompt", {}, then_refuse=(-32000, "the turn is over"))
    peer.forget(prompt)
    assert ids(serve_at_once(peer, result(prompt, {}) + req(1))) == [1]


def test_an_error_answer_to_a_then_refuse_request_also_starts_the_refusals() -> None:
    peer = Peer()
    prompt, _ = peer.request("session/prompt", {}, then_refuse=(-32000, "the turn is over"))
    error = {"code": -32603, "message": "boom"}
    answered, after = peer.receive(line({"jsonrpc": RPC, "id": prompt, "error": error}) + req(1))
    assert answered == ErrorResponse(prompt, -32603, "boom")
    assert error_of(after)["code"] == -32000


# --- notifications -----------------------------------------------------------------------


def test_only_wanted_notifications_are_passed_on_in_order() -> None:
    peer = Peer(notifications={"session/update"})
    data = note("session/update", {"n": 1}) + note("_zed.dev/ping") + note("no/such")
    data += note("session/update", {"n": 2})
    with capture_logs() as logs:
        actions = list(peer.receive(data))
    assert actions == [
        Notification("session/update", {"n": 1}),
        Notification("session/update", {"n": 2}),
    ]
    assert [(e["event"], e["log_level"]) for e in logs] == [
        ("agent.extension_notification_ignored", "debug"),
        ("agent.unknown_notification", "warning"),
    ]
    peer.notifications = frozenset({"no/such"})
    assert list(peer.receive(note("no/such"))) == [Notification("no/such", {})]


# --- malformed lines and giving up -------------------------------------------------------


def test_a_malformed_line_is_answered_with_the_framings_reply_and_blank_lines_are_not() -> None:
    peer = Peer()
    actions = list(peer.receive(b"Debugger attached.\n\n  \n[1,2]\n"))
    assert [(replied(a)["id"], error_of(a)["code"]) for a in actions] == [
        (None, -32700),
        (None, -32600),
    ]


def test_the_peer_gives_up_after_give_up_after_malformed_lines_in_a_row_and_reads_no_further() -> None:
    peer = Peer(give_up_after=5)
    bad = b"not json\n"
    serve_at_once(peer, bad * 4 + note("session/update") + bad * 4)
    assert not peer.closed, "a usable message resets the run"
    actions = serve_at_once(peer, bad + b"\xff\n" + req(1))
    assert peer.closed
    assert peer.gave_up == "sent 5 lines in a row that are not JSON-RPC (9 not JSON)"
    assert [error_of(a)["code"] for a in actions] == [-32700], "the line after is not read"
    assert list(peer.receive(req(2))) == [], "nothing is read once the peer gave up"


def test_the_peer_gives_up_when_most_lines_are_malformed_even_if_never_enough_in_a_row() -> None:
    peer = Peer(give_up_after=20)
    pattern = b"not json\n" * 19 + req(1)  # 95 % bad, never 20 in a row
    for _ in range(10):
        serve_at_once(peer, pattern)
    assert not peer.closed, "190 malformed lines are not more than 10 x give_up_after"
    actions = serve_at_once(peer, pattern)
    assert ids(actions) == [1], "the share is judged once the chunk is read"
    assert peer.closed
    assert peer.gave_up == "sent 209 lines that are not JSON-RPC out of 220 (209 not JSON)"


def test_a_sloppy_peer_with_fewer_than_nine_malformed_lines_in_ten_is_never_given_up_on() -> None:
    peer = Peer(give_up_after=20)
    pattern = b"not json\n" * 8 + req(1)  # 89 % bad
    for _ in range(100):
        serve_at_once(peer, pattern)
    assert not peer.closed and peer.gave_up is None


def test_the_end_of_the_stream_closes_the_peer_and_a_last_unterminated_line_still_counts() -> None:
    peer = Peer()
    assert list(peer.receive(req(1).rstrip(b"\n"))) == []
    (request,) = peer.receive(b"")
    assert type(request) is Request and request.id == 1
    assert peer.closed and peer.gave_up is None


# --- the bytes waiting to be written -----------------------------------------------------


def test_an_answer_that_would_pass_max_unwritten_bytes_is_replaced_by_a_short_error() -> None:
    big = {"content": "x" * 200}
    peer = Peer(max_unwritten_bytes=100)  # less than one answer
    one, two, three = peer.receive(req(1) + req(2) + req(3))
    assert type(one) is Request and type(two) is Request and type(three) is Request
    first = peer.answer(one, as_result(big))
    assert json.loads(first)["result"] == big, "nothing else waits: a big answer is kept"
    with capture_logs() as logs:
        second = peer.answer(two, as_result(big))
    error = json.loads(second)["error"]
    assert error["code"] == -32603
    assert "not reading its answers" in error["message"]
    assert f"this answer of {len(first)} bytes was not kept" in error["message"]
    assert logs[0]["event"] == "agent.not_reading"
    assert logs[0]["unwritten_bytes"] == len(first)
    peer.written(len(first) + len(second))
    assert peer.unwritten == 0
    assert json.loads(peer.answer(three, as_result(big)))["result"] == big


def test_every_line_made_counts_as_unwritten_until_written_or_dropped() -> None:
    peer = Peer(max_in_flight=0)
    _, ours = peer.request("session/new", {})
    mine = peer.notify("session/cancel", {"sessionId": "s1"})
    (refusal,) = peer.receive(req(1))
    assert type(refusal) is Reply
    assert peer.unwritten == len(ours) + len(mine) + len(refusal.line)
    with capture_logs() as logs:
        peer.dropped(refusal.line)
    assert peer.unwritten == len(ours) + len(mine)
    assert logs == [
        {
            "event": "agent.not_reading",
            "log_level": "warning",
            "dropped_replies": 1,
            "unwritten_bytes": len(ours) + len(mine),
        }
    ]
    peer.written(len(ours) + len(mine))
    assert peer.unwritten == 0


def test_give_up_after_must_be_at_least_one() -> None:
    with pytest.raises(ValueError, match="give_up_after must be at least 1"):
        Peer(give_up_after=0)


def test_a_line_abandoned_before_it_was_queued_no_longer_counts_as_unwritten() -> None:
    peer = Peer(max_unwritten_bytes=100)
    _, ours = peer.request("session/prompt", {"prompt": []})
    peer.abandoned(ours)  # its sender timed out while it waited for room
    assert peer.unwritten == 0
    (request,) = peer.receive(req(1))
    assert type(request) is Request
    big = {"content": "x" * 200}
    assert json.loads(peer.answer(request, as_result(big)))["result"] == big, (
        "nothing waits, so a big answer is kept"
    )
