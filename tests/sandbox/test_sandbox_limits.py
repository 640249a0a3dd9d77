"""Resource limits: what the sandbox is given for them, how an end at one is
named, and real attempts that hit them (an agent over its CPU or memory, a
fork bomb beside an attempt that must still complete).

The escape suite (`tests/security/test_escapes_limits.py`) runs the commands'
side as root and as an unprivileged user; these run as the test process's user.
"""

from __future__ import annotations

import resource
import sys
from pathlib import Path

import pytest
import trio

from governor.attempt.lifecycle import run_attempt
from governor.ending.outcome import Outcome
from governor.job.spec import AttemptSpec
from governor.policies.capability import Capability
from governor.policies.limits import Limits
from governor.policies.policy import parse_policy
from governor.sandbox.host.limits import (
    CPU_GRACE,
    Enforcement,
    LimitsUnavailable,
    blame,
    pids_group,
    prlimit_prefix,
    probe,
    rlimits,
)
from governor.sandbox.plan.bwrap_argv import render
from governor.sandbox.plan.profile import BwrapFeatures, HostFacts, Profile, ProfileError
from governor.sandbox.run.execution import ExitStatus

AGENT = Path(__file__).with_name("limits_agent.py")
LIMITS = Limits(memory=512 << 20, processes=64, tmp=8 << 20, cpu_seconds=2)
WS = "/srv/ws"
FACTS = HostFacts(
    home="/home/u",
    home_env="/home/u",
    uid=1000,
    roots=(WS,),
    cwd=WS,
    private_dirs=("/tmp", "/var/tmp"),
    run_user_dir="/run/user/1000",
)


def _render(limits: Limits | None, features: BwrapFeatures | None = None) -> list[str]:
    profile = Profile(Capability.READ_ONLY, Path(WS), limits=limits)
    return render(profile, FACTS, features or BwrapFeatures(), seccomp_fd=3)


def test_every_tmpfs_the_sandbox_mounts_is_sized_by_the_tmp_limit_and_dev_shm_by_memory() -> None:
    """Scratch tmpfs at ``tmp``; ``/dev/shm`` is shared memory, sized at what
    one process may hold (``memory``) and counted in ``attempt_memory``."""
    argv = _render(LIMITS)
    tmpfs = [i for i, word in enumerate(argv) if word == "--tmpfs"]
    where = [argv[i + 1] for i in tmpfs]
    assert where == ["/dev/shm", "/tmp", "/var/tmp", "/home/u", "/run/user/1000"]
    for i in tmpfs:
        size = 512 << 20 if argv[i + 1] == "/dev/shm" else 8 << 20
        assert argv[i - 2 : i] == ["--size", str(size)]
    assert "--size" not in _render(None)


def test_a_bwrap_without_size_is_refused_rather_than_run_without_the_tmp_limit() -> None:
    with pytest.raises(ProfileError, match="no --size"):
        _render(LIMITS, BwrapFeatures(tmpfs_size=False))
    _render(Limits(memory=1 << 30), BwrapFeatures(tmpfs_size=False))  # no tmp limit: fine


def test_memory_processes_and_cpu_become_rlimits_data_not_address_space() -> None:
    assert rlimits(LIMITS) == [
        (resource.RLIMIT_DATA, 512 << 20, 512 << 20),
        (resource.RLIMIT_NPROC, 64, 64),
        (resource.RLIMIT_CPU, 2, 2 + CPU_GRACE),
    ]
    assert prlimit_prefix(LIMITS, "/usr/bin/prlimit") == (
        "/usr/bin/prlimit",
        f"--data={512 << 20}:{512 << 20}",
        "--nproc=64:64",
        f"--cpu=2:{2 + CPU_GRACE}",
        "--",
    )
    assert prlimit_prefix(Limits(tmp=8 << 20), None) == ()
    with pytest.raises(LimitsUnavailable, match="prlimit"):
        prlimit_prefix(LIMITS, None)


