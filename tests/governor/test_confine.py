"""`governor.confine.sandboxes`: what a policy's ``[sandbox]`` table becomes in the
profiles of the commands and of the agent."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from governor.confine.sandboxes import agent_profile, command_profile
from governor.policies.policy import parse_policy


def test_the_sandbox_table_reaches_both_profiles(tmp_path: Path) -> None:
    policy = parse_policy(
        'capability = "edit-workspace"\n[sandbox]\nkeep = ["~/tools", "/opt/sdk"]\n'
        "toolchains = false\n",
        "job.toml",
    ).bind(str(tmp_path))
    expected = (Path(os.path.expanduser("~/tools")), Path("/opt/sdk"))
    command = command_profile(policy)
    assert (command.keep, command.toolchains) == (expected, False)
    assert command.path == os.environ.get("PATH") and command.env == {}
    given = command_profile(policy, {"HOME": str(tmp_path / "home"), "PATH": "/opt/bin:/usr/bin"})
    assert given.path == "/opt/bin:/usr/bin"  # the agent's, for a command it runs
    assert given.env == {"HOME": str(tmp_path / "home")}
    agent = agent_profile(
        [sys.executable], policy, None, {"PATH": "/usr/bin:/bin"}, sandbox=True
    )
    assert (agent.keep, agent.toolchains, agent.path) == (expected, False, "/usr/bin:/bin")


def test_by_default_toolchains_are_detected(tmp_path: Path) -> None:
    policy = parse_policy('capability = "read-only"\n', "job.toml").bind(str(tmp_path))
    assert command_profile(policy).toolchains is True
    assert command_profile(policy).keep == ()


def test_a_name_the_policy_unprotects_is_left_unpinned_in_both_profiles_unless_a_glob_covers_it(
    tmp_path: Path,
) -> None:
    import pytest

    from governor.sandbox.host.survey import survey
    from governor.sandbox.plan.profile import Profile, ProfileError

    policy = parse_policy(
        'capability = "edit-workspace"\nunprotect = [".pre-commit-config.yaml", "lefthook.yml"]\n',
        "job.toml",
    ).bind(str(tmp_path), protected=("lefthook.*",))  # the ceiling's glob
    command = command_profile(policy)
    agent = agent_profile([sys.executable], policy, None, {"PATH": "/usr/bin:/bin"}, sandbox=True)
    assert command.unprotected == agent.unprotected == (".pre-commit-config.yaml",)
    pins = survey(command).pins
    assert str(tmp_path / ".pre-commit-config.yaml") not in pins
    assert str(tmp_path / "lefthook.yml") in pins and str(tmp_path / "mise.toml") in pins
    with pytest.raises(ProfileError, match=r"'\.git' cannot be unprotected"):
        Profile(capability=command.capability, workspace=tmp_path, unprotected=(".git",))


def test_a_home_folder_a_variable_moves_is_bound_from_there_unless_it_would_open_a_root(
    tmp_path: Path,
) -> None:
    """OpenCode's folders moved by the XDG variables: its sandbox shows each
    place at its usual name (writable, the variable not given), and a place
    inside the workspace is refused: bound writable it would open a read-only
    workspace to the agent."""
    import pytest

    from governor.agents.presets import find
    from governor.confine.sandboxes import SandboxUnavailable

    policy = parse_policy('capability = "read-only"\n', "job.toml").bind(str(tmp_path / "ws"))
    home, data = tmp_path / "home", tmp_path / "data"
    env = {"HOME": str(home), "PATH": "/usr/bin:/bin", "XDG_DATA_HOME": str(data)}
    agent = agent_profile([sys.executable], policy, find("opencode"), env, sandbox=True)
    moved = {f.name: f.source for f in agent.home_folders if f.source}
    assert moved == {".local/share/opencode": str(data / "opencode")}
    assert "XDG_DATA_HOME" not in agent.env
    # not moved: the usual place, the variables the agent was given as they were
    plain = agent_profile([sys.executable], policy, find("opencode"), env | {"XDG_DATA_HOME": ""}, sandbox=True)
    assert all(f.source is None for f in plain.home_folders)
    env["XDG_DATA_HOME"] = str(tmp_path / "ws" / "data")
    with pytest.raises(SandboxUnavailable, match=r"inside .*ws"):
        agent_profile([sys.executable], policy, find("opencode"), env, sandbox=True)
