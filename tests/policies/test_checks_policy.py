"""``[checks]`` in a policy: commands and a timeout, every bad value named."""

from __future__ import annotations

import pytest

from governor.policies.errors import ConfigError
from governor.policies.policy import CHECK_TIMEOUT, MAX_CHECKS, parse_policy


def test_checks_are_read_with_their_timeout_and_default_to_none() -> None:
    p = parse_policy('[checks]\ncommands = ["pytest -q", "ruff check"]\ntimeout = 30\n', "loop.toml")
    assert p.checks == ("pytest -q", "ruff check") and p.check_timeout == 30.0
    assert parse_policy("", "empty.toml").checks == ()
    assert parse_policy("", "empty.toml").check_timeout == CHECK_TIMEOUT


@pytest.mark.parametrize(
    ("text", "culprit"),
    [
        ('[checks]\ncommands = "pytest"\n', "loop.toml: checks.commands: expected an array"),
        ('[checks]\ncommands = ["  "]\n', "loop.toml: checks.commands: check 1 must be a non-empty"),
        ("[checks]\ntimeout = 0\n", "loop.toml: checks.timeout: expected a number of seconds"),
        ("[checks]\ntimeout = true\n", "loop.toml: checks.timeout"),
        ('[checks]\ncommand = ["pytest"]\n', "loop.toml: checks.command: unknown key; did you mean `commands`?"),
        (f"[checks]\ncommands = {['true'] * (MAX_CHECKS + 1)!r}\n".replace("'", '"'), "at most 64"),
    ],
)
def test_a_bad_checks_table_is_an_error_naming_file_and_key(text: str, culprit: str) -> None:
    with pytest.raises(ConfigError) as e:
        parse_policy(text, "loop.toml")
    assert culprit in str(e.value)
