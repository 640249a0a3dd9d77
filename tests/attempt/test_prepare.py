"""Before anything starts, `prepare` looks at the whole spec and names every problem."""

from __future__ import annotations

from pathlib import Path

import pytest

from governor.spec import Agent, AttemptSpec, Command, RefusedBeforeStart, prepare


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
    assert len(found) == 7, found
    assert "no-policy.toml: cannot read the policy" in text
    assert "unknown capability 'root'" in text
    assert "GOVTEST_UNSET" in text
    assert "the workspace does not exist" in text and "missing" in text
    assert "an extra directory does not exist" in text and "gone" in text
    assert "no agent `no-such-agent`" in text
    assert "refused by the ceiling (built-in default): agent no-such-agent is not permitted" in text


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
    assert plain.executor == Command(("/bin/cat",)) and plain.executor.id == "command"


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
