"""Before anything starts, `prepare` looks at the whole spec and names every problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from governor.job.spec import Agent, AttemptSpec, PlainProgram, RefusedBeforeStart, prepare


def problems(**fields: object) -> list[str]:
    with pytest.raises(RefusedBeforeStart) as e:
        prepare(AttemptSpec(prompt="x", **fields))  # type: ignore[arg-type]
    return e.value.problems


def test_every_problem_of_a_spec_is_reported_at_once(tmp_path: Path) -> None:
    found = problems(
        agent="no-such-agent",
        workspace=tmp_path / "missing",
        extra_dirs=[tmp_path / "gone"],
        capability="root",
        env=["GOVTEST_UNSET"],
        environ={"PATH": "/usr/bin"},
        policy=tmp_path / "no-policy.toml",
    )
    text = "\n".join(found)
    assert len(found) == 6, found
    assert "no-policy.toml: cannot read the policy" in text
    assert "unknown capability 'root'" in text
    assert "GOVTEST_UNSET" in text
    assert "the workspace does not exist" in text and "missing" in text
    assert "an extra directory does not exist" in text and "gone" in text
    assert "no agent `no-such-agent`" in text and "give --agent one of these presets" in text
    assert "refused by the ceiling" not in text  # no preset: nothing for the ceiling to allow


def test_an_unknown_preset_is_named_as_such_and_a_known_one_the_ceiling_refuses_as_such(
    tmp_path: Path,
) -> None:
    ceiling = tmp_path / "ceiling.toml"
    ceiling.write_text('allowed_agents = ["codex"]\n')
    unknown = problems(agent="nosuch", workspace=tmp_path, ceiling=ceiling)
    assert len(unknown) == 1 and unknown[0].startswith("no agent `nosuch` (claude, codex"), unknown
    known = problems(agent="demo", workspace=tmp_path, ceiling=ceiling)
    assert len(known) == 1 and "agent demo is not permitted" in known[0], known
    assert known[0].startswith(f"refused by the ceiling ({ceiling}")


def demo_spec(tmp_path: Path, **fields: object) -> AttemptSpec:
    """The demo preset in a workspace of its own, its log beside it."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    fields = {"prompt": "x", **fields}
    return AttemptSpec(agent="demo", workspace=ws, log=tmp_path / "a.jsonl", **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("timeout", [-5.0, 0.0, float("nan"), float("inf")])
def test_a_timeout_that_is_not_a_positive_number_of_seconds_is_refused(
    tmp_path: Path, timeout: float
) -> None:
    with pytest.raises(RefusedBeforeStart) as e:
        prepare(demo_spec(tmp_path, timeout=timeout))
    found = e.value.problems
    assert len(found) == 1 and "is not a number of seconds above 0" in found[0], found
    assert "--timeout" in found[0]
    assert prepare(demo_spec(tmp_path, timeout=0.5)).wall == 0.5


@pytest.mark.parametrize("prompt", ["", "   ", "\n\t \n"])
def test_a_prompt_of_nothing_but_whitespace_is_refused(tmp_path: Path, prompt: str) -> None:
    with pytest.raises(RefusedBeforeStart) as e:
        prepare(demo_spec(tmp_path, prompt=prompt))
    assert e.value.problems == ["the prompt is empty or only whitespace: give the agent a task"]
    assert prepare(demo_spec(tmp_path, prompt=" x ")).spec.prompt == " x "


def test_an_audit_log_under_a_file_or_at_a_directory_is_refused_naming_both(tmp_path: Path) -> None:
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    under = problems(agent="demo", workspace=tmp_path / "ws-gone", log=a_file / "deeper" / "log.jsonl")
    assert f"the audit log {a_file}/deeper/log.jsonl cannot be made: {a_file} is not a directory; give --log a path under a directory" in under
    assert any("the workspace does not exist" in p for p in under)  # with the others, at once
    (tmp_path / "ws").mkdir()
    at_dir = problems(agent="demo", workspace=tmp_path / "ws", log=tmp_path)
    assert at_dir == [f"the audit log {tmp_path} is a directory: give --log a file's path"]
    fine = prepare(AttemptSpec(prompt="x", agent="demo", workspace=tmp_path / "ws", log=tmp_path / "new" / "log.jsonl"))
    assert fine.log_path == tmp_path / "new" / "log.jsonl"


def test_an_agent_is_a_preset_or_a_program_never_both_nor_neither(tmp_path: Path) -> None:
    for fields in ({}, {"agent": "demo", "argv": ["my-agent"]}):
        assert any("say which agent" in p for p in problems(workspace=tmp_path, **fields))
    found = problems(workspace=tmp_path, agent="demo", kind="command")
    assert found == ["--kind command runs the program after --, not a preset ('demo')"]
    assert problems(workspace=tmp_path, argv=["no-such-program-here"]) == [
        "the agent command 'no-such-program-here' is not on PATH"
    ]


def test_what_runs_is_an_agent_or_a_command_once_prepared(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    log = tmp_path / "a.jsonl"
    demo = prepare(AttemptSpec(prompt="x", agent="demo", workspace=ws, log=log))
    assert isinstance(demo.executor, Agent) and demo.executor.id == "demo"
    assert demo.executor.preset is not None and demo.name == demo.executor.preset.name
    own = prepare(AttemptSpec(prompt="x", argv=["/bin/echo", "hi"], workspace=ws, log=log))
    assert own.executor == Agent("acp", ("/bin/echo", "hi")) and own.name == "echo"
    plain = prepare(
        AttemptSpec(prompt="x", argv=["/bin/cat"], kind="command", workspace=ws, log=log)
    )
    assert plain.executor == PlainProgram(("/bin/cat",)) and plain.executor.id == "command"


def test_a_variable_that_makes_the_agent_act_alone_is_refused_unless_mode_switches_are_allowed(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "copilot").write_text("#!/bin/sh\n")
    (bin_dir / "copilot").chmod(0o755)
    environ = {"PATH": str(bin_dir), "COPILOT_ALLOW_ALL": "true"}
    common = {"agent": "copilot", "workspace": ws, "log": tmp_path / "a.jsonl", "environ": environ}
    found = problems(env=["COPILOT_ALLOW_ALL"], **common)
    assert found == [
        "COPILOT_ALLOW_ALL would make copilot act without asking: not passed unless the policy "
        "sets allow_mode_switch"
    ]
    allowed = tmp_path / "p.toml"
    allowed.write_text('capability = "edit-workspace"\nallow_mode_switch = true\n')
    ok = prepare(AttemptSpec(prompt="x", env=["COPILOT_ALLOW_ALL"], policy=allowed, **common))  # type: ignore[arg-type]
    assert ok.env["COPILOT_ALLOW_ALL"] == "true"
    plain = prepare(AttemptSpec(prompt="x", **common))  # type: ignore[arg-type]
    assert "COPILOT_ALLOW_ALL" not in plain.env  # never passed unless declared


def test_the_timeout_and_the_policy_s_wall_agree_and_an_explicit_timeout_wins(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = tmp_path / "p.toml"
    policy.write_text('[limits]\nwall = 90\nmemory = "512M"\n')
    log = tmp_path / "a.jsonl"
    by_policy = prepare(AttemptSpec(prompt="x", agent="demo", workspace=ws, policy=policy, log=log))
    assert by_policy.wall == 90.0 and by_policy.spec.timeout == 90.0
    assert by_policy.policy.limits.memory == 512 << 20
    assert by_policy.policy.limits.processes == 1024  # the default fills the rest
    given = prepare(
        AttemptSpec(prompt="x", agent="demo", workspace=ws, policy=policy, timeout=30, log=log)
    )
    assert given.wall == 30.0 and given.policy.limits.wall == 30.0
    assert prepare(AttemptSpec(prompt="x", agent="demo", workspace=ws, log=log)).wall == 1800.0


def test_limits_over_the_ceiling_are_refused_with_every_other_problem(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    ceiling = tmp_path / "c.toml"
    ceiling.write_text('allowed_agents = ["demo"]\nmax_memory = "1G"\nmax_wall = 60\n')
    policy = tmp_path / "p.toml"
    policy.write_text('[limits]\nmemory = "4G"\n')
    found = problems(
        agent="demo", workspace=ws, policy=policy, ceiling=ceiling, timeout=600, env=["GOVTEST_NO"]
    )
    assert any("limits.memory = 4G exceeds the permitted maximum 1G" in p for p in found)
    assert any("limits.wall = 600 s exceeds the permitted maximum 60 s" in p for p in found)
    assert any("GOVTEST_NO" in p for p in found)


def test_the_relay_token_is_fresh_per_attempt_and_masked_like_every_secret(tmp_path: Path) -> None:
    first, second = prepare(demo_spec(tmp_path)), prepare(demo_spec(tmp_path))
    assert len(first.relay_token) >= 40 and first.relay_token != second.relay_token
    said = f"the shim said {first.relay_token} to the relay"
    assert first.relay_token not in first.masker.text(said)
    assert "the shim said" in first.masker.text(said)  # only the token is masked
