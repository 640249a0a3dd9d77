"""An agent that cannot reach its API: the reason names the refused host and the flag."""

from __future__ import annotations

from governor.agents.presets import find
from governor.confine.egress import agent_hosts
from governor.ending.how_it_ended import Ending, judge


def test_a_failed_attempt_names_the_hosts_the_proxy_refused_the_agent() -> None:
    ending = Ending(
        agent="Claude", preset="claude", run_id="r", elapsed_s=1, timeout_s=10,
        error="Claude did not answer the prompt: API error (Connection error.)",
        network_refused=("api.anthropic.com:443",),
    )  # fmt: skip
    outcome = judge(ending)
    assert outcome.status == "failed"
    assert "the proxy refused Claude's connection to api.anthropic.com:443" in (outcome.reason or "")
    assert "--allow-host api.anthropic.com:443" in (outcome.reason or "")


def test_a_completed_attempt_is_not_blamed_on_a_refused_connection() -> None:
    ending = Ending(
        agent="Qwen", preset="qwen", run_id="r", elapsed_s=1, timeout_s=10,
        stop_reason="end_turn", final_message="Done.", network_refused=("rum.example:443",),
    )  # fmt: skip
    assert judge(ending).status == "completed"


def test_the_agent_may_reach_its_presets_hosts_and_its_base_url() -> None:
    claude = find("claude")
    hosts = agent_hosts(claude, {"ANTHROPIC_BASE_URL": "http://127.0.0.1:4000/v1"})
    assert hosts == ("api.anthropic.com:443", "127.0.0.1:4000")
    assert agent_hosts(claude, {"ANTHROPIC_BASE_URL": "https://gw.example"})[-1] == "gw.example:443"
    assert agent_hosts(None, {"OPENAI_BASE_URL": "http://[::1]:9/"}) == ("[::1]:9",)