@pytest.mark.parametrize(
    ("code", "sig", "output", "named"),
    [
        (152, None, b"CPU time limit exceeded", "cpu limit 2 s (killed by SIGXCPU)"),
        (None, "SIGXCPU", b"", "cpu limit 2 s (killed by SIGXCPU)"),
        (1, None, b"Traceback...\nMemoryError\n", "memory limit 512M"),
        (134, None, b"terminate called after throwing std::bad_alloc", "memory limit 512M"),
        (2, None, b"sh: 1: Cannot fork\n", "processes limit 64"),
        (1, None, b"BlockingIOError: [Errno 11] Resource temporarily unavailable", "processes"),
        (1, None, b"BlockingIOError: Resource temporarily unavailable\n", "processes limit 64"),
        (1, None, b"Error: spawn /bin/sh EAGAIN\n    at ChildProcess", "processes limit 64"),
        (1, None, b"read: Resource temporarily unavailable", None),  # EAGAIN of a read
        (1, None, b"dd: error writing '/tmp/x': No space left on device", "tmp limit 8M"),
        (1, None, b"dd: error writing '/srv/ws/x': No space left on device", None),
        (0, None, b"MemoryError", None),
        (1, None, b"plain failure", None),
    ],
)
def test_the_limit_a_process_stopped_at_is_named_from_its_end(
    code: int | None, sig: str | None, output: bytes, named: str | None
) -> None:
    found = blame(LIMITS, code, sig, output)
    if named is None:
        assert found is None
    else:
        assert found is not None and found.startswith(named), found


def test_without_limits_nothing_is_blamed_on_one() -> None:
    assert blame(None, 152, None, b"MemoryError") is None
    assert blame(Limits(), 1, None, b"MemoryError") is None


def test_doctor_s_words_name_each_mechanism() -> None:
    lines = Enforcement("rlimit", None, "not available: no cgroup2", "/usr/bin/prlimit").lines()
    assert any("RLIMIT_NPROC set inside the sandbox" in line for line in lines)
    assert any(line.startswith("cgroup v2: not available") for line in lines)
    none = Enforcement("none", None, "x", None).lines()
    assert any("NOT enforced" in line for line in none)
    assert any("prlimit: NOT found" in line for line in none)
    here = probe()
    assert here.processes in ("rlimit", "cgroup", "none")


@pytest.mark.skipif(probe().pids_root is None, reason="no writable pids cgroup here (root only)")
def test_a_pids_group_allows_its_processes_and_is_removed_at_the_end() -> None:
    root = probe().pids_root
    assert root is not None
    with pids_group(root, 7) as procs:
        group = Path(procs).parent
        assert (group / "pids.max").read_text().strip() == "7"
    assert not group.exists()


@pytest.mark.skipif(probe().pids_root is None, reason="no writable pids cgroup here (root only)")
def test_a_group_just_made_is_not_swept_by_the_next_but_a_dead_governors_is() -> None:
    # found by a Ray batch: two attempts at once, the second's sweep removed the
    # first's group between its mkdir and the sandbox joining it
    import subprocess

    root = probe().pids_root
    assert root is not None
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead = Path(root, "acp-governor", f"{int(gone.stdout)}-{'0' * 16}")
    dead.mkdir(parents=True)
    # the second's sweep sees the first, empty
    with pids_group(root, 5) as first, pids_group(root, 6) as second:
        assert Path(first).exists() and Path(second).exists()
        assert not dead.exists()


def test_an_exit_status_carries_the_limit_it_stopped_at() -> None:
    status = ExitStatus(exit_code=1, limit="memory limit 512M (an allocation over it was refused)")
    assert status.shell_code == 1 and status.limit is not None


# -- real attempts -------------------------------------------------------------------------


def _policy(limits: str) -> object:
    return parse_policy(f'capability = "edit-workspace"\n[limits]\n{limits}\n', "limits.toml")


