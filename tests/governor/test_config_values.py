"""One mistake, one wording: a value of the wrong kind is told the same way in
every file an operator or a job writes -- a policy, a ceiling, the presets, a
batch's jobs file -- each naming its own file (or line) and key as before
(`governor.policies.config_values`). Three families of checkers used to say
"expected an array", "must be a list" and "must be ..." for one mistake."""

from __future__ import annotations

import pytest

from governor.agents.presets import PresetError, load_presets
from governor.batch.jobs import parse_job
from governor.policies.ceiling import parse_ceiling
from governor.policies.config_values import argv, one_of, text_list, type_name
from governor.policies.errors import ConfigError
from governor.policies.policy import parse_policy

PRESET = """
[mine]
name = "Mine"
argv = ["my-agent", "--acp"]
login = "my-agent login"
home = ["~/.mine"]
package = "@me/my-agent"
"""
JOB = {"id": "j", "prompt": "p", "repo": "/r", "agent": "demo"}


def _policy(text: str) -> str:
    with pytest.raises(ConfigError) as e:
        parse_policy(text, source="job.toml")
    return str(e.value)


def _ceiling(text: str) -> str:
    with pytest.raises(ConfigError) as e:
        parse_ceiling(text, source="ops.toml")
    return str(e.value)


def _preset(line: str) -> str:
    with pytest.raises(PresetError) as e:
        load_presets(PRESET + line + "\n", source="presets.toml")
    return str(e.value)


def _job(key: str, value: object) -> str:
    given = {k: v for k, v in JOB.items() if not (key == "argv" and k == "agent")}
    job, problems = parse_job({**given, key: value}, line=3)
    assert job is None and len(problems) == 1, problems
    return problems[0]


def test_a_string_where_true_or_false_is_wanted_is_told_alike_in_all_four_files() -> None:
    said = {
        "policy": _policy('network = "yes"\n'),
        "ceiling": _ceiling('allow_network = "yes"\n'),
        "preset": _preset('npx = "yes"'),
        "job": _job("sandbox_agent", "yes"),
    }
    assert said == {
        "policy": "job.toml: network: expected true or false, got a string",
        "ceiling": "ops.toml: allow_network: expected true or false, got a string",
        "preset": "presets.toml: [mine]: npx: expected true or false, got a string",
        "job": "line 3: key 'sandbox_agent': expected true or false, got a string",
    }


def test_a_string_where_an_array_is_wanted_is_an_array_in_every_file_never_a_list() -> None:
    said = [
        _ceiling('allowed_agents = "claude"\n'),
        _preset('env = "MY_KEY"'),
        _job("env", "MY_KEY"),
    ]
    assert said == [
        "ops.toml: allowed_agents: expected an array of strings, got a string",
        "presets.toml: [mine]: env: expected an array of non-empty strings, got a string",
        "line 3: key 'env': expected an array of non-empty strings, got a string",
    ]
    assert not any("list" in s or "must be" in s for s in said)


def test_a_program_is_told_alike_in_a_preset_and_a_job() -> None:
    assert _preset("alternatives = [[]]").endswith(
        "alternatives[0]: expected a non-empty array of non-empty strings (the program, then its "
        "arguments), got an empty array"
    )
    assert _job("argv", ["my-agent", ""]).endswith(
        "'argv': expected a non-empty array of non-empty strings (the program, then its "
        "arguments), got an array holding an empty string"
    )


def test_a_checker_names_the_file_and_the_key_and_says_what_the_value_is() -> None:
    with pytest.raises(ConfigError) as e:
        text_list("f.toml", "t.k", ["a", 3])
    assert (e.value.source, e.value.key) == ("f.toml", "t.k")
    assert str(e.value) == "f.toml: t.k: expected an array of non-empty strings, got an array holding an integer"
    assert argv("f.toml", "k", ["prog", "-x"]) == ("prog", "-x")  # the allowed neighbour
    with pytest.raises(ConfigError, match=r"expected one of pause, refuse, got 'pausee' \(did you mean pause\?\)"):
        one_of("pause", "refuse")("f.toml", "k", "pausee")
    assert [type_name(v) for v in (True, 1, 1.5, "", [], {}, None)] == [
        "a boolean", "an integer", "a number", "a string", "an array", "a table", "null",
    ]  # fmt: skip
