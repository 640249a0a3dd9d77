"""`governor check` and `governor run` give the same verdict on the same job.

Both through the venv's real `governor` script; `governor run` with the bundled
demo agent. A job over the ceiling is refused by both with the same violations
in the same order (`run` before it starts, exit 2, nothing logged); a job that
fits is said to fit by `check` and started by `run`. The table holds each
thing the ceiling bounds, refused and allowed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

GOVERNOR = str(Path(sys.executable).parent / "governor")
SECRET = "--api-key=sk-live-0123456789abcdef"
REFUSED_BEFORE_START = 2


@dataclass(frozen=True)
class Job:
    name: str
    policy: str
    ceiling: str
    args: tuple[str, ...] = ()
    """Options both commands take: --agent-arg, --allow-host, --timeout, --capability."""
    refused: int = 0
    """How many violations; 0: the job fits."""


DEMO_ONLY = 'allowed_agents = ["demo"]\n'
MCP_SERVER = 'capability = "edit-workspace"\n[[mcp.servers]]\nname = "py"\ncommand = ["python3", "-c", "pass"]\n'
JOBS = [
    Job("fits", 'capability = "edit-workspace"\n', DEMO_ONLY),
    Job(
        "a policy host beyond allowed_hosts",
        '[network]\nallow = ["pypi.org"]\n',
        DEMO_ONLY + 'allow_network = true\nallowed_hosts = ["*.npmjs.org"]\n',
        refused=1,
    ),
    Job(
        "a policy host within allowed_hosts",
        '[network]\nallow = ["registry.npmjs.org:443"]\n',
        DEMO_ONLY + 'allow_network = true\nallowed_hosts = ["*.npmjs.org"]\n',
    ),
    Job(
        "an --allow-host beyond allowed_hosts",
        "",
        DEMO_ONLY + 'allowed_hosts = ["pypi.org"]\n',
        ("--allow-host", "pypi.org", "--allow-host", "evil.example:443"),
        refused=1,
    ),
    Job(
        "a keep outside keep_within",
        '[sandbox]\nkeep = ["~/tools/go", "/opt/sdk"]\n',
        DEMO_ONLY + 'keep_within = ["~/tools"]\n',
        refused=1,
    ),
    Job(
        "a limit over its max_",
        '[limits]\nmemory = "16G"\nprocesses = 64\n',
        DEMO_ONLY + 'max_memory = "8G"\nmax_processes = 512\n',
        refused=1,
    ),
    Job(
        "a --timeout over max_wall",
        "[limits]\nwall = 30\n",
        DEMO_ONLY + "max_wall = 60\n",
        ("--timeout", "600"),
        refused=1,
    ),
    Job("limits within their max_", "[limits]\nwall = 30\n", DEMO_ONLY + "max_wall = 60\n"),
    Job("raw args the ceiling forbids", "", DEMO_ONLY, (f"--agent-arg={SECRET}",), refused=1),
    Job(
        "raw args the ceiling allows",
        "",
        DEMO_ONLY + "allow_agent_args = true\n",
        ("--agent-arg=--steps=1",),
    ),
    Job(
        "a capability over the max",
        'capability = "full-access"\n',
        DEMO_ONLY + 'max_capability = "edit-workspace"\n',
        refused=1,
    ),
    Job(
        "a --capability over the max",
        "",
        DEMO_ONLY + 'max_capability = "read-only"\n',
        ("--capability", "edit-workspace"),
        refused=1,
    ),
    Job("an agent not allowed", "", 'allowed_agents = ["claude"]\n', refused=1),
    Job(
        "an MCP server the ceiling does not name, writable and on the network",
        MCP_SERVER + 'writable = true\nnetwork = ["pypi.org"]\n',
        DEMO_ONLY + 'mcp_servers = ["time"]\n',
        refused=3,
    ),
    Job(
        "an MCP server the ceiling names by name and command",
        MCP_SERVER,
        DEMO_ONLY + 'mcp_servers = [{ name = "py", command = ["python3", "-c"] }]\n',
    ),
    Job(
        "everything at once",
        'capability = "full-access"\n[network]\nask = ["pypi.org"]\n'
        '[sandbox]\nkeep = ["/opt/sdk"]\n[limits]\ntmp = "2G"\n',
        'allowed_agents = ["codex"]\nmax_capability = "read-only"\nmax_tmp = "1G"\n',
        (f"--agent-arg={SECRET}", "--allow-host", "example.org", "--timeout", "10"),
        refused=8,
    ),
]


def governor(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ACP_GOVERNOR_CEILING"}
    return subprocess.run(
        [GOVERNOR, *args], capture_output=True, text=True, timeout=300, env=env, cwd=cwd
    )


@pytest.mark.parametrize("job", JOBS, ids=[j.name for j in JOBS])
def test_check_and_run_give_the_same_verdict_and_violations_on_the_same_job(
    tmp_path: Path, job: Job
) -> None:
    policy, ceiling, ws, log = (tmp_path / n for n in ("job.toml", "c.toml", "ws", "audit.jsonl"))
    policy.write_text(job.policy)
    ceiling.write_text(job.ceiling)
    ws.mkdir()
    common = ("--agent", "demo", "--policy", str(policy), "--ceiling", str(ceiling), *job.args)
    checked = governor("check", *common, cwd=tmp_path)
    ran = governor(
        "run", *common, "--workspace", str(ws), "--log", str(log), "--json", "a task", cwd=tmp_path
    )

    said_by_check = [
        line.removeprefix("violation: ")
        for line in checked.stderr.splitlines()
        if line.startswith("violation: ")
    ]
    refusal = f"governor: refused by the ceiling ({ceiling} (--ceiling)): "
    said_by_run = [
        line.removeprefix(refusal) for line in ran.stderr.splitlines() if line.startswith(refusal)
    ]
    assert said_by_check == said_by_run, (checked.stderr, ran.stderr)
    assert len(said_by_check) == job.refused, checked.stderr
    if job.refused:
        assert checked.returncode == REFUSED_BEFORE_START
        assert ran.returncode == REFUSED_BEFORE_START, ran.stderr
        problems = [line for line in ran.stderr.splitlines() if line.startswith("governor: ")]
        assert len(problems) == job.refused, ran.stderr  # the ceiling's, and nothing else
        assert not log.exists()  # nothing started
    else:
        assert checked.returncode == 0 and "fits" in checked.stdout, checked.stderr
        assert ran.returncode != REFUSED_BEFORE_START, ran.stderr
        assert log.exists() and '"status"' in ran.stdout, ran.stderr  # it ran
    for done in (checked, ran):
        assert SECRET not in done.stdout + done.stderr
