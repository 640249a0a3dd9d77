"""The turn, sans-IO: fed ``session/update`` params as plain dicts, it keeps the
final message, the plan, the usage, the mode and what was malformed."""

from __future__ import annotations

from typing import Any

from governor.attempt.turn import Turn


def update(what: str, session: str = "s1", **fields: Any) -> dict[str, Any]:
    return {"sessionId": session, "update": {"sessionUpdate": what, **fields}}


def chunk(text: str, **fields: Any) -> dict[str, Any]:
    return update("agent_message_chunk", content={"type": "text", "text": text}, **fields)


def tool_call(call_id: str, status: str = "pending") -> dict[str, Any]:
    return update("tool_call", toolCallId=call_id, title="Run", kind="execute", status=status)


def test_the_final_message_is_what_follows_the_last_tool_call() -> None:
    seen: list[str] = []
    turn = Turn("Agent", on_tool_call=lambda u: seen.append(u.tool_call_id))
    for params in [chunk("Let me look. "), tool_call("c1"), chunk("Done "), chunk("now.")]:
        turn.feed(params)
    assert turn.final_message == "Done now."
    assert seen == ["c1"]


def test_a_new_message_id_starts_the_message_afresh_and_updates_of_a_tool_call_keep_it() -> None:
    turn = Turn("Agent")
    turn.feed(chunk("draft", messageId="m1"))
    turn.feed(chunk("final", messageId="m2"))
    turn.feed(update("tool_call_update", toolCallId="c0", status="completed"))
    assert turn.final_message == "final"


def test_the_plan_is_the_last_snapshot_and_is_announced_as_sent() -> None:
    events: list[tuple[str, dict[str, Any]]] = []
    turn = Turn("Agent", emit=lambda kind, info: events.append((kind, info)))
    first = [{"content": "read", "priority": "high", "status": "pending"}]
    second = [{"content": "read", "priority": "high", "status": "completed"}]
    turn.feed(update("plan", entries=first))
    turn.feed(update("plan", entries=second))
    assert turn.plan == second
    assert [info["entries"] for kind, info in events if kind == "plan"] == [first, second]


def test_usage_reports_fold_later_values_over_earlier_ones() -> None:
    turn = Turn("Agent")
    assert turn.usage is None
    turn.feed(update("usage_update", used=10, size=1000, cost={"amount": 0.5, "currency": "USD"}))
    turn.feed(update("usage_update", used=20, size=1000))
    assert turn.usage == {"used": 20, "size": 1000, "cost": {"amount": 0.5, "currency": "USD"}}


def test_a_mode_the_agent_switches_itself_into_is_noticed_once() -> None:
    turn = Turn("Agent")
    turn.mode = {"id": "default", "name": "Default", "asks": True}
    turn.feed(update("current_mode_update", currentModeId="bypassPermissions"))
    turn.feed(update("current_mode_update", currentModeId="bypassPermissions"))
    assert turn.mode == {"id": "bypassPermissions", "name": "bypassPermissions", "asks": False}
    assert turn.notices == [
        "Agent switched itself to mode bypassPermissions (the session was in mode default)"
    ]


def test_a_mode_reported_during_setup_is_the_governor_s_own_unless_it_acts_alone() -> None:
    """Updates during the session's setup are most often the governor's own
    switch reported back: no notice (it read as the agent switching itself);
    a mode in which the agent does not ask, reported while the governor set
    another, is noticed and kept."""
    asking = {"id": "default", "name": "Default", "asks": True}
    echoed = Turn("Agent")
    echoed.feed(update("current_mode_update", currentModeId="default"))
    echoed.settled(asking)
    assert echoed.notices == [] and echoed.mode == asking
    other = Turn("Agent")  # another asking mode reported on the way: the setup's word stands
    other.feed(update("current_mode_update", currentModeId="plan"))
    other.settled(asking)
    assert other.notices == [] and other.mode == asking
    alone = Turn("Agent")
    alone.feed(update("current_mode_update", currentModeId="bypassPermissions"))
    alone.settled(asking)
    assert alone.notices == [
        "Agent reported mode bypassPermissions, in which it does not ask, while the governor set mode default"
    ]
    assert alone.mode is not None and alone.mode["id"] == "bypassPermissions"


def test_malformed_updates_are_counted_and_the_turn_goes_on() -> None:
    turn = Turn("Agent")
    for bad in [
        None,
        {"update": 3},
        {"update": {"sessionUpdate": ["x"]}},
        update("agent_message_chunk", content={"type": "text"}),  # no text
        update("tool_call", toolCallId=7),
    ]:
        turn.feed(bad)
    turn.feed(update("agent_thought_chunk", content={"type": "text", "text": "hmm"}))
    turn.feed(chunk("still here"))
    assert turn.bad_updates == 5
    assert turn.final_message == "still here"


def test_updates_for_another_session_are_ignored_once_the_session_is_known() -> None:
    turn = Turn("Agent")
    turn.feed(chunk("before", session="other"))
    turn.session_id = "s1"
    turn.feed(chunk(" ignored", session="other"))
    turn.feed(chunk(" mine"))
    assert turn.final_message == "before mine"


def _select(option_id: str, current: str, values: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "id": option_id,
        "name": option_id,
        "type": "select",
        "currentValue": current,
        "options": [{"value": v, "name": v} for v in values],
        **extra,
    }


def test_a_config_option_the_agent_turns_to_acting_alone_is_noticed_and_its_mode_follows() -> None:
    turn = Turn("Agent")
    modes = ["default", "acceptEdits", "bypassPermissions"]
    first = [
        _select("mode", "default", modes, category="mode"),
        _select("allow_all", "off", ["on", "off"]),
    ]
    turn.feed(update("config_option_update", configOptions=first))
    assert turn.notices == [] and [o.id for o in turn.config_options] == ["mode", "allow_all"]
    later = [
        _select("mode", "bypassPermissions", modes, category="mode"),
        _select("allow_all", "on", ["on", "off"]),
    ]
    turn.feed(update("config_option_update", configOptions=later))
    assert turn.notices == [
        "Agent set its mode to bypassPermissions itself: it may act without asking",
        "Agent set its allow_all to on itself: it may act without asking",
    ]
    assert turn.mode == {"id": "bypassPermissions", "name": "bypassPermissions", "asks": False}


def test_the_session_title_is_kept_and_can_be_cleared() -> None:
    turn = Turn("Agent")
    turn.feed(update("session_info_update", title="Fix the tests"))
    assert turn.title == "Fix the tests"
    turn.feed(update("session_info_update", updatedAt="2026-12-01T00:00:00Z"))
    assert turn.title == "Fix the tests"  # an update without a title keeps it
    turn.feed(update("session_info_update", title=None))
    assert turn.title is None
