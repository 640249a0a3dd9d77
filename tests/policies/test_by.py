"""`by` says what decided, set where the engine decides it (`governor.policies.by`)."""

from __future__ import annotations

import pytest

from governor.policies import by
from governor.policies.actions import (
    Action,
    Connect,
    ReadFile,
    RunCommand,
    ToolPermission,
    WriteFile,
)
from governor.policies.decide import decide
from governor.policies.policy import Policy, parse_policy

WS = "/ws"


def bound(text: str = "", capability: str = "edit-workspace", ceiling: tuple[str, ...] = ()) -> Policy:
    return parse_policy(f'capability = "{capability}"\n{text}', "job.toml").bind(
        WS, protected=ceiling
    )


JOB = bound(
    """
protected = ["specs/**"]
[sandbox]
frozen = ["tests/acceptance/**"]
[deny]
commands = ["rm *"]
[ask]
tools = ["fetch"]
[allow]
writes = ["tests/**"]
[network]
allow = ["pypi.org"]
deny = ["upload.pypi.org"]
""",
    ceiling=("ops/**",),
)
READ_ONLY = bound(capability="read-only")


@pytest.mark.parametrize(
    ("policy", "action", "expected", "rule"),
    [
        # the job's capability and its defaults
        (READ_ONLY, WriteFile("/ws/a.py"), by.CAPABILITY, "capability: read-only"),
        (JOB, WriteFile("/elsewhere/a.py"), by.CAPABILITY, "boundary: roots"),
        (JOB, ReadFile("/etc/hostname"), by.CAPABILITY, "boundary: roots"),
        (JOB, WriteFile("/ws/src/a.py"), by.CAPABILITY, "capability: edit-workspace"),
        (JOB, RunCommand("ls -l", WS), by.CAPABILITY, "capability: edit-workspace"),
        (JOB, ToolPermission("edit", "Edit", None), by.CAPABILITY, "kind: edit"),
        (JOB, Connect("example.com", 443), by.CAPABILITY, "network.default"),
        # a protected, hidden or frozen path, a special address
        (JOB, WriteFile("/ws/.git/hooks/pre-commit"), by.PROTECTED, "protected: .git/**"),
        (JOB, WriteFile("/ws/specs/a.md"), by.PROTECTED, "protected: specs/**"),
        (JOB, ReadFile("/ws/.env"), by.PROTECTED, "hidden: **/.env"),
        (JOB, WriteFile("/ws/tests/acceptance/t.py"), by.PROTECTED, "frozen: tests/acceptance/**"),
        (JOB, Connect("169.254.169.254", 80), by.PROTECTED, "network.special"),
        # a rule of the policy
        (JOB, RunCommand("rm -rf build", WS), by.RULE, "deny: rm *"),
        (JOB, WriteFile("/ws/tests/test_a.py"), by.RULE, "allow: tests/**"),
        (JOB, ToolPermission("fetch", "Fetch", None), by.RULE, "ask: tool fetch"),
        (JOB, Connect("pypi.org", 443, addresses=("151.101.0.223",)), by.RULE, "network.allow: pypi.org"),
        (JOB, Connect("upload.pypi.org", 443), by.RULE, "network.deny: upload.pypi.org"),
        # the operator's ceiling
        (JOB, WriteFile("/ws/ops/deploy.sh"), by.CEILING, "protected: ops/**"),
        # a request that cannot be carried out as asked
        (JOB, WriteFile("a.py"), by.PROTOCOL, "boundary: absolute paths"),
        (JOB, Connect("pypi.org", 0), by.PROTOCOL, "network.proxy"),
    ],
)
def test_each_decision_says_what_decided_it(
    policy: Policy, action: Action, expected: str, rule: str
) -> None:
    decision = decide(action, policy)
    assert (decision.by, decision.rule) == (expected, rule)
    assert decision.by in by.DECIDED


def test_a_compound_decision_takes_what_decided_its_strictest_part() -> None:
    decision = decide(RunCommand("ls && rm -rf x", WS), JOB)
    assert [p.by for p in decision.parts] == [by.CAPABILITY, by.RULE]
    assert (str(decision.verdict), decision.by) == ("deny", by.RULE)


def test_every_word_is_defined_and_the_old_ones_are_still_known() -> None:
    assert set(by.WORDS) == set(by.DECIDED) | set(by.OBSERVED) | set(by.SETUP)
    assert all(text.strip() for text in by.WORDS.values())
    assert {"policy", "ceiling", "sandbox"} <= set(by.LEGACY)
