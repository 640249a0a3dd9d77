"""`governor audit --mcp` through the real console script: per attempt, the servers
as they ran (name, command, writable, network), the tools each offered as the
relay saw its `tools/list` (and those it hid), and the calls decided; `--json`
the same items, typed. The log is written by the relay with mcp-server-time and
the rogue stand-in behind it."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from mcp_harness import bound, client, governed, python_server

from governor.policies.capability import Capability

GOVERNOR = str(Path(sys.executable).with_name("governor"))
ROGUE = Path(__file__).resolve().with_name("rogue_server.py")
PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "python3"

POLICY = """
capability = "edit-workspace"

[[mcp.servers]]
name = "time"
command = ["{time}", "--local-timezone", "UTC"]

[[mcp.servers]]
name = "rogue"
command = ["{python}", "{rogue}", "network"]
writable = true
network = ["example.com:443"]

[mcp.allow]
tools = ["time.get_current_time"]

[mcp.deny]
tools = ["time.convert_time"]
"""


def audit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([GOVERNOR, "audit", *args], capture_output=True, text=True, timeout=60)


async def test_audit_mcp_shows_each_attempts_servers_their_tools_and_the_calls_decided(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    time = python_server("mcp-server-time")
    policy = bound(POLICY.format(time=time, python=PYTHON, rogue=ROGUE), workspace)
    log = tmp_path / "audit.jsonl"
    async with governed(policy, log) as g, client(g, "time") as session:
        offered = [t.name for t in (await session.list_tools()).tools]
        await session.list_tools()  # the same list again: recorded once
        await session.call_tool("get_current_time", {"timezone": "UTC"})
        await session.call_tool("convert_time", {"source_timezone": "UTC", "time": "1:00", "target_timezone": "UTC"})
    assert g.verified()
    async with governed(policy, log, attempt="att-2") as g2, client(g2, "time") as session:
        await session.call_tool("convert_time", {"source_timezone": "UTC", "time": "1:00", "target_timezone": "UTC"})
    assert g2.verified()
    assert "convert_time" not in offered and "get_current_time" in offered
    (tools,) = g.records("mcp-tools")
    assert (tools["subject"]["server"], tools["subject"]["hidden"]) == ("time", ["convert_time"])
    assert sorted(tools["subject"]["tools"]) == sorted([*offered, "convert_time"])  # as the server listed

    shown = audit("--mcp", str(log))
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    first, second = lines.index(f"attempt att ({log})"), lines.index(f"attempt att-2 ({log})")
    att, att2 = lines[first:second], lines[second:]
    assert f"  server time: {time} --local-timezone UTC (read-only; network: none)" in att
    assert f"  server rogue: {PYTHON} {ROGUE} network (writable; network: example.com:443)" in att
    listed = ", ".join(tools["subject"]["tools"])
    assert f"  tools of time: {listed}; hidden: convert_time" in att
    assert any(line.endswith("allow    tools/call: time.get_current_time") for line in att)
    assert any(line.endswith("deny     tools/call: time.convert_time") for line in att)
    assert "  time: 2 call(s), 1 allowed, 1 refused or waiting" in att
    assert not any(line.startswith("  rogue:") for line in att)  # named, never called
    assert not any(line.startswith("  tools of") for line in att2)  # never listed there
    assert "  time: 1 call(s), 0 allowed, 1 refused or waiting" in att2
    assert lines[-1] == "3 MCP call(s) decided in 2 attempt(s)"

    as_json = audit("--mcp", "--json", str(log))
    assert as_json.returncode == 0, as_json.stderr
    items = json.loads(as_json.stdout)["mcp"]
    assert [(x["attempt"], x["type"], x["server"]) for x in items] == [
        ("att", "server", "time"),
        ("att", "server", "rogue"),
        ("att", "tools", "time"),
        ("att", "call", "time"),
        ("att", "call", "time"),
        ("att-2", "server", "time"),
        ("att-2", "server", "rogue"),
        ("att-2", "call", "time"),
    ]
    rogue = items[1]
    assert (rogue["command"], rogue["writable"], rogue["network"]) == (
        [PYTHON, str(ROGUE), "network"], True, ["example.com:443"]
    )
    assert items[2]["hidden"] == ["convert_time"] and items[2]["tools"] == tools["subject"]["tools"]
    assert [(x["verdict"], x["rule"]) for x in items if x["type"] == "call"] == [
        ("allow", "mcp.allow: time.get_current_time"),
        ("deny", "mcp.deny: time.convert_time"),
        ("deny", "mcp.deny: time.convert_time"),
    ]


async def test_a_writable_server_of_a_job_run_read_only_is_recorded_as_it_runs_read_only(
    tmp_path: Path,
) -> None:
    """``--capability read-only`` over a policy whose server is writable: the
    server's sandbox is read-only, and its record says so."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    text = POLICY.format(time=python_server("mcp-server-time"), python=PYTHON, rogue=ROGUE)
    policy = bound(text, workspace)
    async with governed(policy, tmp_path / "edit.jsonl") as g:
        pass
    assert [r["subject"]["writable"] for r in g.records("mcp-server")] == [False, True]
    async with governed(replace(policy, capability=Capability.READ_ONLY), tmp_path / "ro.jsonl") as g:
        pass
    assert [r["subject"]["writable"] for r in g.records("mcp-server")] == [False, False]
    assert g.verified()


async def test_a_token_in_a_servers_command_is_masked_in_its_record_and_the_view(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    secret = "sk-live-0123456789abcdefghij"
    text = POLICY.format(time=python_server("mcp-server-time"), python=PYTHON, rogue=ROGUE)
    text = text.replace('"network"]', f'"network", "--api-key={secret}"]')
    log = tmp_path / "audit.jsonl"
    async with governed(bound(text, workspace), log) as g:
        pass
    assert g.verified()
    (_, rogue) = g.records("mcp-server")
    assert rogue["subject"]["command"][:3] == [PYTHON, str(ROGUE), "network"]
    assert secret not in log.read_text()
    shown = audit("--mcp", str(log))
    assert shown.returncode == 0 and "server rogue:" in shown.stdout and secret not in shown.stdout
