"""A policy's ``[sandbox] git`` reaches the sandbox (``governor.confine.sandboxes``): commits
at edit-workspace by default, ``.git`` read-only as a whole with ``read-only``,
for the commands' profile and the agent's alike. Real bwrap, real git."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import trio

from governor.confine.sandboxes import agent_profile, command_profile
from governor.policies.policy import parse_policy
from governor.sandbox.run.runner import Command, run

IDENTITY = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
}  # fmt: skip
COMMIT = "echo x > x && git add x && git commit -q -m inside 2>&1; git log --format=%s"


@pytest.mark.parametrize(
    ("section", "commits"),
    [("", True), ('[sandbox]\ngit = "commit"\n', True), ('[sandbox]\ngit = "read-only"\n', False)],
    ids=["default", "commit", "read-only"],
)
def test_the_policys_git_switch_decides_whether_a_governed_command_can_commit(
    ws: Path, section: str, commits: bool
) -> None:
    policy = parse_policy(f'capability = "edit-workspace"\n{section}', "job.toml").bind(str(ws))
    profile = command_profile(policy)
    assert profile.git_read_only is not commits
    result = trio.run(
        lambda: run(Command.of(["sh", "-c", COMMIT]), profile.with_command(env=IDENTITY))
    )
    log = subprocess.run(["git", "log", "--format=%s"], cwd=ws, capture_output=True, text=True)
    assert (log.stdout == "inside\n") is commits, result.text
    if not commits:
        assert "Read-only file system" in result.text
    assert (ws / "x").exists()  # neighbour: the workspace is writable either way
    agent = agent_profile(["/bin/sh"], policy, None, {}, sandbox=True)
    assert agent.git_read_only is not commits
