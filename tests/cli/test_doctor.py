"""`governor doctor`: one line per check, exit 1 when the default run cannot work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

GOVERNOR = str(Path(sys.executable).parent / "governor")


def doctor(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "ACP_GOVERNOR_BWRAP"}
    return subprocess.run(
        [GOVERNOR, "doctor"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**base, "HOME": str(tmp_path), "XDG_STATE_HOME": str(tmp_path / "state"), **env},
    )


def test_doctor_checks_bwrap_and_runs_a_command_in_a_session_sandbox(tmp_path: Path) -> None:
    done = doctor(tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("ok    sandbox: bwrap ")
    assert lines[1].startswith("ok    session sandbox: built in ")
    assert f"ok    audit logs: {tmp_path / 'state'}" in done.stdout


def test_doctor_fails_naming_a_bwrap_that_is_not_there(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-bwrap"
    done = doctor(tmp_path, ACP_GOVERNOR_BWRAP=str(missing))
    assert done.returncode == 1
    assert done.stdout.startswith(f"FAIL  sandbox: configured bwrap {missing} ")
    assert "session sandbox" not in done.stdout  # nothing to build it with
    assert done.stdout.rstrip().endswith("fix the FAIL lines above")


def test_doctor_says_how_the_limits_are_enforced_here(tmp_path: Path) -> None:
    done = doctor(tmp_path)
    assert "limits: enforced with rlimits and tmpfs sizes (defaults: memory 4G" in done.stdout
    processes = next(line for line in done.stdout.splitlines() if "processes: " in line)
    if os.getuid() != 0:
        assert "RLIMIT_NPROC set inside the sandbox" in processes
    else:
        assert "pids cgroup" in processes or "NOT enforced" in processes
    assert "cgroup v2: " in done.stdout
