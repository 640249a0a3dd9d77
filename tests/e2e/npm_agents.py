"""The real third-party ACP agents installed from npm by `.ci/agents`, and one test's folders.

The agents live in ``<repo>/.npm-agents``. When they are missing the tests skip
on a developer's machine (run ``.ci/agents`` once) but fail under CI, which must
have installed them: a green CI that drove no real agent would prove nothing.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from governor.audit.verify import read_lines, verify
from governor.outcome import Outcome
from governor.spec import AttemptSpec

REPO = Path(__file__).resolve().parents[2]
WIRETAP = Path(__file__).resolve().with_name("wiretap.py")
MODULES = REPO / ".npm-agents" / "node_modules"

TS_EXAMPLE = "@agentclientprotocol/sdk/dist/examples/agent.js"
CLAUDE_CODE_ACP = "@zed-industries/claude-code-acp/dist/index.js"
CLAUDE_AGENT_ACP = "@zed-industries/claude-agent-acp/dist/index.js"

CLAUDE_ENV = (
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
    "DISABLE_TELEMETRY",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    "IS_SANDBOX",
)
"""What the Claude adapters need besides the governor's base variables."""


def installed(relative: str) -> list[str]:
    """``["node", entry point]`` of an installed npm agent; skip (or fail under CI) if absent."""
    entry = MODULES / relative
    problem = None
    if shutil.which("node") is None:
        problem = "node is not on PATH"
    elif not entry.is_file():
        problem = f"{entry} is not installed (run .ci/agents)"
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must install the real ACP agents: {problem}", pytrace=False)
        pytest.skip(problem)
    return ["node", str(entry)]


@dataclass
class Job:
    """One test's folders: the workspace, a fresh HOME for the agent, the audit log."""

    root: Path
    workspace: Path
    home: Path
    log: Path
    events: list[tuple[str, dict[str, Any]]]

    @property
    def wire(self) -> Path:
        """Where `tapped` agents write the wire (see `wiretap`)."""
        return self.root / "wire.jsonl"

    def tapped(self, argv: Sequence[str]) -> list[str]:
        """``argv`` behind the wiretap relay (run it with ``sandbox_agent=False``)."""
        return [sys.executable, str(WIRETAP), str(self.wire), "--", *argv]

    @classmethod
    def under(cls, root: Path) -> Job:
        """Fresh folders under ``root``: workspace, HOME, audit log."""
        (root / "ws").mkdir()
        (root / "home").mkdir()
        return cls(root, root / "ws", root / "home", root / "audit.jsonl", [])

    def spec(
        self,
        argv: Sequence[str],
        *,
        environ: Mapping[str, str] | None = None,
        env: Sequence[str] = (),
        **kw: Any,
    ) -> AttemptSpec:
        """An attempt on this job's workspace, logging to its audit log and recording events."""
        base: dict[str, Any] = {
            "prompt": "Do the task.",
            "argv": list(argv),
            "workspace": self.workspace,
            "log": self.log,
            "timeout": 90,
            "capability": "edit-workspace",
            "environ": environ if environ is not None else self.environ(),
            "env": list(env),
            "on_event": lambda kind, info: self.events.append((kind, info)),
        }
        base.update(kw)
        return AttemptSpec(**base)

    def environ(self, **extra: str) -> dict[str, str]:
        """The environment the agent's variables are taken from: ours, with a fresh HOME."""
        keep = {k: os.environ[k] for k in ("PATH", "LANG", "TZ") if k in os.environ}
        return keep | {"HOME": str(self.home)} | extra

    def claude(self, url: str) -> dict[str, Any]:
        """`spec` keywords for a Claude adapter talking to the stand-in at ``url``."""
        environ = self.environ(
            ANTHROPIC_BASE_URL=url,
            ANTHROPIC_API_KEY="dummy",
            DISABLE_TELEMETRY="1",
            CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
            IS_SANDBOX="1",  # as root, an inherited IS_SANDBOX=yes breaks session/new
        )
        return {"environ": environ, "env": CLAUDE_ENV}

    def tool_calls(self, status: str | None = None) -> list[dict[str, Any]]:
        """The agent's tool-call reports seen as events (optionally of one status)."""
        return [
            info
            for kind, info in self.events
            if kind == "tool_call" and (status is None or info.get("status") == status)
        ]

    def verified_log(self) -> list[dict[str, Any]]:
        """The audit log's records, after checking its hash chain and that the attempt ended."""
        result = verify(read_lines(self.log))
        assert result.problem is None, result.problem
        assert result.unfinished == ()
        return [r for _, r, _ in read_lines(self.log) if r is not None]


def records(outcome: Outcome, kind: str) -> list[dict[str, Any]]:
    """The outcome's decision records of one kind (permission, read, write, terminal, unasked)."""
    return [r for r in outcome.tool_calls if r.get("kind") == kind]
