"""Each key the governor holds for an agent is bound to its own hosts, never
the union of its preset's (issue 37; the outside attack's hole in
`test_outside_attack5.py`): what the real presets bind, what a key with no
host of its own becomes, and how a preset's ``keys`` is checked.

The wire itself (the proxy refusing a placeholder sent to another key's host)
is shown with real sockets in `test_outside_attack5.py`; here the same real
presets and the governor's real choice of what the agent's sandbox holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from governor.agents.presets import DEFAULT_PATH, PresetError, load_presets, presets
from governor.confine.model_api import agent_env, held_credentials, notices
from governor.sandbox.net.credentials import Credentials, Leak

ANTHROPIC = "sk-ant-api03-" + "A" * 60
OPENAI = "sk-proj-" + "B" * 60
OPENROUTER = "sk-or-v1-" + "c" * 64


def test_each_key_of_a_preset_with_several_is_bound_to_its_own_api_and_gateway_only() -> None:
    env = {
        "ANTHROPIC_API_KEY": ANTHROPIC,
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:4000",
        "OPENAI_API_KEY": OPENAI,
        "OPENAI_BASE_URL": "https://gateway.example.com/v1",
    }
    held = held_credentials(presets()["opencode"], env, sandboxed=True)
    bound = {c.name: {(b.host, b.port, b.tls) for b in c.bindings} for c in held.held}
    assert bound == {
        "ANTHROPIC_API_KEY": {("api.anthropic.com", 443, True), ("127.0.0.1", 4000, False)},
        "OPENAI_API_KEY": {("api.openai.com", 443, True), ("gateway.example.com", 443, True)},
    }
    anthropic = next(c for c in held.held if c.name == "ANTHROPIC_API_KEY")
    assert not anthropic.bound("opencode.ai", 443)  # a host of the preset, no key's own
    assert not anthropic.bound("gateway.example.com", 443)


def test_a_key_with_no_host_of_its_own_is_not_given_to_the_agent_at_all_and_the_outcome_says_so() -> (
    None
):
    preset = presets()["opencode"]
    env = {"ANTHROPIC_API_KEY": ANTHROPIC, "OPENROUTER_API_KEY": OPENROUTER, "HOME": "/nonexistent"}
    held = held_credentials(preset, env, sandboxed=True)
    assert [c.name for c in held.held] == ["ANTHROPIC_API_KEY"]
    assert held.withheld == ("OPENROUTER_API_KEY",)
    given = agent_env(env, held, None)
    assert "OPENROUTER_API_KEY" not in given  # neither its placeholder nor its value
    assert given["ANTHROPIC_API_KEY"] == held.held[0].placeholder
    assert OPENROUTER not in str(given) and ANTHROPIC not in str(given)
    said = " ".join(notices(preset, env, held, sandboxed=True))
    assert "not given OPENROUTER_API_KEY" in said and "no host of its own" in said
    assert OPENROUTER not in said


def test_a_withheld_key_is_kept_from_the_agent_even_when_the_governor_holds_no_other() -> None:
    """Only a key with no host of its own was set: no proxy terminates
    anything, and still the agent does not get its real value."""
    env = {"OPENROUTER_API_KEY": OPENROUTER, "PATH": "/usr/bin"}
    held = held_credentials(presets()["kilo"], env, sandboxed=True)
    assert not held and held.withheld == ("OPENROUTER_API_KEY",)
    assert agent_env(env, held, None) == {"PATH": "/usr/bin"}


def test_a_key_given_to_an_agent_outside_the_sandbox_is_its_own_as_before() -> None:
    """The neighbour: unsandboxed, the agent holds every key itself (the
    outcome says so), nothing withheld."""
    env = {"OPENROUTER_API_KEY": OPENROUTER}
    held = held_credentials(presets()["opencode"], env, sandboxed=False)
    assert not held and held.withheld == ()
    assert agent_env(env, held, None) == env


def test_copilots_byok_key_goes_to_its_provider_only_and_its_github_token_never_there() -> None:
    env = {
        "GH_TOKEN": "ghp_" + "d" * 36,
        "COPILOT_PROVIDER_API_KEY": "sk-" + "e" * 40,
        "COPILOT_PROVIDER_BASE_URL": "http://127.0.0.1:8080/v1",
    }
    held = {c.name: c for c in held_credentials(presets()["copilot"], env, sandboxed=True).held}
    assert held["COPILOT_PROVIDER_API_KEY"].bound("127.0.0.1", 8080)
    assert not held["COPILOT_PROVIDER_API_KEY"].bound("api.githubcopilot.com", 443)
    assert not held["GH_TOKEN"].bound("127.0.0.1", 8080)
    assert held["GH_TOKEN"].bound("api.github.com", 443)


def test_a_preset_naming_one_key_alone_binds_it_to_its_own_hosts_without_a_keys_table() -> None:
    """An imported preset (`governor agents import`) with one credential
    variable: the preset's hosts can be no other key's."""
    (preset,) = load_presets(
        '[mine]\nname = "Mine"\nargv = ["mine"]\ninstall = "x"\nlogin = "x"\nhome = []\n'
        'env = ["MINE_API_KEY", "MINE_MODEL"]\napi_hosts = ["api.mine.example:443"]\n'
        'base_url_env = ["MINE_BASE_URL"]\n'
    ).values()
    held = held_credentials(preset, {"MINE_API_KEY": "mk-" + "f" * 30}, sandboxed=True)
    assert [c.name for c in held.held] == ["MINE_API_KEY"]
    assert held.held[0].bound("api.mine.example", 443)


def test_a_preset_naming_two_keys_without_a_keys_table_withholds_both() -> None:
    (preset,) = load_presets(
        '[two]\nname = "Two"\nargv = ["two"]\ninstall = "x"\nlogin = "x"\nhome = []\n'
        'env = ["ONE_API_KEY", "TWO_API_KEY"]\napi_hosts = ["one.example:443", "two.example:443"]\n'
    ).values()
    held = held_credentials(
        preset, {"ONE_API_KEY": "k1-" + "g" * 30, "TWO_API_KEY": "k2-" + "h" * 30}, sandboxed=True
    )
    assert not held and held.withheld == ("ONE_API_KEY", "TWO_API_KEY")


@pytest.mark.parametrize(
    ("keys", "said"),
    [
        ('keys.MINE_MODEL = { hosts = ["a.example:443"] }', "credential variable names"),
        ('keys.OTHER_API_KEY = { hosts = ["a.example:443"] }', "is not in `env`"),
        ('keys.MINE_API_KEY = { base_url = ["ELSE_URL"] }', "not in `base_url_env`"),
        (
            'keys.MINE_API_KEY = { hosts = ["a.example:443"], calls = { "b.example:443" = ["GET /"] } }',
            "hosts named in `hosts`",
        ),
        (
            'keys.MINE_API_KEY = { hosts = ["a.example:443"], calls = { "a.example:443" = ["get /x"] } }',
            "a path glob",
        ),
        ("keys.MINE_API_KEY = { }", "at least one of `hosts` and `base_url`"),
        (
            'keys.MINE_API_KEY = { hosts = ["a.example:443"], host = 1 }',
            "keys hosts, base_url, calls",
        ),
    ],
)
def test_a_presets_keys_table_that_cannot_bind_a_key_is_refused_naming_the_key(
    keys: str, said: str
) -> None:
    text = (
        '[mine]\nname = "Mine"\nargv = ["mine"]\ninstall = "x"\nlogin = "x"\nhome = []\n'
        'env = ["MINE_API_KEY", "MINE_MODEL"]\nbase_url_env = ["MINE_BASE_URL"]\n' + keys + "\n"
    )
    with pytest.raises(PresetError, match="mine") as caught:
        load_presets(text, source=str(Path("presets.toml")))
    assert said in str(caught.value), caught.value


def test_every_shipped_presets_credential_variable_has_hosts_of_its_own_or_is_named_withheld() -> (
    None
):
    """The shipped presets say, for each key, where it goes: the ones with no
    host of their own are the provider keys of providers whose hosts the
    preset does not reach (OpenRouter, Google for Goose)."""
    from governor.policies.config_values import is_credential

    withheld = {
        (p.id, n) for p in presets().values() if p.source == str(DEFAULT_PATH)
        for n in p.env if is_credential(n) and p.key_hosts(n) is None
    }  # fmt: skip
    assert withheld <= {
        ("opencode", "OPENROUTER_API_KEY"), ("kilo", "OPENROUTER_API_KEY"), ("goose", "GOOGLE_API_KEY"),
    }, withheld  # fmt: skip


def _github_token() -> tuple[Credentials, str]:
    """The real copilot preset's hold on ``GH_TOKEN``, and its placeholder."""
    held = held_credentials(presets()["copilot"], {"GH_TOKEN": "ghp_" + "T" * 36}, sandboxed=True)
    return held, held.held[0].placeholder


