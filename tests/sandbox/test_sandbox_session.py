"""A session's one sandbox and its fork server (governor.sandbox.run.session, governor.sandbox.standalone.forkserver),
over real bwrap and real processes. The escape suite runs every attack through a
session too (tests/security); these are the rules only a session has."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest
import trio
from sandbox_procs import processes_matching

from governor.sandbox.plan.profile import Profile, ProfileError
from governor.sandbox.run.execution import ExitStatus
from governor.sandbox.run.session import SandboxSession, SessionEnded, SessionError
from governor.sandbox.run.stubs import StubLedger
from governor.sandbox.run.terminals import Terminals

LIMIT = 1 << 20


@asynccontextmanager
async def session(profile: Profile) -> AsyncIterator[SandboxSession]:
    async with SandboxSession(profile, ledger=StubLedger()) as opened:
        yield opened


async def run(box: SandboxSession, profile: Profile, line: str) -> tuple[ExitStatus, str]:
    async with box.start(("/bin/sh", "-c", line), profile, output_limit=LIMIT) as execution:
        status = await execution.finish()
    return status, execution.ring.snapshot()[0].decode()


async def test_a_command_has_no_capability_a_filter_and_no_user_namespaces(edit: Profile) -> None:
    async with session(edit) as box:
        status, out = await run(
            box,
            edit,
            "grep -E '^(Cap(Inh|Prm|Eff|Bnd|Amb)|NoNewPrivs|Seccomp|SigIgn):' /proc/self/status;"
            " cat /proc/sys/user/max_user_namespaces",
        )
    assert status == ExitStatus(exit_code=0)
    fields = dict(line.split(":\t") for line in out.splitlines()[:-1])
    assert {fields[f"Cap{k}"] for k in ("Inh", "Prm", "Eff", "Bnd", "Amb")} == {"0000000000000000"}
    assert fields["NoNewPrivs"] == "1"
    assert fields["Seccomp"] == "2"
    assert out.splitlines()[-1] == "0"
    # no signal the server's Python ignores (SIGPIPE, SIGXFSZ) stays ignored in a
    # command; glibc's posix_spawn leaves its own two internal signals (32, 33)
    ignored = int(fields["SigIgn"], 16)
    assert [n for n in range(1, 32) if ignored & 1 << (n - 1)] == []


async def test_each_command_sees_only_its_own_processes(edit: Profile, no_leftovers: list[str]) -> None:
    no_leftovers.append("sleep 41.5")
    async with (
        session(edit) as box,
        box.start(("sleep", "41.5"), edit, output_limit=LIMIT) as sleeper,
    ):
        status, out = await run(box, edit, "echo $$; ls /proc | grep -E '^[0-9]+$' | sort -n")
        assert sleeper.running
    assert status == ExitStatus(exit_code=0)
    lines = out.split()
    # the shell is pid 2 under its own pid 1; the sleep next door is invisible
    assert lines[0] == "2"
    assert set(lines[1:]) <= {"1", "2", "3", "4", "5"}
    assert "sleep" not in out


async def test_tmp_is_shared_by_the_commands_of_a_session_and_by_nothing_else(
    edit: Profile, tmp_path: Path
) -> None:
    async with session(edit) as box:
        status, _ = await run(box, edit, "echo kept > /tmp/note")
        assert status.exit_code == 0
        _, out = await run(box, edit, "cat /tmp/note")
        assert out == "kept\n"
    assert not Path("/tmp/note").exists() or Path("/tmp/note").read_text() != "kept\n"
    async with session(edit) as other:
        _, out = await run(other, edit, "cat /tmp/note 2>&1 || echo absent")
    assert out.endswith("absent\n")


SERVER = """
import os, socket
listeners = []
for path in ("t.sock", "/tmp/t.sock"):
    s = socket.socket(socket.AF_UNIX)
    s.bind(path)
    s.listen(1)
    listeners.append(s)
open("ready", "w").close()
for s in listeners:
    conn, _ = s.accept()
    conn.sendall(b"hello from " + s.getsockname().encode())
"""
CLIENT = """
import socket
for path in ("t.sock", "/tmp/t.sock"):
    c = socket.socket(socket.AF_UNIX)
    c.connect(path)
    print(c.recv(100).decode())
"""


async def test_a_unix_socket_server_in_one_command_serves_a_client_in_the_next(
    edit: Profile, ws: Path
) -> None:
    """A test server in one terminal, its client in another: a socket in the
    workspace and one in the session's /tmp."""
    async with session(edit) as box:
        argv = ("python3", "-c", SERVER)
        async with box.start(argv, edit, output_limit=LIMIT) as server:
            with trio.fail_after(20):
                while not (ws / "ready").exists():
                    await trio.sleep(0.02)
            status, out = await run(box, edit, f"python3 -c '{CLIENT}'")
            assert (await server.finish()).exit_code == 0, server.ring.snapshot()
    assert status.exit_code == 0, out
    assert out == "hello from t.sock\nhello from /tmp/t.sock\n"