def _spec(
    tmp_path: Path, name: str, argv: list[str] | None, limits: str, **kw: object
) -> AttemptSpec:
    ws = tmp_path / name
    ws.mkdir()
    fields: dict[str, object] = {
        "prompt": "do it",
        "workspace": ws,
        "policy": _policy(limits),
        "log": tmp_path / f"{name}.jsonl",
        "timeout": 120,
    }
    if argv is None:
        fields["agent"] = "demo"
    else:
        fields["argv"] = argv
    fields.update(kw)
    return AttemptSpec(**fields)  # type: ignore[arg-type]


async def test_an_agent_over_cpu_seconds_is_ended_and_the_attempt_fails_naming_the_limit(
    tmp_path: Path,
) -> None:
    spec = _spec(tmp_path, "spin", [sys.executable, str(AGENT), "spin"], "cpu_seconds = 2")
    outcome = await run_attempt(spec)
    assert outcome.status == "failed"
    assert "stopped at its cpu limit 2 s (killed by SIGXCPU)" in (outcome.reason or "")


async def test_an_agent_over_its_memory_fails_naming_the_limit_and_one_within_it_completes(
    tmp_path: Path,
) -> None:
    spec = _spec(tmp_path, "mem", [sys.executable, str(AGENT), "memory"], 'memory = "512M"')
    outcome = await run_attempt(spec)
    assert outcome.status == "failed"
    assert "stopped at its memory limit 512M" in (outcome.reason or "")
    fine = _spec(tmp_path, "fine", [sys.executable, str(AGENT), "fine"], 'memory = "512M"')
    assert (await run_attempt(fine)).status == "completed"


async def test_while_a_fork_bomb_runs_a_second_attempt_on_the_same_machine_completes(
    tmp_path: Path,
) -> None:
    bomb = _spec(tmp_path, "bomb", [sys.executable, str(AGENT), "fork"], "processes = 64")
    neighbour = _spec(tmp_path, "demo", None, 'memory = "1G"')
    results: dict[str, Outcome] = {}

    async def attempt(name: str, spec: AttemptSpec) -> None:
        results[name] = await run_attempt(spec)
        if name == "demo":  # the neighbour is done: the bomb may stop
            (Path(bomb.workspace) / "stop").write_text("")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(attempt, "bomb", bomb)
        await trio.sleep(0.5)  # the bomb is under way first (no timing is asserted)
        nursery.start_soon(attempt, "demo", neighbour)
    assert results["demo"].status == "completed", results["demo"].reason
    assert (Path(neighbour.workspace) / "hello.py").exists()
    assert results["bomb"].status == "failed"
    assert "stopped at its processes limit 64" in (results["bomb"].reason or "")


def test_a_cgroup_v2_without_the_pids_controller_is_not_taken_for_a_place_for_pids_groups() -> None:
    from governor.sandbox.host.limits import _cgroup_v2, _makes_pids_groups

    where, _ = _cgroup_v2()
    if where is None or not Path(where, "cgroup.controllers").exists():
        pytest.skip("no cgroup v2 here")
    if "pids" in Path(where, "cgroup.subtree_control").read_text().split():
        pytest.skip("this cgroup v2 delegates pids")
    assert not _makes_pids_groups(where)
    assert not any(p.name.startswith("acp-governor-probe") for p in Path(where).iterdir())


async def test_limits_that_cannot_be_set_here_fail_the_attempt_before_the_agent_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import governor.sandbox.host.limits

    without = Enforcement("rlimit", None, "not available", None)  # no prlimit
    monkeypatch.setattr(governor.sandbox.host.limits, "enforcement", lambda: without)
    spec = _spec(tmp_path, "fine", [sys.executable, str(AGENT), "fine"], 'memory = "1G"')
    outcome = await run_attempt(spec)
    assert outcome.status == "failed"
    assert "the agent's sandbox cannot be built" in (outcome.reason or "")
    assert "prlimit (util-linux)" in (outcome.reason or "")