@pytest.mark.parametrize(
    ("method", "target"),
    [
        ("POST", "/user/keys"),
        ("DELETE", "/repos/o/r"),
        ("POST", "/copilot_internal/v2/token"),  # the method too
        ("GET", "/copilot_internal/../user/keys"),
        ("GET", "/copilot_internal/%2e%2e/user/keys"),
        ("GET", "/copilot_internal/x/..%2fuser"),
        ("GET", "//copilot_internal/v2/token"),
        ("GET", "/copilot_internal/./v2/token"),
        ("GET", "/user/keys"),
        ("GET", "/user/"),
    ],
)
def test_a_github_token_goes_into_no_call_on_api_github_com_but_those_copilot_makes(
    method: str, target: str
) -> None:
    held, placeholder = _github_token()
    fields = [(b"authorization", f"token {placeholder}".encode())]
    with pytest.raises(Leak, match="a call its agent does not make with it there"):
        held.swap(target.encode(), fields, "api.github.com", 443, tls=True, method=method)


@pytest.mark.parametrize(
    ("method", "target", "host"),
    [
        ("GET", "/copilot_internal/v2/token", "api.github.com"),
        ("GET", "/copilot_internal/user?x=1", "api.github.com"),
        ("GET", "/user", "api.github.com"),
        ("POST", "/chat/completions", "api.githubcopilot.com"),  # Copilot's own API: any call
        ("POST", "/mcp/x", "api.individual.githubcopilot.com"),
    ],
)
def test_a_github_token_goes_into_the_calls_copilot_makes_with_it(
    method: str, target: str, host: str
) -> None:
    held, placeholder = _github_token()
    fields = [(b"authorization", f"token {placeholder}".encode())]
    _, out, used = held.swap(target.encode(), fields, host, 443, tls=True, method=method)
    assert used == ("GH_TOKEN",) and out == [(b"authorization", b"token ghp_" + b"T" * 36)]


