"""Permission options are chosen by kind and by effect, conservatively."""

from __future__ import annotations

import pytest

from governor.policies.options import Option, choose, mode_asks, stops_asking
from governor.policies.rules import Verdict

CLAUDE = [
    Option("allow_always", "Always Allow", "allow_always"),
    Option("allow", "Allow", "allow_once"),
    Option("reject", "Reject", "reject_once"),
]
EXIT_PLAN = [
    Option("bypassPermissions", "Yes, and bypass permissions", "allow_once"),
    Option("acceptEdits", "Yes, and auto-accept edits", "allow_once"),
    Option("default", "Yes, and manually approve edits", "allow_once"),
    Option("plan", "No, keep planning", "reject_once"),
]
CODEX = [
    Option("allow_permissions_session", "Allow for this session", "allow_once"),
    Option("allow_once", "Allow", "allow_once"),
    Option("reject_once", "Reject", "reject_once"),
]


def test_allow_picks_allow_once_and_never_allow_always() -> None:
    assert choose(CLAUDE, Verdict.ALLOW).option_id == "allow"


def test_deny_picks_reject_once() -> None:
    assert choose(CLAUDE, Verdict.DENY).option_id == "reject"


def test_an_option_that_stops_the_agent_asking_is_refused_even_when_its_kind_is_allow_once() -> (
    None
):
    assert choose(EXIT_PLAN, Verdict.ALLOW).option_id == "default"
    assert choose(CODEX, Verdict.ALLOW).option_id == "allow_once"


def test_a_mode_switch_is_chosen_only_when_the_policy_allows_it() -> None:
    only_switches = EXIT_PLAN[:2] + EXIT_PLAN[3:]
    assert choose(only_switches, Verdict.ALLOW).option_id is None
    assert (
        choose(only_switches, Verdict.ALLOW, allow_mode_switch=True).option_id
        == "bypassPermissions"
    )


def test_allow_always_is_never_chosen_even_when_mode_switches_are_allowed() -> None:
    only_always = [Option("a", "Always", "allow_always"), Option("r", "No", "reject_once")]
    assert choose(only_always, Verdict.ALLOW, allow_mode_switch=True).option_id is None


def test_nothing_fitting_is_cancelled() -> None:
    assert choose([], Verdict.ALLOW).option_id is None
    assert choose([Option("ok", "OK", "allow_once")], Verdict.DENY).option_id is None


def test_an_ask_that_was_refused_is_answered_like_a_deny() -> None:
    assert choose(CLAUDE, Verdict.ASK).option_id == "reject"


def test_effects_are_read_from_ids_and_names() -> None:
    assert stops_asking(Option("proceed_always_server", "Always allow this server", "allow_always"))
    assert stops_asking(Option("x", "Don't ask again this session", "allow_once"))
    assert not stops_asking(Option("proceed_once", "Allow once", "allow_once"))


def test_the_choice_caches_keep_no_long_text_an_agent_sends() -> None:
    """Options are agent text: short ones are chosen among once and kept, long ones
    (a flood of unique 100 KB names) are judged each time and never kept."""
    from governor.policies import options

    chosen_before = options._choose_offered_cached.cache_info().currsize
    judged_before = options._stops_asking_cached.cache_info().currsize
    for i in range(50):
        offered = ((f"allow-{i}", "A" * 100_000, "allow_once"), ("no", "No", "reject_once"))
        assert options.choose_offered(offered, Verdict.ALLOW, False).option_id == f"allow-{i}"
        assert options.stops_asking(Option(f"always-{i}", "x" * 100_000, "allow_once"))
    assert options._choose_offered_cached.cache_info().currsize == chosen_before
    assert options._stops_asking_cached.cache_info().currsize == judged_before

    short = (("ok", "Allow", "allow_once"), ("no", "Reject", "reject_once"))
    first = options.choose_offered(short, Verdict.DENY, False)
    hits = options._choose_offered_cached.cache_info().hits
    assert options.choose_offered(short, Verdict.DENY, False) == first
    assert first.option_id == "no"
    assert options._choose_offered_cached.cache_info().hits == hits + 1


class _Mode:
    def __init__(self, name: str, description: str | None = None) -> None:
        self.name = name
        self.description = description


@pytest.mark.parametrize(
    ("mode_id", "mode", "asks"),
    [
        ("default", None, True),
        ("ask", _Mode("Ask"), True),
        ("read-only", None, True),
        ("plan", _Mode("Plan", "Claude can analyze but not modify files"), True),
        ("custom", _Mode("Careful", "Requires approval for every edit"), True),
        ("bypassPermissions", _Mode("Bypass Permissions"), False),
        ("acceptEdits", None, False),
        ("yolo", None, False),
        ("auto", None, False),
        ("https://agentclientprotocol.com/protocol/session-modes#autopilot", None, False),
        ("agent", _Mode("Agent"), None),
        ("https://agentclientprotocol.com/protocol/session-modes#autopilot", _Mode("Autopilot"), False),
        ("x", _Mode("Skip permission prompts"), False),
        ("code", _Mode("Code"), None),
        (None, None, None),
    ],
)
def test_a_mode_asks_unless_its_id_or_name_says_it_acts_alone(
    mode_id: str | None, mode: object, asks: bool | None
) -> None:
    assert mode_asks(mode_id, mode) is asks


def test_a_mode_and_an_option_that_say_the_same_are_judged_the_same() -> None:
    for words in ["bypass permissions", "accept edits", "yolo", "don't ask again", "full access"]:
        assert mode_asks("m", _Mode(words)) is False, words
        assert stops_asking(Option("o", words, "allow_once")), words
