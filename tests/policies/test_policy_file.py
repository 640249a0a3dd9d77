"""Policy files are strict: the file, the key and the accepted values are named."""

from __future__ import annotations

from pathlib import Path

import pytest

from governor.policies.capability import Capability
from governor.policies.errors import ConfigError
from governor.policies.policy import Policy, parse_policy

SHIPPED = sorted((Path(__file__).parents[2] / "policies").glob("*.toml"))


def test_the_default_policy_is_least_authority() -> None:
    p = Policy()
    assert (p.capability, p.network, p.env, p.on_ask, p.allow_mode_switch) == (
        Capability.READ_ONLY,
        False,
        (),
        "refuse",
        False,
    )


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_shipped_policy_parses(path: Path) -> None:
    policy = parse_policy(path.read_text(), str(path))
    assert policy.source == str(path)


def test_shipped_profiles_exist_for_each_common_job() -> None:
    assert {p.name for p in SHIPPED} >= {"read-only.toml", "edit-workspace.toml", "ci.toml"}


def test_every_key_is_read() -> None:
    p = parse_policy(
        """
capability = "edit-workspace"
extra_dirs = ["../lib"]
network = true
env = ["CI", "NODE_ENV"]
on_ask = "pause"
allow_mode_switch = true
protected = ["specs/**"]
hidden = ["secrets/**"]
[sandbox]
git = "read-only"
keep = ["~/tools", "/opt/sdk"]
toolchains = false
[deny]
commands = ["rm *"]
paths = ["private/**"]
[ask]
tools = ["fetch"]
[allow]
commands = ["git status"]
writes = ["build/**"]
""",
        "job.toml",
    )
    assert p.capability is Capability.EDIT_WORKSPACE
    assert p.extra_dirs == ("../lib",)
    assert p.network and p.allow_mode_switch
    assert p.env == ("CI", "NODE_ENV")
    assert p.on_ask == "pause"
    assert p.protected_extra == ("specs/**",)
    assert p.hidden_globs == ("secrets/**",)
    assert p.git == "read-only"
    assert [c.text for c in p.rules.deny.commands] == ["rm *"]
    assert p.rules.ask.tools == frozenset({"fetch"})
    assert p.rules.allow.writes.patterns == ("build/**",)
    assert p.keep == ("~/tools", "/opt/sdk")
    assert p.toolchains is False
    assert Policy().toolchains is True and Policy().keep == ()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('capabilty = "read-only"', "job.toml: capabilty: unknown key; did you mean `capability`?"),
        (
            'capability = "Read-Only"',
            "job.toml: capability: unknown capability 'Read-Only'; accepted: read-only, edit-workspace, full-access",
        ),
        ("capability = 2", "job.toml: capability: expected a string, got an integer"),
        ('network = "yes"', "job.toml: network: expected true or false, got a string"),
        (
            'on_ask = "ask"',
            "job.toml: on_ask: 'ask' is not accepted (accepted: refuse, pause, person)",
        ),
        ('env = ["API_KEY=sk-123"]', "job.toml: env: 'API_KEY=sk-123' is not a variable name"),
        (
            '[deny]\ncommand = ["rm *"]',
            "job.toml: deny.command: unknown key; did you mean `commands`?",
        ),
        (
            '[allow]\ntools = ["exec"]',
            "job.toml: allow.tools: 'exec' is not a tool kind; did you mean `execute`?",
        ),
        (
            '[ask]\ncommands = [""]',
            "job.toml: ask.commands: an empty command pattern matches nothing",
        ),
        ("deny = 3", "job.toml: deny: expected a table, got an integer"),
        (
            '[sandbox]\nkeeps = ["/opt"]',
            "job.toml: sandbox.keeps: unknown key; did you mean `keep`?",
        ),
        (
            '[sandbox]\nkeep = ["tools"]',
            "job.toml: sandbox.keep: 'tools' must be absolute or start with ~/",
        ),
        (
            '[sandbox]\ntoolchains = "no"',
            "job.toml: governor.sandbox.host.toolchains: expected true or false, got a string",
        ),
        ("[deny\n", "job.toml: line 1: deny: not valid TOML: Expected ']'"),
        (
            'capability = "read-only"\n[limits]\nwall = 60\nmemory = = 3\n',
            "job.toml: line 4: limits.memory: not valid TOML: Invalid value (column 10)",
        ),
        ('[network]\nallow = ["a.org" "b.org"]\n', "job.toml: line 2: network.allow: not valid TOML"),
        ('on_ask = "refuse"\n\nstray\n', "job.toml: line 3: not valid TOML: Expected '='"),
        ("env = [", "job.toml: line 1: env: not valid TOML: Invalid value at the end of the file"),
    ],
)
def test_a_bad_policy_is_an_error_naming_the_file_and_the_key(text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_policy(text, "job.toml")
    assert str(e.value).startswith(expected)


def test_binding_gives_absolute_roots_with_the_workspace_first() -> None:
    p = parse_policy('extra_dirs = ["../lib", "/opt/data"]', "job.toml").bind("/w/app/")
    assert p.roots == ("/w/app", "/w/lib", "/opt/data")
    assert p.workspace == "/w/app"


def test_a_relative_workspace_is_refused() -> None:
    with pytest.raises(ValueError, match="absolute"):
        Policy().bind("app")


def test_git_commits_by_default_and_the_sandbox_table_is_strict() -> None:
    assert Policy().git == "commit"
    assert parse_policy('capability = "edit-workspace"', "job.toml").git == "commit"
    with pytest.raises(ConfigError, match=r"sandbox\.git.*'never'.*accepted: commit, read-only"):
        parse_policy('[sandbox]\ngit = "never"', "job.toml")
    with pytest.raises(ConfigError, match=r"sandbox\.gti.*did you mean `git`"):
        parse_policy('[sandbox]\ngti = "read-only"', "job.toml")
    with pytest.raises(ConfigError, match=r"sandbox.*expected a table"):
        parse_policy('sandbox = "read-only"', "job.toml")