@pytest.mark.parametrize(
    ("method", "path", "kind"),
    [
        ("POST", "/v1/messages", True),
        ("POST", "/anthropic/v1/messages", True),  # a gateway's prefix
        ("POST", "/v1/chat/completions", True),
        ("POST", "/v1/responses", True),
        ("POST", "/v1beta/models/gemini-2.5-pro:streamGenerateContent", True),
        ("GET", "/v1/models", False),
        ("GET", "/v1/messages/batches/msgbatch_1/results", False),
        ("POST", "/v1/messages/count_tokens", False),
        ("POST", "/v1beta/models/gemini-2.5-pro:countTokens", False),
        ("POST", "/v1/messages/batches", None),
        ("POST", "/v1/batches", None),
        ("POST", "/v1/files", None),
        ("POST", "/v1/messages/batches/x/../../messages", None),  # read as another path there
        ("POST", "/v1/messages%2fbatches", None),
        ("DELETE", "/v1/messages", None),
    ],
)
def test_a_tokens_limit_knows_each_call_to_a_model_api_as_counted_free_or_unknown(
    method: str, path: str, kind: bool | None
) -> None:
    from governor.sandbox.net.model_calls import spending_call

    assert spending_call(method, path) is kind


def test_geminis_usage_is_read_from_its_json_its_event_stream_and_its_json_array() -> None:
    import json

    from governor.sandbox.net.model_calls import UsageReader

    one = {
        "usageMetadata": {
            "promptTokenCount": 70,
            "candidatesTokenCount": 30,
            "cachedContentTokenCount": 5,
        }
    }
    for content_type, body in [
        ("application/json", json.dumps(one).encode()),
        (
            "application/json",
            json.dumps([{"usageMetadata": {"promptTokenCount": 70}}, one]).encode(),
        ),
        ("text/event-stream", f"data: {json.dumps(one)}\r\n\r\n".encode()),
    ]:
        reader = UsageReader(content_type)
        reader.feed(body)
        assert reader.usage().tokens == {"input": 70, "output": 30, "cache_read": 5}, body