async def test_a_repository_made_by_one_command_is_pinned_for_the_next(edit: Profile, ws: Path) -> None:
    async with session(edit) as box:
        status, _ = await run(box, edit, "git init -q sub && echo ok > sub/kept")
        assert status.exit_code == 0
        status, out = await run(
            box,
            edit,
            "echo evil > sub/.git/hooks/pre-commit 2>/dev/null && echo wrote;"
            " mv sub sub2 2>/dev/null && echo moved; echo more >> sub/kept && echo appended",
        )
    assert "wrote" not in out and "moved" not in out
    assert "appended" in out
    assert not (ws / "sub" / ".git" / "hooks" / "pre-commit").exists()
    assert (ws / "sub" / "kept").read_text() == "ok\nmore\n"


async def test_a_secret_file_that_appears_mid_session_is_masked(edit: Profile, ws: Path) -> None:
    async with session(edit) as box:
        (ws / ".env").write_text("TOKEN=CANARY-mid-session")
        (ws / "plain.txt").write_text("visible")
        _, out = await run(box, edit, "cat .env; echo; cat plain.txt")
    assert "CANARY" not in out
    assert out.endswith("visible")


async def test_exit_codes_and_signals_are_reported_as_bwrap_reports_them(edit: Profile) -> None:
    async with session(edit) as box:
        assert (await run(box, edit, "exit 7"))[0] == ExitStatus(exit_code=7)
        assert (await run(box, edit, "kill -TERM $$"))[0] == ExitStatus(exit_code=128 + 15)
        status, _ = await run(box, edit, "exec /nonexistent/program")
        assert status.exit_code not in (None, 0)
        async with box.start(("no-such-program-xyz",), edit, output_limit=LIMIT) as execution:
            status = await execution.finish()
        assert status == ExitStatus(exit_code=127)
        assert "no-such-program-xyz" in execution.ring.snapshot()[0].decode()


async def test_killing_a_command_ends_its_daemons_and_leaves_the_session_working(
    edit: Profile, no_leftovers: list[str]
) -> None:
    no_leftovers.append("sleep 42.5")
    async with session(edit) as box:
        async with box.start(
            ("/bin/sh", "-c", "setsid sh -c 'sleep 42.5' & sleep 42.5"), edit, output_limit=LIMIT
        ) as execution:
            with trio.fail_after(10):
                while len(processes_matching("sleep 42.5")) < 2:
                    await trio.sleep(0.02)
            execution.kill()
            assert (await execution.finish()).signal == "SIGKILL"
        with trio.fail_after(10):
            while processes_matching("sleep 42.5"):
                await trio.sleep(0.02)
        assert await run(box, edit, "echo still") == (ExitStatus(exit_code=0), "still\n")


async def test_a_command_whose_block_is_left_is_killed(edit: Profile, no_leftovers: list[str]) -> None:
    no_leftovers.append("sleep 43.5")
    async with session(edit) as box, box.start(("sleep", "43.5"), edit, output_limit=LIMIT):
        with trio.fail_after(10):
            while not processes_matching("sleep 43.5"):
                await trio.sleep(0.02)
    # the no_leftovers fixture checks that the sleep is gone


async def test_an_ended_session_refuses_commands_and_terminals_build_a_new_one(
    edit: Profile, no_leftovers: list[str]
) -> None:
    async with session(edit) as box:
        await box.aclose()
        assert box.ended
        with pytest.raises(SessionEnded):
            await run(box, edit, "true")
    async with trio.open_nursery() as nursery, Terminals(nursery, edit) as terminals:
        first = await terminals.create("echo one")
        assert (await terminals.wait_for_exit(first)).exit_code == 0
        servers = [pid for pid in processes_matching("-I -S -B /proc/self/fd/") if _ours(pid)]
        assert servers, "the session's fork server is not running"
        for pid in servers:
            # The spares are forks of the server with its command line: one killed
            # first may already have taken the others with it.
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        second = await terminals.create("echo two")
        assert (await terminals.wait_for_exit(second)).exit_code == 0
        assert terminals.output(second).output == "two\n"


def _ours(pid: int) -> bool:
    """Whether ``pid`` descends from this test process."""
    me = os.getpid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/stat") as handle:
                pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            return False
        if pid == me:
            return True
    return False


