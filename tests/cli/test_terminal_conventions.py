"""The conventions a person brings from git, ruff and the agents' own CLIs,
through the real console script: Ctrl-C in a terminal, a pipe closed early, a
misspelt option."""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path

GOVERNOR = str(Path(sys.executable).parent / "governor")
DEMO = str(Path(__file__).resolve().parents[2] / "governor" / "agents" / "demo.py")
EDIT = str(Path(__file__).resolve().parents[2] / "policies" / "edit-workspace.toml")


def _read_until(fd: int, wanted: bytes, seen: bytearray, limit: float = 60) -> bool:
    """Read the pty into `seen` until `wanted` shows or the child closes it."""
    ends = time.monotonic() + limit
    while wanted not in seen and time.monotonic() < ends:
        ready, _, _ = select.select([fd], [], [], 0.5)
        if ready:
            try:
                chunk = os.read(fd, 4096)
            except OSError:  # EIO: the child closed its terminal
                return wanted in seen
            if not chunk:
                break
            seen += chunk
    return wanted in seen


def test_ctrl_c_in_a_terminal_exits_130_with_the_summary_and_no_traceback(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("wait\n")
    slow = "import time; print('working', flush=True); time.sleep(120)"
    argv = [
        GOVERNOR, "run", "--kind", "command", "--workspace", str(ws),
        "--log", str(tmp_path / "audit.jsonl"), "--prompt-file", str(prompt),
        "--", sys.executable, "-c", slow,
    ]  # fmt: skip
    pid, fd = pty.fork()
    if pid == 0:  # the child: a session of its own with the pty as its terminal
        os.execv(GOVERNOR, argv)
    seen = bytearray()
    try:
        assert _read_until(fd, b"started", seen), seen.decode(errors="replace")
        time.sleep(1)  # the command is running in its sandbox, behind the proxy
        os.write(fd, b"\x03")  # Ctrl-C as a person types it: SIGINT to the foreground group
        _read_until(fd, b"\x00never", seen, limit=60)
        _, status = os.waitpid(pid, 0)
    finally:
        os.close(fd)
    out = seen.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 130, out
    assert "cancelling the attempt" in out and "status" in out, out  # the summary is there
    assert "Traceback" not in out and "KeyboardInterrupt" not in out, out


def test_an_audit_view_whose_reader_is_gone_ends_quietly(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    log = tmp_path / "audit.jsonl"
    done = subprocess.run(
        [GOVERNOR, "run", "--policy", EDIT, "--workspace", str(ws), "--log", str(log),
         "the task", "--", sys.executable, DEMO],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    logs = " ".join([f"'{log}'"] * 200)  # some 100 kB of output: past every buffer
    for view in ("", "--refused", "--json", "--network"):
        # `true` reads nothing and is gone before the view writes: EPIPE at once;
        # `head -1` leaves after a line, mid-output
        for reader in ("true", "head -1"):
            piped = subprocess.run(
                f"'{GOVERNOR}' audit {view} {logs} | {reader}; echo \"rc=${{PIPESTATUS[0]}}\" >&2",
                shell=True, executable="/bin/bash", capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            said = piped.stderr.strip()
            assert said in ("rc=0", "rc=141"), (view, reader, said)


def test_a_misspelt_option_gets_the_command_s_usage_and_a_suggestion() -> None:
    done = subprocess.run(
        [GOVERNOR, "run", "--agnet", "demo", "hi"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert "usage: governor run" in done.stderr
    assert "--agnet" in done.stderr and "did you mean --agent?" in done.stderr, done.stderr
    # a word that is like nothing gets no guess, and a command's typo names the commands
    done = subprocess.run(
        [GOVERNOR, "run", "--zzzzqqq"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "did you mean" not in done.stderr, done.stderr
    done = subprocess.run([GOVERNOR, "audti"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "did you mean 'audit'" in done.stderr, done.stderr


def test_the_summary_names_the_attempt_and_audit_with_no_log_reads_the_state_folder(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    run = subprocess.run(
        [GOVERNOR, "run", "--policy", EDIT, "--workspace", str(ws), "the task", "--",
         sys.executable, DEMO],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    rows = dict(line.strip().split("  ", 1) for line in run.stdout.splitlines() if "  " in line)
    attempt = rows["attempt"].strip()
    assert attempt.startswith("acp-") and rows["log"].strip().startswith(str(tmp_path / "state"))
    read = subprocess.run(
        [GOVERNOR, "audit"], capture_output=True, text=True, timeout=60, env=env
    )  # fmt: skip
    assert read.returncode == 0, read.stderr
    assert attempt in read.stdout and "the logs in" in read.stderr
    story = subprocess.run(
        [GOVERNOR, "audit", "--attempt", attempt], capture_output=True, text=True, timeout=60, env=env
    )  # fmt: skip
    assert story.returncode == 0 and "hello.py" in story.stdout, story.stderr
    # no state folder yet: said so, with what to do
    empty = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "nothing")}
    none = subprocess.run(
        [GOVERNOR, "audit"], capture_output=True, text=True, timeout=60, env=empty
    )
    assert none.returncode == 2 and "no logs in" in none.stderr


def test_a_paused_ask_is_said_as_paused_with_its_own_reason_and_what_to_do_next(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = tmp_path / "ask.toml"
    policy.write_text('capability = "edit-workspace"\n[ask]\ntools = ["edit"]\n')
    done = subprocess.run(
        [GOVERNOR, "run", "--policy", str(policy), "--workspace", str(ws), "--approvals", "pause",
         "--log", str(tmp_path / "a.jsonl"), "the task", "--", sys.executable, DEMO],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 4, done.stderr
    line = next(x for x in done.stderr.splitlines() if "permission Write hello.py: PAUSED" in x)
    # not "WAITING for approval by unattended", nor the reason of another part of the decision
    assert line.endswith(
        "Write hello.py: PAUSED until a person approves (waiting for a person's approval: "
        "the tool kind edit matches the ask rule)"
    ), line
    assert "--approvals person" in done.stdout.split(" next  ", 1)[1]


def _in_a_terminal(argv: list[str], env: dict[str, str]) -> str:
    """What `argv` shows in a terminal of its own (a pty), to its end."""
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(argv[0], argv, env)
    seen = bytearray()
    try:
        _read_until(fd, b"\x00never", seen, limit=120)
        os.waitpid(pid, 0)
    finally:
        os.close(fd)
    return seen.decode(errors="replace")


def test_a_terminal_shows_verdicts_and_the_status_in_colour_and_no_color_turns_it_off(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    argv = [GOVERNOR, "run", "--policy", EDIT, "--workspace", str(ws), "--log",
            str(tmp_path / "a.jsonl"), "the task", "--", sys.executable, DEMO]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("NO_COLOR", "FORCE_COLOR")}
    env["TERM"] = "xterm"
    shown = _in_a_terminal(argv, env)
    assert "\x1b[1;31mREFUSED\x1b[0m" in shown and "\x1b[32mallowed\x1b[0m" in shown, shown
    assert "\x1b[33mUNASKED\x1b[0m" in shown and "status  \x1b[32mcompleted\x1b[0m" in shown
    plain = _in_a_terminal(argv, {**env, "NO_COLOR": "1"})
    assert "REFUSED" in plain and "\x1b" not in plain  # the agent's text is inert anyway
    piped = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env)
    assert "REFUSED" in piped.stderr and "\x1b" not in piped.stderr + piped.stdout


def test_quiet_prints_only_the_summary_and_verbose_adds_the_agent_s_words_masked_and_its_tool_calls(
    tmp_path: Path,
) -> None:
    """``-q`` leaves stderr without a line per event, the summary still on
    stdout; ``-v`` adds what the agent says (a secret's value masked, as the
    event stream masks it) and each tool call it reports; the default shows
    neither."""

    def run(*flags: str) -> subprocess.CompletedProcess[str]:
        ws = tmp_path / f"ws{len(list(tmp_path.iterdir()))}"
        ws.mkdir()
        return subprocess.run(
            [GOVERNOR, "run", *flags, "--policy", EDIT, "--workspace", str(ws),
             "--log", str(ws) + ".jsonl", "the task", "--", sys.executable, DEMO],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "MY_API_KEY": "add a small program"},
        )  # fmt: skip

    plain, quiet, loud = run(), run("-q"), run("-v")
    for done in (plain, quiet, loud):
        assert done.returncode == 0, done.stderr
        assert "status  completed" in done.stdout
    assert "permission Write hello.py: allowed" in plain.stderr
    # the stream's clock is the attempt's: no line later than the summary's duration
    last = float(plain.stderr.strip().splitlines()[-1].split("s]", 1)[0].strip("[ "))
    duration = float(plain.stdout.split("duration", 1)[1].split()[0])
    assert last <= duration, (last, duration)
    assert "says" not in plain.stderr and "tool " not in plain.stderr
    # the demo's hello.py runs its print at import: with no check that is its work, no finding
    assert "tamper" not in plain.stdout and "import-code-added" not in plain.stdout
    assert "permission" not in quiet.stderr and "[" not in quiet.stderr
    assert "says       I will [secret], check it" in loud.stderr
    assert "add a small program" not in loud.stderr
    assert "tool       Write hello.py: completed" in loud.stderr
    assert "permission Write hello.py: allowed" in loud.stderr
    both = subprocess.run(
        [GOVERNOR, "run", "-q", "-v", "the task"], capture_output=True, text=True, timeout=60
    )
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
