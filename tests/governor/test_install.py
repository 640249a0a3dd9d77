"""The governor's own install is never the agent's to change (`governor.confine.own_install`):
its folders inside a writable root are pinned read-only in the agent's and the
commands' profiles, and a root that is one of them is refused before start."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from governor.confine import own_install as install
from governor.confine.sandboxes import agent_profile, command_profile
from governor.job.spec import AttemptSpec, RefusedBeforeStart, prepare
from governor.policies.policy import parse_policy

EDIT = parse_policy('capability = "edit-workspace"', "edit.toml")


def _venv_in(monkeypatch: pytest.MonkeyPatch, ws: Path) -> Path:
    """The interpreter's prefix moved into ``ws``, as a project's ``.venv`` is."""
    venv = ws / ".venv"
    site = venv / "lib" / "python3" / "site-packages"
    site.mkdir(parents=True)
    monkeypatch.setattr(sys, "prefix", str(venv))
    monkeypatch.setattr(sys, "exec_prefix", str(venv))
    monkeypatch.setattr(sys, "path", [*sys.path, str(site)])
    return venv


def test_a_venv_in_the_workspace_is_pinned_in_the_agents_and_the_commands_profiles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    venv = _venv_in(monkeypatch, ws)
    policy = EDIT.bind(str(ws), None)
    assert install.read_only_in(policy.roots) == (venv,)  # its site-packages inside it: once
    agent = agent_profile([sys.executable], policy, None, {}, sandbox=True)
    assert agent.read_only == (venv,)
    assert command_profile(policy).read_only == (venv,)
    assert install.problems(policy.roots) == []  # pinned, not refused
    elsewhere = EDIT.bind(str(tmp_path / "other"), None)
    assert command_profile(elsewhere).read_only == ()  # the neighbour: nothing to pin


def test_a_root_that_is_the_install_is_refused_before_start_saying_where_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws = tmp_path / "ws"
    venv = _venv_in(monkeypatch, ws)
    site = venv / "lib" / "python3" / "site-packages"
    for root in (site, venv / "bin"):  # on sys.path; inside the prefix
        root.mkdir(parents=True, exist_ok=True)
        problems = install.problems([str(root)])
        assert len(problems) == 1 and str(root) in problems[0]
        assert "pipx" in problems[0] and "uv tool" in problems[0]
    spec = AttemptSpec(prompt="p", argv=[sys.executable], workspace=site, policy=EDIT, log=tmp_path / "a.jsonl")
    with pytest.raises(RefusedBeforeStart, match="the governor's own install"):
        prepare(spec)
    read_only = parse_policy('capability = "read-only"', "ro.toml")
    prepare(AttemptSpec(prompt="p", argv=[sys.executable], workspace=site, policy=read_only,
                        log=tmp_path / "a.jsonl"))  # fmt: skip  # read-only roots: nothing to change


def test_the_cli_exits_2_when_started_from_a_workspace_on_its_own_import_path(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = tmp_path / "edit.toml"
    policy.write_text('capability = "edit-workspace"\n')
    run = subprocess.run(
        [sys.executable, "-m", "governor.cli", "run", "--policy", str(policy), "--workspace", str(ws),
         "--log", str(tmp_path / "a.jsonl"), "hi", "--", sys.executable],
        cwd=ws, capture_output=True, text=True, timeout=120,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": str(ws)},
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "the governor's own install" in run.stderr and "pipx" in run.stderr


def test_a_venv_reached_through_a_link_in_the_workspace_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, real = tmp_path / "ws", tmp_path / "venvs" / "proj"
    (real / "bin").mkdir(parents=True)
    ws.mkdir()
    (ws / ".venv").symlink_to(real)  # the agent could point it at a venv of its own
    monkeypatch.setattr(sys, "prefix", str(ws / ".venv"))
    problems = install.problems([str(ws)])
    assert len(problems) == 1 and "through a link" in problems[0] and "pipx" in problems[0]
    monkeypatch.setattr(sys, "prefix", str(real))
    assert install.problems([str(ws)]) == []  # the neighbour: started by the link's target
