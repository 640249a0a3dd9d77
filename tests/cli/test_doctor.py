"""`governor doctor`: one line per check, exit 1 when the default run cannot work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

GOVERNOR = str(Path(sys.executable).parent / "governor")


def doctor(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if k != "ACP_GOVERNOR_BWRAP"}
    return subprocess.run(
        [GOVERNOR, "doctor", *args],
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
    memory = next(line for line in done.stdout.splitlines() if "attempt_memory: " in line)
    assert "Unix sockets' buffers read in its namespaces" in memory
    if os.getuid() == 0 and os.access("/sys/fs/cgroup/memory", os.W_OK):
        assert "an attempt's memory group under /sys/fs/cgroup/memory" in memory


def test_doctor_json_is_one_document_of_the_same_checks_with_a_status(tmp_path: Path) -> None:
    plain = doctor(tmp_path)
    done = doctor(tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert (doc["status"], doc["exit_code"]) == ("ok", 0)
    checks = {c["check"]: c for c in doc["checks"]}
    assert checks["sandbox"]["result"] == "ok" and "bwrap" in checks["sandbox"]["said"]
    assert checks["agent demo"]["said"].startswith("from PATH: ")
    # the same items as the lines a person reads, details under their check
    assert len(doc["checks"]) == sum(1 for line in plain.stdout.splitlines() if line[:1] != " ")
    assert any(d.startswith("processes: ") for d in checks["limits"]["details"])
    broken = doctor(tmp_path, "--json", ACP_GOVERNOR_BWRAP=str(tmp_path / "none"))
    doc = json.loads(broken.stdout)
    assert broken.returncode == 1 and (doc["status"], doc["exit_code"]) == ("broken", 1)
    assert doc["checks"][0]["result"] == "FAIL" and doc["checks"][0]["check"] == "sandbox"


def test_doctor_and_presets_tell_one_story_of_an_agent_run_through_npx(tmp_path: Path) -> None:
    done = doctor(tmp_path)
    npx = [line for line in done.stdout.splitlines() if "runs through npx" in line]
    listed = subprocess.run(
        [GOVERNOR, "presets"], capture_output=True, text=True, timeout=60,
        env={**os.environ, "HOME": str(tmp_path)},
    )  # fmt: skip
    for line in npx:  # each says "not installed; runs through npx", as presets does
        agent = line.split("agent ", 1)[1].split(":", 1)[0]
        assert ": not installed; runs through npx (" in line
        block = ("\n" + listed.stdout).split(f"\n{agent} ", 1)[1]
        assert "not installed; runs through npx" in block.split("login:", 1)[0], agent
