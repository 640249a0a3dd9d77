"""A finished attempt leaves the workspace as the agent left it: no placeholder
of a protected name, nothing immutable -- checked in the same process, right
after `run_attempt` returns (a library caller deletes or reuses the workspace
at once), not only when the process exits."""

from __future__ import annotations

import fcntl
import os
import struct
import sys
from pathlib import Path

from governor.attempt.lifecycle import run_attempt
from governor.job.spec import AttemptSpec
from governor.policies.policy import parse_policy

FLOOD = Path(__file__).resolve().parents[2] / "bench" / "flood_agent.py"
EDIT = parse_policy('capability = "edit-workspace"', "test")
FS_IOC_GETFLAGS = 0x80086601
FS_IMMUTABLE_FL = 0x10


def immutable(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        flags = struct.unpack("i", fcntl.ioctl(fd, FS_IOC_GETFLAGS, b"\0" * 4))[0]
    except OSError:
        return False
    finally:
        os.close(fd)
    return bool(flags & FS_IMMUTABLE_FL)


async def test_a_sandboxed_attempt_leaves_no_placeholder_behind(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "flood-read.txt").write_text("flood me\n")
    before = set(os.listdir(ws))
    outcome = await run_attempt(
        AttemptSpec(
            prompt="flood",
            argv=[sys.executable, str(FLOOD), "3"],
            workspace=ws,
            policy=EDIT,
            log=tmp_path / "audit.jsonl",
            timeout=60,
        )
    )
    assert outcome.status == "completed", outcome.reason
    assert outcome.acp is not None and outcome.acp.sandboxed_agent
    left = set(os.listdir(ws))
    stuck = sorted(name for name in left if immutable(ws / name))
    assert stuck == [] and left - before <= {"src"}, sorted(left - before)
