"""Shared helpers: real governed attempts (the demo agent, or the scripted one)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from governor.attempt.lifecycle import run_attempt
from governor.ending.outcome import Outcome
from governor.job.spec import AttemptSpec
from governor.policies.policy import parse_policy

HERE = Path(__file__).parent
SCRIPTED = HERE / "scripted_agent.py"
EDIT = parse_policy('capability = "edit-workspace"', "edit.toml")


def demo_spec(tmp_path: Path, log: Path, **kw: Any) -> AttemptSpec:
    """The bundled demo agent at edit-workspace, logging to ``log``. The agent
    process runs outside the agent sandbox (these tests are about the log; its
    commands still run in the sandbox)."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    base: dict[str, Any] = {
        "prompt": "make a hello program",
        "agent": "demo",
        "workspace": ws,
        "policy": EDIT,
        "log": log,
        "timeout": 60,
        "sandbox_agent": False,
    }
    base.update(kw)
    return AttemptSpec(**base)


async def demo_attempts(tmp_path: Path, count: int = 2, **kw: Any) -> tuple[Path, list[Outcome]]:
    """``count`` demo attempts appended to one log."""
    log = tmp_path / "audit.jsonl"
    outcomes = [await run_attempt(demo_spec(tmp_path, log, **kw)) for _ in range(count)]
    return log, outcomes


def scripted_spec(
    tmp_path: Path,
    steps: list[Any],
    *,
    received: Path | None = None,
    extra_args: list[str] | None = None,
    **kw: Any,
) -> AttemptSpec:
    """The scripted agent (tests/audit/scripted_agent.py) playing ``steps``."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps))
    argv = [sys.executable, str(SCRIPTED), "--script", str(script)]
    if received is not None:
        argv += ["--received", str(received)]
    base: dict[str, Any] = {
        "prompt": "play the script",
        "argv": argv + list(extra_args or []),
        "workspace": ws,
        "policy": EDIT,
        "log": tmp_path / "audit.jsonl",
        "timeout": 60,
        "sandbox_agent": False,
    }
    base.update(kw)
    return AttemptSpec(**base)


def log_lines(path: Path) -> list[str]:
    """The log's lines (split at newlines only, as JSON lines are)."""
    text = path.read_text(encoding="utf-8")
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def records(path: Path) -> list[dict[str, Any]]:
    """Every record of a log that parses."""
    out = []
    for line in log_lines(path):
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out
