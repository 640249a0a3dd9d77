"""``[sandbox] frozen`` and ``held_out``: parsed strictly, and every governed
write to a frozen or held-out path refused, whatever the job's own allow rules
say; beside them, writes pass."""

from __future__ import annotations

import pytest

from governor.policies.actions import WriteFile
from governor.policies.decide import decide
from governor.policies.errors import ConfigError
from governor.policies.policy import MAX_FROZEN, parse_policy

LOOP = """\
capability = "edit-workspace"
[sandbox]
frozen = ["tests/acceptance/**", "spec/*.feature"]
[allow]
writes = ["tests/**"]
"""


def test_a_governed_write_to_a_frozen_path_is_refused_even_under_an_allow_rule() -> None:
    policy = parse_policy(LOOP, "loop.toml").bind("/ws")
    d = decide(WriteFile("/ws/tests/acceptance/test_spec.py"), policy)
    assert (str(d.verdict), d.rule, d.by) == ("deny", "frozen: tests/acceptance/**", "protected")
    assert "frozen for this attempt" in d.reason
    assert decide(WriteFile("/ws/spec/login.feature"), policy).rule == "frozen: spec/*.feature"


def test_a_write_beside_the_frozen_paths_is_decided_as_before() -> None:
    policy = parse_policy(LOOP, "loop.toml").bind("/ws")
    assert decide(WriteFile("/ws/tests/unit/test_x.py"), policy).rule == "allow: tests/**"
    assert decide(WriteFile("/ws/src/app.py"), policy).rule == "capability: edit-workspace"
    assert decide(WriteFile("/ws/spec/deep/login.feature"), policy).allowed


@pytest.mark.parametrize(
    ("glob", "says"),
    [
        ("/etc/**", "must be relative to the roots"),
        ("~/x", "must be relative to the roots"),
        ("tests/../../x", "must be relative to the roots"),
        ("", "must be relative to the roots"),
        ("**", "names a whole root"),
        ("./**", "names a whole root"),
    ],
)
@pytest.mark.parametrize("key", ["frozen", "held_out"])
def test_a_frozen_or_held_out_glob_outside_the_roots_or_naming_a_whole_root_is_refused(
    glob: str, says: str, key: str
) -> None:
    text = f'[sandbox]\n{key} = ["{glob}"]\n'
    with pytest.raises(ConfigError) as e:
        parse_policy(text, "loop.toml")
    assert "loop.toml" in str(e.value) and f"sandbox.{key}" in str(e.value) and says in str(e.value)


def test_a_governed_write_to_a_held_out_path_is_refused_even_under_an_allow_rule() -> None:
    text = LOOP.replace('frozen = ["tests/acceptance/**", "spec/*.feature"]', 'held_out = ["tests/hidden/**"]')
    policy = parse_policy(text, "loop.toml").bind("/ws")
    d = decide(WriteFile("/ws/tests/hidden/test_x.py"), policy)
    assert (str(d.verdict), d.rule, d.by) == ("deny", "held-out: tests/hidden/**", "protected")
    assert "held out for this attempt" in d.reason
    assert decide(WriteFile("/ws/tests/unit/test_x.py"), policy).rule == "allow: tests/**"


def test_too_many_frozen_globs_are_refused_with_the_bound() -> None:
    globs = ", ".join(f'"t/{i}/**"' for i in range(MAX_FROZEN + 1))
    with pytest.raises(ConfigError, match=f"at most {MAX_FROZEN}"):
        parse_policy(f"[sandbox]\nfrozen = [{globs}]\n", "loop.toml")


def test_a_frozen_value_that_is_not_a_list_of_strings_is_refused() -> None:
    with pytest.raises(ConfigError, match=r"sandbox\.frozen"):
        parse_policy('[sandbox]\nfrozen = "tests/**"\n', "loop.toml")
