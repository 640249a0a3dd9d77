"""A shipped policy is found by its name from any folder, as well as by path; a
name that is neither a file nor a shipped policy fails naming the shipped ones.
Run through the real `governor` console script, from a folder that is not the
checkout, with an empty $HOME."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from governor.batch.jobs import Job, anchored
from governor.job.policy_files import shipped_policies

GOVERNOR = str(Path(sys.executable).parent / "governor")
SHIPPED = sorted(shipped_policies())


def governor(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ACP_GOVERNOR_CEILING", "XDG_STATE_HOME")}
    (cwd / "home").mkdir(exist_ok=True)
    return subprocess.run(
        [GOVERNOR, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "HOME": str(cwd / "home")},
    )


def test_the_shipped_policies_are_the_policies_packages_toml_files() -> None:
    assert {"read-only", "edit-workspace", "full-access", "ci"} <= set(SHIPPED)
    for name, path in shipped_policies().items():
        assert path.name == f"{name}.toml" and path.parent.name == "policies"


@pytest.mark.parametrize("name", SHIPPED)
def test_governor_check_finds_each_shipped_policy_by_name_from_another_folder(
    tmp_path: Path, name: str
) -> None:
    ceiling = tmp_path / "ceiling.toml"  # one that fits every shipped policy, full-access too
    ceiling.write_text('max_capability = "full-access"\nallowed_agents = ["demo"]\n')
    done = governor("check", "--policy", name, "--ceiling", str(ceiling), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"policy {shipped_policies()[name]} fits" in done.stdout


def test_governor_run_with_a_policy_by_name_works_outside_the_checkout(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    done = governor(
        "run", "--agent", "demo", "--policy", "edit-workspace", "--workspace", str(ws),
        "--json", "--log", str(tmp_path / "log.jsonl"), "Write a hello program and run it",
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"
    assert (ws / "hello.py").is_file()  # edit-workspace: the write was allowed
    start = json.loads((tmp_path / "log.jsonl").read_text().splitlines()[0])
    assert start["kind"] == "attempt-start" and start["capability"] == "edit-workspace"


def test_a_name_that_is_no_file_and_no_shipped_policy_names_the_shipped_ones(
    tmp_path: Path,
) -> None:
    done = governor(
        "run", "--agent", "demo", "--policy", "edit-worksapce", "--workspace", str(tmp_path),
        "hello", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2
    assert "edit-worksapce: no such policy file, and no shipped policy of that name" in done.stderr
    assert f"({', '.join(SHIPPED)})" in done.stderr
    assert "did you mean 'edit-workspace'?" in done.stderr
    assert not (tmp_path / "hello.py").exists()


def test_a_missing_file_named_like_a_shipped_policy_points_at_its_name(tmp_path: Path) -> None:
    done = governor("check", "--policy", "edit-workspace.toml", cwd=tmp_path)
    assert done.returncode == 2
    assert "cannot read the policy: No such file or directory" in done.stderr
    assert "--policy edit-workspace" in done.stderr


def test_a_path_still_reads_that_file_and_a_bare_name_is_never_a_local_file(
    tmp_path: Path,
) -> None:
    # A cloned repository's file called `read-only` cannot stand in for the
    # shipped policy; `./read-only` is how to mean that file.
    (tmp_path / "read-only").write_text('capability = "edit-workspace"\n')
    shipped = governor("check", "--policy", "read-only", cwd=tmp_path)
    assert shipped.returncode == 0, shipped.stderr
    assert "fits: capability read-only" in shipped.stdout
    local = governor("check", "--policy", "./read-only", cwd=tmp_path)
    assert local.returncode == 0, local.stderr
    assert "fits: capability edit-workspace" in local.stdout
    (tmp_path / "mine").write_text('capability = "edit-workspace"\n')
    bare = governor("check", "--policy", "mine", cwd=tmp_path)  # no shipped `mine`: the file
    assert "fits: capability edit-workspace" in bare.stdout, bare.stderr


def test_governor_sandbox_and_audit_replay_take_a_name_too(tmp_path: Path) -> None:
    done = governor(
        "sandbox", "--policy", "read-only", "--workspace", str(tmp_path), "--",
        "touch", str(tmp_path / "made"), cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode != 0 and not (tmp_path / "made").exists()  # read-only: no write
    ws = tmp_path / "ws"
    ws.mkdir()
    log = tmp_path / "log.jsonl"
    ran = governor(
        "run", "--agent", "demo", "--policy", "edit-workspace", "--workspace", str(ws),
        "--log", str(log), "--json", "Write a hello program and run it", cwd=tmp_path,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    replay = governor("audit", "replay", str(log), "--policy", "read-only", cwd=tmp_path)
    assert replay.returncode == 0, replay.stderr
    assert "hello.py" in replay.stdout  # the write read-only would have refused


def test_a_batch_job_keeps_a_shipped_name_and_anchors_a_relative_path(tmp_path: Path) -> None:
    named = anchored(Job(id="a", prompt="p", repo="/r", agent="demo", policy="ci"), tmp_path)
    assert named.policy == "ci"
    pathed = anchored(Job(id="b", prompt="p", repo="/r", agent="demo", policy="p.toml"), tmp_path)
    assert pathed.policy == str(tmp_path / "p.toml")


def test_the_help_and_docs_name_every_shipped_policy(tmp_path: Path) -> None:
    shown = " ".join(governor("run", "--help", cwd=tmp_path).stdout.split())
    table = (Path(__file__).resolve().parents[2] / "docs" / "policies.md").read_text()
    for name in SHIPPED:
        assert name in shown, f"governor run --help does not name the shipped policy {name}"
        assert f"| `{name}` | `policies/{name}.toml` |" in table, name
