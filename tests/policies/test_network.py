"""The network rules: host patterns, special hosts, the ceiling's allowed_hosts."""

from __future__ import annotations

import pytest

from governor.policies.actions import Connect
from governor.policies.ceiling import HostForbidden, RunRequest, check, parse_ceiling
from governor.policies.decide import decide
from governor.policies.errors import ConfigError
from governor.policies.network import NetworkRules, parse_pattern
from governor.policies.policy import parse_policy
from governor.policies.rules import Verdict

POLICY = parse_policy(
    'capability = "edit-workspace"\n[network]\n'
    'allow = ["pypi.org", "*.npmjs.org:443", "127.0.0.1:8080", "*.corp.example"]\n'
    'deny = ["upload.pypi.org"]\n',
    "job.toml",
).bind("/ws")


def verdict(host: str, port: int, **kw: object) -> Verdict:
    return decide(Connect(host, port, **kw), POLICY).verdict  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("host", "port", "expected"),
    [
        ("pypi.org", 443, Verdict.ALLOW),
        ("PyPI.org.", 80, Verdict.ALLOW),
        ("pypi.org", 22, Verdict.DENY),  # no port: the web's ports only
        ("registry.npmjs.org", 443, Verdict.ALLOW),
        ("npmjs.org", 443, Verdict.DENY),  # a wildcard is subdomains only
        ("registry.npmjs.org", 80, Verdict.DENY),
        ("upload.pypi.org", 443, Verdict.DENY),
        ("127.0.0.1", 8080, Verdict.ALLOW),
        ("127.0.0.1", 8081, Verdict.DENY),
        ("localhost", 8080, Verdict.DENY),
        ("::1", 8080, Verdict.DENY),
        ("::ffff:127.0.0.1", 8080, Verdict.ALLOW),  # the same IPv4 address, mapped
        ("169.254.169.254", 80, Verdict.DENY),
        ("fe80::1", 443, Verdict.DENY),
        ("10.0.0.5", 443, Verdict.DENY),
        ("metadata.google.internal", 80, Verdict.DENY),
        ("evil.example", 443, Verdict.DENY),
    ],
)
def test_a_connection_is_judged_by_host_and_port(host: str, port: int, expected: Verdict) -> None:
    assert verdict(host, port) is expected


def test_a_special_address_needs_a_rule_naming_it_exactly_even_behind_a_wildcard() -> None:
    assert verdict("db.corp.example", 443) is Verdict.ALLOW
    rebound = decide(Connect("db.corp.example", 443, addresses=("10.1.2.3",)), POLICY)
    assert rebound.verdict is Verdict.DENY and "10.1.2.3" in rebound.reason
    exact = decide(Connect("127.0.0.1", 8080, addresses=("127.0.0.1",)), POLICY)
    assert exact.allowed


def test_commands_get_nothing_with_network_off_and_the_agent_its_own_hosts() -> None:
    policy = parse_policy('capability = "edit-workspace"', "job.toml").bind("/ws")
    policy = type(policy)(
        capability=policy.capability,
        network_rules=NetworkRules().with_agent(["api.anthropic.com:443", "127.0.0.1:4000"]),
    ).bind("/ws")
    assert decide(Connect("api.anthropic.com", 443, origin="agent"), policy).allowed
    assert decide(Connect("127.0.0.1", 4000, origin="agent"), policy).allowed
    off = decide(Connect("api.anthropic.com", 443, origin="command"), policy)
    assert off.verdict is Verdict.DENY and off.rule == "network.off"


def test_a_refusal_names_the_flag_that_would_allow_it() -> None:
    refused = decide(Connect("example.com", 443, origin="agent"), POLICY)
    assert "--allow-host example.com:443" in refused.reason


def test_a_bad_host_pattern_is_an_error_naming_the_key() -> None:
    with pytest.raises(ConfigError, match=r"network\.allow"):
        parse_policy('[network]\nallow = ["http://x/"]', "job.toml")
    with pytest.raises(ConfigError, match=r"network\.allows: unknown key"):
        parse_policy('[network]\nallows = ["x"]', "job.toml")
    assert parse_pattern("[::1]:8080").host == "::1"


def test_the_ceiling_lists_every_host_a_job_names_beyond_its_allowed_hosts() -> None:
    ceiling = parse_ceiling('allowed_agents = ["demo"]\nallowed_hosts = ["*.npmjs.org:443", "pypi.org"]')
    request = RunRequest("demo", hosts=("registry.npmjs.org:443", "pypi.org:443", "evil.example", "10.0.0.1:5432"))
    found = check(request, ceiling)
    assert found == [
        HostForbidden("evil.example", ceiling.allowed_hosts or ()),
        HostForbidden("10.0.0.1:5432", ceiling.allowed_hosts or ()),
    ]
    assert "network access to evil.example is not permitted" in str(found[0])
    none = parse_ceiling('allowed_agents = ["demo"]')
    assert check(RunRequest("demo", hosts=("pypi.org",)), none) != RunRequest("demo", hosts=("pypi.org",))
    anything = parse_ceiling('allowed_agents = ["demo"]\nallowed_hosts = ["*"]')
    assert check(RunRequest("demo", hosts=("pypi.org",)), anything) == RunRequest("demo", hosts=("pypi.org",))


def test_every_address_a_name_resolves_to_is_judged_again_even_under_an_exact_rule() -> None:
    policy = parse_policy(
        'capability = "edit-workspace"\n[network]\n'
        'allow = ["api.example:443", "gw.example:8080", "10.0.0.7:8080", "localhost:3000"]\n'
        'deny = ["203.0.113.9"]\n',
        "job.toml",
    ).bind("/ws")

    def connect(host: str, port: int, *addresses: str) -> Verdict:
        return decide(Connect(host, port, addresses=addresses), policy).verdict

    assert connect("api.example", 443, "93.184.216.34") is Verdict.ALLOW
    assert connect("api.example", 443, "127.0.0.2") is Verdict.DENY  # a lying resolver
    assert connect("api.example", 443, "93.184.216.34", "169.254.169.254") is Verdict.DENY
    assert connect("api.example", 443, "203.0.113.9") is Verdict.DENY  # a denied address
    assert connect("gw.example", 8080, "10.0.0.7") is Verdict.ALLOW  # the address is named
    assert connect("gw.example", 8080, "10.0.0.8") is Verdict.DENY
    assert connect("localhost", 3000, "127.0.0.1", "::1") is Verdict.ALLOW  # naming it named them
    refused = decide(Connect("api.example", 443, addresses=("127.0.0.2",)), policy)
    assert "--allow-host 127.0.0.2:443" in refused.reason


def test_a_trailing_dot_is_the_same_host_for_the_rules() -> None:
    assert verdict("127.0.0.1.", 8080) is Verdict.ALLOW
    assert verdict("127.0.0.1.", 8081) is Verdict.DENY