async def test_a_bad_working_directory_is_refused_before_anything_runs(
    edit: Profile, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    async with session(edit) as box:
        with pytest.raises(ProfileError, match="outside the roots"):
            await run(box, replace(edit, cwd=outside), f"touch {outside}/ran")
        assert await run(box, edit, "echo fine") == (ExitStatus(exit_code=0), "fine\n")
    assert not (outside / "ran").exists()


def test_the_server_is_stdlib_only() -> None:
    """It runs under the base interpreter with -I -S: no venv, no site-packages."""
    server = Path(__file__).parents[2] / "sandbox" / "standalone" / "forkserver.py"
    probe = subprocess.run(
        [
            "python3", "-I", "-S", "-c",
            "import runpy, sys; sys.argv = ['x']; "
            f"runpy.run_path({str(server)!r}, run_name='not_main')",
        ],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert probe.returncode == 0, probe.stderr


async def test_a_command_cancelled_while_it_starts_never_runs_on(
    edit: Profile, ws: Path, no_leftovers: list[str]
) -> None:
    no_leftovers.append("sleep 4.45")
    async with session(edit) as box:
        for delay in (0, 0.0005, 0.002, 0.01):
            with trio.move_on_after(delay):
                async with box.start(
                    ("/bin/sh", "-c", "sleep 4.45; touch late"), edit, output_limit=LIMIT
                ):
                    await trio.sleep_forever()
        assert await run(box, edit, "echo after") == (ExitStatus(exit_code=0), "after\n")
    assert not (ws / "late").exists()


async def test_terminals_fall_back_to_a_bwrap_per_command_when_the_server_cannot_start(
    edit: Profile, ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "forkserver.py"
    broken.write_text("raise SystemExit('this fork server cannot start')\n")
    monkeypatch.setattr("governor.sandbox.run.session.SERVER", broken)
    async with trio.open_nursery() as nursery, Terminals(nursery, edit) as terminals:
        tid = await terminals.create("echo fine; touch .envrc 2>/dev/null || echo pinned")
        assert (await terminals.wait_for_exit(tid)).exit_code == 0
        assert terminals.output(tid).output == "fine\npinned\n"
        assert terminals.fallback is not None
        assert "this fork server cannot start" in terminals.fallback
    assert not (ws / ".envrc").exists()


async def test_a_server_that_never_says_ready_is_ended_with_a_clear_error(
    edit: Profile, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    silent = tmp_path / "forkserver.py"
    silent.write_text("import time\ntime.sleep(45.25)\n")
    monkeypatch.setattr("governor.sandbox.run.session.SERVER", silent)
    monkeypatch.setattr("governor.sandbox.run.session.READY_TIMEOUT", 0.5)
    with pytest.raises(SessionError, match="did not start within 0 s"):
        await SandboxSession(edit, ledger=StubLedger()).open()
    with trio.move_on_after(5):  # the kernel ends a namespace asynchronously
        while [p for p in processes_matching("-I -S -B /proc/self/fd/") if _ours(p)]:
            await trio.sleep(0.02)
    # the silent server was ended with its sandbox
    assert [p for p in processes_matching("-I -S -B /proc/self/fd/") if _ours(p)] == []


def test_the_server_covers_the_same_proc_knobs_as_every_bwrap_profile() -> None:
    """sandbox/standalone/forkserver.py cannot import the profile (it runs stdlib-only from
    a memfd), so its copy of the list is checked here."""
    from governor.sandbox.plan.profile import PROC_HOST_KNOBS
    from governor.sandbox.standalone import forkserver

    assert tuple(f"/proc/{name}" for name in forkserver.PROC_COVERS) == PROC_HOST_KNOBS


async def test_a_remade_host_socket_gone_again_while_a_command_is_set_up_fails_no_command(
    edit: Profile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A daemon restarted since the session's sandbox was built (its socket made
    again: the command's own mounts cover it anew) and stopped again while the
    command is set up: nothing is left there to cover, and the command starts.
    The same socket made again and staying is covered (ECONNREFUSED inside):
    tests/security/test_escapes.py."""
    import secrets
    import socket

    from governor.sandbox.run import session as session_module

    if os.getuid() != 0:
        pytest.skip("making a socket under /srv needs root")
    path = f"/srv/govtest-{secrets.token_hex(4)}.sock"

    def listen() -> socket.socket:
        server = socket.socket(socket.AF_UNIX)
        server.bind(path)
        server.listen()
        return server

    first = listen()
    try:
        async with session(edit) as box:
            first.close()
            os.unlink(path)
            second = listen()  # made again: this command's mounts are to cover it
            real, stopped = session_module.memfd, []

            def memfd(name: str, data: bytes) -> int:
                if name == "governor-command" and not stopped:  # its binds checked, not made
                    stopped.append(path)
                    second.close()
                    os.unlink(path)
                return real(name, data)

            monkeypatch.setattr(session_module, "memfd", memfd)
            status, out = await run(box, edit, f"echo started; test -e {path} || echo absent")
            assert stopped
            assert (status, out) == (ExitStatus(exit_code=0), "started\nabsent\n")
    finally:
        first.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
