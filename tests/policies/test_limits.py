"""`[limits]` in a policy, the ceiling's maxima, and the defaults between them."""

from __future__ import annotations

import pytest

from governor.policies.capability import Capability
from governor.policies.ceiling import LimitExceeded, RunRequest, check, parse_ceiling
from governor.policies.errors import ConfigError
from governor.policies.limits import DEFAULTS, Limits, parse_size, size_text
from governor.policies.policy import parse_policy


def test_a_policy_s_limits_are_parsed_with_sizes_in_binary_units() -> None:
    policy = parse_policy(
        '[limits]\nmemory = "512M"\nprocesses = 64\ntmp = "1.5G"\ncpu_seconds = 30\nwall = 90\n'
    )
    assert policy.limits == Limits(
        memory=512 << 20, processes=64, tmp=3 << 29, cpu_seconds=30, wall=90.0
    )


def test_a_policy_without_limits_says_nothing_and_gets_the_defaults() -> None:
    policy = parse_policy('capability = "read-only"\n')
    assert policy.limits == Limits()
    assert policy.limits.effective() == DEFAULTS


@pytest.mark.parametrize(
    ("body", "key", "words"),
    [
        ("memry = '1G'", "limits.memry", "did you mean `memory`"),
        ("memory = 512", "limits.memory", "below 1M"),
        ("memory = 'lots'", "limits.memory", "is not a size"),
        ("memory = true", "limits.memory", "boolean"),
        ("processes = 0", "limits.processes", "positive integer"),
        ("processes = '64'", "limits.processes", "positive integer"),
        ("cpu_seconds = 1.5", "limits.cpu_seconds", "positive integer"),
        ("wall = -1", "limits.wall", "positive number"),
        ("tmp = [1]", "limits.tmp", "a size"),
    ],
)
def test_a_bad_limit_is_an_error_naming_the_file_and_the_key(
    body: str, key: str, words: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_policy(f"[limits]\n{body}\n", "job.toml")
    assert caught.value.key == key
    assert caught.value.source == "job.toml"
    assert words in str(caught.value)


def test_limits_must_be_a_table() -> None:
    with pytest.raises(ConfigError, match="limits: expected a table"):
        parse_policy('limits = "4G"\n')


def test_sizes_read_and_render_the_way_a_policy_writes_them() -> None:
    assert parse_size("4G") == 4 << 30
    assert parse_size("512m") == 512 << 20
    assert parse_size("100MiB") == 100 << 20
    assert parse_size("512Mi") == parse_size("1.5GB") // 3 == 512 << 20  # one reader for every size
    assert parse_size("2048") == 2048
    with pytest.raises(ValueError, match="is not a size"):
        parse_size("512 megs")
    assert size_text(512 << 20) == "512M"
    assert size_text(3 << 29) == "1536M"
    assert size_text(1000) == "1000"


def test_a_request_over_the_ceiling_s_maxima_lists_every_violation_and_is_never_clamped() -> None:
    ceiling = parse_ceiling(
        'allowed_agents = ["demo"]\nmax_memory = "2G"\nmax_processes = 256\nmax_wall = 600\n'
    )
    asked = Limits(memory=4 << 30, processes=512, wall=3600.0, cpu_seconds=10)
    request = RunRequest("demo", Capability.READ_ONLY, limits=asked)
    verdict = check(request, ceiling)
    assert verdict == [
        LimitExceeded("memory", "4G", "2G"),
        LimitExceeded("processes", "512", "256"),
        LimitExceeded("wall", "3600 s", "600 s"),
    ]
    assert str(verdict[0]) == "limits.memory = 4G exceeds the permitted maximum 2G (max_memory)"


def test_a_request_within_the_maxima_passes_unchanged() -> None:
    ceiling = parse_ceiling('allowed_agents = ["demo"]\nmax_memory = "8G"\n')
    request = RunRequest("demo", limits=Limits(memory=1 << 30))
    assert check(request, ceiling) is request


def test_an_unset_limit_takes_the_default_lowered_to_the_maximum_not_a_refusal() -> None:
    ceiling = parse_ceiling('allowed_agents = ["demo"]\nmax_memory = "1G"\nmax_wall = 60\n')
    effective = Limits(processes=64).effective(ceiling.max_limits)
    assert effective.memory == 1 << 30
    assert effective.wall == 60.0
    assert effective.processes == 64
    assert effective.tmp == DEFAULTS.tmp


def test_a_ceiling_s_maxima_are_strict_like_every_key() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_ceiling('max_memroy = "1G"\n', "ceiling.toml")
    assert "did you mean `max_memory`" in str(caught.value)
    with pytest.raises(ConfigError, match="max_processes: expected a positive integer"):
        parse_ceiling("max_processes = 0\n")


def test_the_log_and_workspace_bounds_are_sizes_bounded_by_the_ceiling_like_the_others() -> None:
    policy = parse_policy('[limits]\nlog = "64M"\nworkspace = "2G"\n')
    assert (policy.limits.log, policy.limits.workspace) == (64 << 20, 2 << 30)
    ceiling = parse_ceiling(
        'allowed_agents = ["demo"]\nmax_log = "16M"\nmax_workspace = "1G"\n', "ceiling.toml"
    )
    request = RunRequest("demo", Capability.EDIT_WORKSPACE, limits=policy.limits)
    violations = check(request, ceiling)
    assert isinstance(violations, list)
    shown = [str(v) for v in violations]
    assert any("limits.log = 64M" in v and "16M" in v for v in shown), shown
    assert any("limits.workspace = 2G" in v and "1G" in v for v in shown), shown
    unset = Limits().effective(ceiling.max_limits)
    assert (unset.log, unset.workspace) == (16 << 20, 1 << 30)  # lowered, not refused
    with pytest.raises(ConfigError, match=r"limits\.log.*below 1M"):
        parse_policy("[limits]\nlog = 4096\n")


def test_the_budgets_are_parsed_and_bounded_by_the_ceiling_like_the_other_limits() -> None:
    policy = parse_policy("[limits]\ntool_calls = 40\ntokens = 200000\ncost_usd = 2.5\n")
    assert (policy.limits.tool_calls, policy.limits.tokens, policy.limits.cost_usd) == (
        40,
        200_000,
        2.5,
    )
    ceiling = parse_ceiling(
        'allowed_agents = ["demo"]\nmax_tool_calls = 20\nmax_tokens = 100000\nmax_cost_usd = 1\n',
        "ceiling.toml",
    )
    verdict = check(RunRequest("demo", limits=policy.limits), ceiling)
    assert verdict == [
        LimitExceeded("tool_calls", "40", "20"),
        LimitExceeded("tokens", "200000", "100000"),
        LimitExceeded("cost_usd", "2.5 USD", "1 USD"),
    ]
    assert str(verdict[2]) == (
        "limits.cost_usd = 2.5 USD exceeds the permitted maximum 1 USD (max_cost_usd)"
    )
    # Unset: no budget by default, the ceiling's maximum where it has one.
    assert (DEFAULTS.tool_calls, DEFAULTS.tokens, DEFAULTS.cost_usd) == (None, None, None)
    unset = Limits().effective(ceiling.max_limits)
    assert (unset.tool_calls, unset.tokens, unset.cost_usd) == (20, 100_000, 1.0)
    assert Limits(tokens=50).effective(ceiling.max_limits).tokens == 50


@pytest.mark.parametrize(
    ("body", "words"),
    [
        ("tool_calls = 0", "positive integer"),
        ("tool_calls = 2.5", "positive integer"),
        ("tokens = '1M'", "positive integer"),
        ("cost_usd = 0", "positive number of US dollars"),
        ("cost_usd = -1", "positive number of US dollars"),
        ("cost_usd = 'five'", "positive number of US dollars"),
        ("cost_usd = nan", "positive number of US dollars"),
        ("cost_usd = true", "boolean"),
    ],
)
def test_a_bad_budget_is_an_error_naming_the_key(body: str, words: str) -> None:
    key = "limits." + body.split(" ")[0]
    with pytest.raises(ConfigError) as caught:
        parse_policy(f"[limits]\n{body}\n", "job.toml")
    assert caught.value.key == key and words in str(caught.value)
