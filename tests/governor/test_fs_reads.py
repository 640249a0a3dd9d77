"""Governed reads on real files: how a path is resolved, what a symlink can
reach, and a FIFO that must not block the governor."""

from __future__ import annotations

import inspect
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from governor.acp.dispatch import begin, reply
from governor.audit.log import AuditLog
from governor.gate.approver import Unattended
from governor.gate.file_access import resolve
from governor.gate.gatekeeper import Gate
from governor.policies.policy import parse_policy

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A workspace with symlinks in and out of it, and a sibling outside."""
    ws = tmp_path / "ws"
    (ws / "src" / "deep").mkdir(parents=True)
    (ws / "src" / "deep" / "file.txt").write_text("inside\n")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("outside\n")
    (ws / "to-outside").symlink_to(tmp_path / "outside" / "secret.txt")
    (ws / "dir-outside").symlink_to(tmp_path / "outside")
    (ws / "to-inside").symlink_to("src/deep/file.txt")  # relative
    (ws / "up-and-in").symlink_to("../ws/src")
    (ws / "dangling").symlink_to(tmp_path / "nowhere" / "x")
    return ws


CASES = [
    "src/deep/file.txt",
    "src/deep",
    "to-outside",
    "dir-outside/secret.txt",
    "to-inside",
    "up-and-in/deep/file.txt",
    "dangling",
    "missing.txt",
    "dir-outside/missing.txt",
    "src/deep/file.txt/not-a-dir",
    "src/../src/./deep//file.txt",
]


@pytest.mark.parametrize("relative", CASES)
def test_resolve_agrees_with_realpath(tree: Path, relative: str) -> None:
    path = f"{tree}/{relative}"
    assert resolve(path) == os.path.realpath(path)


def governed_read(ws: Path, log: Path, path: str) -> bytes:
    async def main() -> bytes:
        policy = parse_policy('capability = "edit-workspace"\n').bind(str(ws), None, protected=())
        gov = Gate(policy, AuditLog(log, "att"), Unattended())
        gov.session_id = "s"
        params = {"sessionId": "s", "path": path}
        result = begin(gov.routes(), "fs/read_text_file", params)
        if inspect.isawaitable(result):  # a refusal is recorded first, then answered
            result = await result
        return reply(1, result)

    return trio.run(main)


def test_a_symlink_is_judged_by_where_it_points(tree: Path, tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    inside = governed_read(tree, log, f"{tree}/to-inside")
    assert b'"content":"inside\\n"' in inside
    for attack in ("to-outside", "dir-outside/secret.txt"):
        answer = governed_read(tree, log, f"{tree}/{attack}")
        assert b'"error"' in answer and b"outside\\n" not in answer, answer
    assert b"outside\n" not in log.read_bytes()  # refused, and its content nowhere


def test_a_fifo_in_the_workspace_is_refused_without_blocking(tree: Path) -> None:
    """Opening a FIFO for reading blocks until a writer comes; the governor answers
    at once instead. Run in a child process so that a regression shows as a
    timeout, not as a hung test run."""
    fifo = tree / "src" / "pipe"
    os.mkfifo(fifo)
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from governor.gate.file_access import FileAccessError, read_text\n"
        "try:\n"
        "    read_text(sys.argv[2])\n"
        "except FileAccessError as e:\n"
        "    print('refused:', e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(REPO), str(fifo)],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert done.stdout.strip() == f"refused: {fifo} is not a regular file", done.stderr
    (tree / "src" / "plain").write_text("plain\n")  # the neighbour: a plain file reads
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            code.replace("read_text(sys.argv[2])", "print(read_text(sys.argv[2]), end='')"),
            str(REPO),
            str(tree / "src" / "plain"),
        ],
        capture_output=True,
        text=True,
        timeout=20,
        check=False,
    )
    assert done.stdout == "plain\n", done.stderr


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.parametrize("size", [0, 220, 64 * 1024 + 1, 300 * 1024])
def test_small_and_large_files_read_whole_and_by_lines_without_leaking_descriptors(
    tmp_path: Path, size: int
) -> None:
    """A file up to 256 KiB is read at once, a larger one in a worker thread: both
    give the whole text, or the lines asked for, and close what they opened."""
    ws = tmp_path / "ws"
    ws.mkdir()
    lines = [f"line {i} " + "x" * (i % 50) + "\n" for i in range(100_000)]
    text = "".join(lines)[:size]
    target = ws / "file.txt"
    target.write_text(text)
    log = tmp_path / "audit.jsonl"

    async def main() -> list[bytes]:
        policy = parse_policy('capability = "edit-workspace"\n').bind(str(ws), None, protected=())
        gov = Gate(policy, AuditLog(log, "att"), Unattended())
        gov.session_id = "s"
        out = []
        for extra in ({}, {"line": 3, "limit": 2}):
            result = begin(
                gov.routes(), "fs/read_text_file", {"sessionId": "s", "path": str(target), **extra}
            )
            if inspect.isawaitable(result):
                result = await result
            out.append(reply(1, result))
        gov.audit.close()
        return out

    before = open_fds()
    for _ in range(3):
        whole, some = trio.run(main)
    assert open_fds() == before
    assert json.loads(whole)["result"]["content"] == text
    assert json.loads(some)["result"]["content"] == "".join(text.splitlines(keepends=True)[2:4])


def test_a_file_that_reports_no_size_is_read_to_its_end() -> None:
    """/proc files say they are empty and give a page or so per read: the whole
    text still comes back (here this process's maps, several pages under pytest)."""
    from governor.gate.file_access import read_text

    path = "/proc/self/maps"
    assert os.stat(path).st_size == 0
    text = read_text(path)
    with open(path) as f:
        whole = f.read()
    assert len(text) > 8192 and len(whole) > 8192
    # Mappings change as Python allocates; the first and the last line are stable.
    assert text.splitlines()[0] == whole.splitlines()[0]
    assert text.splitlines()[-1] == whole.splitlines()[-1]
