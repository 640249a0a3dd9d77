"""The runner with real bwrap and real processes: output, limits, timeouts, kills."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import trio
from sandbox_procs import processes_matching

from governor.policies.capability import Capability
from governor.sandbox.host.bwrap import USERNS_ADVICE, BwrapUnavailable
from governor.sandbox.plan.profile import Profile, ProfileError
from governor.sandbox.run.launch import prepare
from governor.sandbox.run.preflight import preflight
from governor.sandbox.run.runner import Command, run, start
from governor.sandbox.run.spawn import spawn
from governor.sandbox.run.stubs import LEDGER, StubLedger
from governor.sandbox.standalone.sweeper import sandbox_holds


async def test_a_shell_line_runs_in_the_workspace_and_reports_its_exit_code(edit: Profile, ws: Path) -> None:
    result = await run(Command.shell("pwd; echo out; echo err >&2; exit 3"), edit)
    assert result.status.exit_code == 3
    assert result.status.signal is None
    assert result.text == f"{ws}\nout\nerr\n"
    assert not result.truncated and not result.timed_out


async def test_an_argv_is_passed_without_a_shell(edit: Profile) -> None:
    result = await run(Command.of(["printf", "%s|", "a b", "$HOME"]), edit)
    assert result.text == "a b|$HOME|"


def test_acp_commands_without_args_are_shell_lines_and_with_args_are_argv() -> None:
    assert Command.from_acp("ls | wc -l").argv == ("/bin/sh", "-c", "ls | wc -l")
    assert Command.from_acp("ls", ["-l"]).argv == ("ls", "-l")


async def test_the_output_limit_keeps_the_newest_bytes(edit: Profile) -> None:
    result = await run(Command.shell("seq 1 100000"), edit, output_limit=100)
    assert result.truncated
    assert result.text.endswith("99999\n100000\n")
    assert len(result.output) <= 100
    assert result.total_bytes == len("".join(f"{i}\n" for i in range(1, 100001)))


async def test_gigantic_output_is_read_to_the_end_in_bounded_memory(edit: Profile) -> None:
    async with start(
        Command.shell("head -c 300000000 /dev/zero; echo END"), edit, output_limit=1000
    ) as execution:
        status = await execution.finish()
    assert status.exit_code == 0
    assert execution.ring.total == 300_000_004
    assert execution.ring.peak <= 1000 + 64 * 1024
    assert execution.ring.snapshot()[0].endswith(b"\0END\n")


async def test_a_timeout_kills_the_whole_sandbox_and_says_so(edit: Profile, no_leftovers: list[str]) -> None:
    no_leftovers.append("sleep 31.71")
    result = await run(
        Command.shell("echo started; setsid sleep 31.71 & sleep 31.71"), edit, timeout=2
    )
    assert result.timed_out
    assert result.status.signal == "SIGKILL"
    assert result.text == "started\n"


async def test_a_command_killed_by_a_signal_inside_reports_128_plus_n(edit: Profile) -> None:
    result = await run(Command.shell("kill -TERM $$"), edit)
    assert result.status.exit_code == 128 + 15


async def test_cancelling_the_caller_kills_and_reaps_the_command(edit: Profile, no_leftovers: list[str]) -> None:
    no_leftovers.append("sleep 32.12")
    async with trio.open_nursery() as nursery:

        async def cancel_once_running() -> None:
            while not processes_matching("sleep 32.12"):
                await trio.sleep(0.01)
            nursery.cancel_scope.cancel()

        nursery.start_soon(cancel_once_running)
        await run(Command.shell("sleep 32.12"), edit)
    assert processes_matching("sleep 32.12") == []


async def test_a_daemon_does_not_outlive_its_command(edit: Profile, ws: Path, no_leftovers: list[str]) -> None:
    no_leftovers.append("sleep 33.3")
    result = await run(Command.shell("(setsid sleep 33.3 &); echo bye"), edit)
    assert result.status.exit_code == 0
    assert processes_matching("sleep 33.3") == []


async def test_full_access_runs_on_the_host_with_a_declared_environment_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOVERNOR_TEST_SECRET", "leaked-value")
    outside = tmp_path / "outside"
    profile = Profile(capability=Capability.FULL_ACCESS, workspace=tmp_path, env={"CI": "1"})
    result = await run(Command.shell(f"env; echo x > {outside}"), profile)
    assert result.status.exit_code == 0
    assert outside.read_text() == "x\n"
    assert "leaked-value" not in result.text
    assert "CI=1" in result.text


async def test_full_access_kills_its_process_group_on_timeout_and_after_exit(
    tmp_path: Path, no_leftovers: list[str]
) -> None:
    no_leftovers += ["sleep 34.1", "sleep 34.2"]
    profile = Profile(capability=Capability.FULL_ACCESS, workspace=tmp_path)
    result = await run(Command.shell("sleep 34.1 & sleep 34.1"), profile, timeout=0.3)
    assert result.timed_out and result.status.signal == "SIGKILL"
    result = await run(Command.shell("(sleep 34.2 &); echo done"), profile)
    assert result.status.exit_code == 0 and result.text == "done\n"


async def test_full_access_cannot_reach_a_grandchild_that_left_the_session(tmp_path: Path) -> None:
    """Documented limit: without a PID namespace or cgroup, setsid() escapes."""
    profile = Profile(capability=Capability.FULL_ACCESS, workspace=tmp_path)
    line = (
        "setsid sh -c 'echo $$ > started; exec sleep 34.9' > /dev/null 2>&1 & "
        "while [ ! -s started ]; do sleep 0.01; done; echo ok"
    )
    result = await run(Command.shell(line), profile)
    assert result.text == "ok\n"
    escaped = processes_matching("sleep 34.9")
    for pid in escaped:
        os.kill(pid, 9)
    assert escaped, "the setsid'd grandchild was expected to survive (documented limit)"


async def test_a_profile_that_cannot_be_rendered_starts_nothing(edit: Profile, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with pytest.raises(ProfileError, match="outside the roots"):
        await run(Command.shell(f"touch {marker}"), replace(edit, cwd=tmp_path))
    assert not marker.exists()


async def test_stubs_are_removed_after_a_run_and_never_left_on_the_host(edit: Profile, ws: Path) -> None:
    result = await run(Command.shell("ls -a"), edit)
    assert ".vscode" in result.text.split()  # the stub inside the sandbox
    assert sorted(os.listdir(ws)) == [".git"]
    assert LEDGER.held() == {}


async def test_a_stub_stays_while_another_sandbox_still_relies_on_it(edit: Profile, ws: Path) -> None:
    async with start(Command.shell("sleep 0.6; mkdir .vscode && echo BROKE-IN"), edit) as slow:
        await run(Command.shell("true"), edit)  # starts and ends while `slow` runs
        assert (ws / ".vscode").is_file()
        await slow.finish()
    assert "BROKE-IN" not in slow.ring.snapshot()[0].decode()
    assert not (ws / ".vscode").exists()


SEALED_ATTACKS = r"""
chattr -i .claude; rm -f .claude; mv .claude moved; echo pwn > .claude; chmod 666 .claude
ln .claude hard; touch .claude; mkdir -p .claude/x; echo decoy > decoy; mv -f decoy .claude
python3 -c "import ctypes; l = ctypes.CDLL(None, use_errno=True); print('exchange', l.renameat2(-100, b'decoy', -100, b'.claude', 2), ctypes.get_errno())"
[ -f .claude ] && [ ! -s .claude ] && echo STILL-THE-EMPTY-STUB
echo ok > allowed.txt
"""


async def test_a_sealed_stub_gets_no_mount_and_still_refuses_every_change(edit: Profile, ws: Path) -> None:
    ledger = StubLedger()
    probed = await preflight()
    with prepare(edit, ["true"], probed, ledger=ledger) as launch:
        options = os.pread(int(launch.argv[2]), 1 << 20, 0).split(b"\0")
        if not ledger.sealed(str(ws / ".claude")):
            pytest.skip("stubs cannot be sealed here (needs root with CAP_LINUX_IMMUTABLE)")
    assert options.count(str(ws / ".claude").encode()) == 1  # no pin mount, only its lock
    assert str(ws / ".git").encode() in options  # an existing protected dir still has one
    result = await run(Command.shell(SEALED_ATTACKS), edit, ledger=ledger)
    assert "STILL-THE-EMPTY-STUB" in result.text
    assert "exchange -1 1" in result.text  # EPERM
    assert sorted(os.listdir(ws)) == [".git", "allowed.txt", "decoy"]  # neighbours; stub gone
    assert (ws / "decoy").read_text() == "decoy\n"


async def test_a_running_sandbox_holds_a_lock_on_each_sealed_stub_it_relies_on(
    edit: Profile, ws: Path
) -> None:
    ledger = StubLedger()
    async with start(Command.shell("sleep 10"), edit, ledger=ledger) as execution:
        if not ledger.sealed(str(ws / ".claude")):
            pytest.skip("stubs cannot be sealed here (needs root with CAP_LINUX_IMMUTABLE)")
        fd = os.open(ws / ".claude", os.O_RDONLY)
        try:
            with trio.fail_after(8):  # pid 1 takes its locks once the sandbox is set up
                while not sandbox_holds(fd):  # what a sweeper waits for
                    await trio.sleep(0.02)
        finally:
            os.close(fd)
        execution.kill()
        await execution.finish()
    assert not (ws / ".claude").exists()


async def test_declared_secrets_never_appear_on_the_bwrap_command_line(edit: Profile) -> None:
    profile = replace(edit, env={"API_TOKEN": "sekrit-4711"})
    async with start(Command.shell("echo $API_TOKEN; sleep 0.5"), profile) as execution:
        pid = execution.child.pid
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            cmdline = handle.read()
        with open(f"/proc/{pid}/environ", "rb") as handle:
            environ = handle.read()
        await execution.finish()
    assert b"sekrit-4711" not in cmdline
    assert environ == b""
    assert "sekrit-4711" in execution.ring.snapshot()[0].decode()


async def test_a_sandboxed_command_survives_trio_retiring_its_worker_threads(
    edit: Profile, monkeypatch: pytest.MonkeyPatch, no_leftovers: list[str]
) -> None:
    """bwrap --die-with-parent fires when the *thread* that forked it exits; trio
    forks from worker threads that retire when idle. We fork from the trio thread."""
    from trio._core import _thread_cache

    monkeypatch.setattr(_thread_cache, "IDLE_TIMEOUT", 0.1)
    no_leftovers += ["sleep 35.5", "sleep 35.6"]
    async with start(Command.shell("sleep 35.5"), edit) as ours:
        bwrap = await preflight()
        theirs = await trio.lowlevel.open_process(
            [bwrap.path, "--ro-bind", "/", "/", "--unshare-all", "--unshare-user",
             "--die-with-parent", "sleep", "35.6"]
        )
        try:
            with trio.move_on_after(5):
                await theirs.wait()
            assert theirs.returncode == -9  # the hazard, shown
            assert ours.running  # our fork is tied to the trio thread
        finally:
            theirs.kill()
            await theirs.wait()


async def test_a_missing_configured_bwrap_fails_closed_with_what_to_install(edit: Profile, tmp_path: Path) -> None:
    with pytest.raises(BwrapUnavailable, match="install bubblewrap"):
        await run(Command.shell("true"), edit, bwrap=tmp_path / "no-bwrap")


async def test_a_bwrap_that_cannot_create_namespaces_fails_closed_with_advice(edit: Profile, tmp_path: Path) -> None:
    fake = tmp_path / "bwrap"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$1" in --version) echo "bubblewrap 0.11.0";; '
        '--help) echo "    --seccomp FD  x";; '
        '*) echo "bwrap: No permissions to create a new namespace" >&2; exit 1;; esac\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    marker = tmp_path / "ran"
    with pytest.raises(BwrapUnavailable) as info:
        await run(Command.shell(f"touch {marker}"), edit, bwrap=fake)
    assert USERNS_ADVICE in str(info.value)
    assert not marker.exists()
    full = Profile(capability=Capability.FULL_ACCESS, workspace=tmp_path)
    result = await run(Command.shell("echo unsandboxed"), full, bwrap=fake)
    assert result.text == "unsandboxed\n"


async def test_spawn_passes_stdin_and_separate_stderr_through(tmp_path: Path) -> None:
    child = spawn(["sh", "-c", "cat; echo e >&2"], stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    await child.stdin.send_all(b"hello")
    await child.stdin.aclose()
    assert await child.stdout.receive_some(100) == b"hello"
    assert await child.stderr.receive_some(100) == b"e\n"
    assert await child.wait() == 0
    await child.aclose()


async def test_a_kill_during_bwrap_setup_still_ends_the_whole_sandbox(
    edit: Profile, no_leftovers: list[str]
) -> None:
    """bwrap's pid 1 arms --die-with-parent only after its mount setup; a kill of
    bwrap alone in that window would orphan it. The kill also hits pid 1."""
    no_leftovers.append("sleep 39.9")
    for _ in range(15):
        async with start(Command.shell("sleep 39.9"), edit) as execution:
            execution.kill()
            status = await execution.finish()
        assert status.signal == "SIGKILL"
    assert processes_matching("sleep 39.9") == []


# -- $HOME is not the password database's home ----------------------------------------

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def outer_home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A $HOME outside /tmp and outside the passwd home (CI sets HOME=/github/home),
    holding a secret and an agent folder; the governor's own $HOME points at it."""
    import shutil
    import uuid

    path = REPO / ".pytest-homes" / uuid.uuid4().hex[:8]
    (path / ".ssh").mkdir(parents=True)
    (path / ".ssh" / "id_ed25519").write_text("OUTER-HOME-CANARY")
    (path / ".qwen").mkdir()
    (path / ".qwen" / "settings.json").write_text('{"kept": true}')
    monkeypatch.setenv("HOME", str(path))
    try:
        yield path
    finally:
        shutil.rmtree(path.parent)


