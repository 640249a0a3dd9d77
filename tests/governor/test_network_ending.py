"""An agent that cannot reach its API: the reason names the refused host and the flag."""

from __future__ import annotations

from governor.agents.presets import find
from governor.confine.egress import IN_A_ROW, ModelApiReach, agent_hosts, model_api_hosts
from governor.ending.how_it_ended import Ending, judge
from governor.sandbox.net.judge import ConnectionRequest


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


def test_the_model_api_ends_the_attempt_at_its_first_failure_or_at_three_in_a_row_after_it_answered() -> None:
    api = ConnectionRequest("gw.example", 443, origin="agent")
    reach = ModelApiReach.of(("gw.example:443",))
    assert reach.covers(api)
    assert not reach.covers(ConnectionRequest("gw.example", 443, origin="command"))
    assert not reach.covers(ConnectionRequest("other.example", 443, origin="agent"))
    why = reach.failed("gw.example:443", "the host does not resolve")
    assert why is not None and "at its first try" in why and "gw.example:443" in why
    answered = ModelApiReach.of(("gw.example:443",))
    answered.connected()
    assert answered.failed("gw.example:443", "the host refused the connection") is None
    assert answered.failed("gw.example:443", "the host refused the connection") is None
    why = answered.failed("gw.example:443", "the host refused the connection")
    assert why is not None and f"{IN_A_ROW} times in a row" in why
    answered.connected()  # a connection made starts the count again
    assert answered.failed("gw.example:443", "the host did not answer in time") is None


def test_the_model_api_is_the_base_urls_host_when_one_is_set_else_the_presets() -> None:
    claude = find("claude")
    assert model_api_hosts(claude, {}) == ("api.anthropic.com:443",)
    assert model_api_hosts(claude, {"ANTHROPIC_BASE_URL": "http://127.0.0.1:4000"}) == ("127.0.0.1:4000",)
    assert model_api_hosts(None, {}) == ()


def test_an_attempt_ended_for_its_unreachable_model_api_is_not_blamed_on_another_refused_host() -> None:
    why = "the model API gw.example:443 cannot be reached: the host does not resolve (at its first try)"
    ending = Ending(
        agent="Claude", preset="claude", run_id="r", elapsed_s=1, timeout_s=10, failure=why,
        network_refused=("raw.githubusercontent.com:443",),
        network_unreachable=("api.anthropic.com:443: the host does not resolve",),
    )  # fmt: skip
    outcome = judge(ending)
    assert outcome.status == "failed" and outcome.reason == why