async def test_a_home_that_is_not_the_passwd_home_is_hidden_too(ws: Path, outer_home: Path) -> None:
    profile = Profile(capability=Capability.EDIT_WORKSPACE, workspace=ws)
    secret = outer_home / ".ssh" / "id_ed25519"
    result = await run(Command.shell(f"cat {secret}; echo HOME=$HOME"), profile)
    assert "OUTER-HOME-CANARY" not in result.text
    assert "No such file" in result.text
    # The neighbour: the same file is readable when nothing hides it.
    assert secret.read_text() == "OUTER-HOME-CANARY"


async def test_an_agents_own_home_exists_inside_with_only_its_kept_folders(
    ws: Path, outer_home: Path
) -> None:
    profile = Profile.for_agent(
        Capability.EDIT_WORKSPACE, ws, home_folders=(".qwen",), env={"HOME": str(outer_home)}
    )
    line = 'echo HOME=$HOME; ls -A "$HOME"; cat "$HOME/.qwen/settings.json"; cat "$HOME/.ssh/id_ed25519"'
    result = await run(Command.shell(line), profile)
    assert f"HOME={outer_home}\n.qwen\n" in result.text  # it exists, with .qwen alone in it
    assert '{"kept": true}' in result.text
    assert "OUTER-HOME-CANARY" not in result.text


async def test_a_declared_home_inside_the_workspace_leaves_the_workspace_to_its_rules(
    ws: Path,
) -> None:
    (ws / "home").mkdir()
    (ws / "home" / "notes.txt").write_text("in the workspace\n")
    profile = Profile.for_agent(Capability.EDIT_WORKSPACE, ws, env={"HOME": str(ws / "home")})
    result = await run(Command.shell('cat "$HOME/notes.txt"'), profile)
    assert result.status.exit_code == 0 and result.text == "in the workspace\n"
