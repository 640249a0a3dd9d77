"""The relay with real PyPI servers nobody here wrote (mcp-server-time, mcp-server-git),
driven by the official SDK's client spawning the shim as an agent does."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from mcp_harness import bound, client, governed, python_server

from governor.policies.policy import parse_policy

TIME_POLICY = """
capability = "read-only"

[[mcp.servers]]
name = "time"
command = ["{time}", "--local-timezone", "UTC"]

[mcp.allow]
tools = ["time.get_current_time"]

[mcp.deny]
tools = ["time.convert_time"]
"""


def _text(result: object) -> str:
    return " ".join(getattr(c, "text", "") for c in getattr(result, "content", []))


async def test_an_allowed_call_reaches_the_server_and_a_denied_one_is_refused_and_recorded(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    policy = bound(TIME_POLICY.format(time=python_server("mcp-server-time")), workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "time") as session:
        allowed = await session.call_tool("get_current_time", {"timezone": "UTC"})
        assert not allowed.is_error, _text(allowed)
        assert '"timezone": "UTC"' in _text(allowed) or "UTC" in _text(allowed)
        refused = await session.call_tool(
            "convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"},
        )
        assert refused.is_error
        assert "Refused by the governor" in _text(refused)
        assert "time.convert_time" in _text(refused)
    records = g.records()
    assert [(r["subject"]["name"], r["verdict"]) for r in records] == [
        ("get_current_time", "allow"),
        ("convert_time", "deny"),
    ]
    assert records[1]["rule"] == "mcp.deny: time.convert_time"
    assert records[0]["subject"]["arguments"] == {"timezone": "UTC"}
    assert [k for k, _ in g.events].count("mcp") == 2
    tally = g.gate.audit.tallier.tally()
    assert (tally.asked, tally.allowed, tally.refused) == (2, 1, 1)
    assert g.verified()
    # `governor audit --mcp` reads them back, per server
    shown = subprocess.run(
        [str(Path(sys.executable).with_name("governor")), "audit", "--mcp", str(g.log)],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout
    assert "allow    tools/call: time.get_current_time" in shown
    assert "deny     tools/call: time.convert_time" in shown
    assert "time: 2 call(s), 1 allowed, 1 refused or waiting" in shown


async def test_a_denied_tool_is_absent_from_tools_list_and_an_allowed_one_is_there(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    policy = bound(TIME_POLICY.format(time=python_server("mcp-server-time")), workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "time") as session:
        names = [t.name for t in (await session.list_tools()).tools]
    assert "get_current_time" in names
    assert "convert_time" not in names


GIT_POLICY = """
capability = "edit-workspace"

[[mcp.servers]]
name = "git"
command = ["{git}", "--repository", "{repo}"]
writable = true

[mcp.allow]
tools = ["git.git_status", "git.git_log", "git.git_add"]

[mcp.deny]
tools = [{{ tool = "git.git_add", args = {{ files = "*secret*" }} }}]
"""


def _repo(workspace: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(workspace), *args], check=True, capture_output=True)

    git("init", "-q")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "first")
    (workspace / "a.txt").write_text("a\n")
    (workspace / "secret.txt").write_text("s\n")


async def test_git_calls_are_decided_by_their_arguments_and_the_server_runs_in_its_sandbox(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    _repo(workspace)
    text = GIT_POLICY.format(git=python_server("mcp-server-git"), repo=workspace)
    async with governed(bound(text, workspace), tmp_path / "audit.jsonl") as g, client(g, "git") as session:
        status = await session.call_tool("git_status", {"repo_path": str(workspace)})
        assert not status.is_error, _text(status)
        assert "a.txt" in _text(status)
        added = await session.call_tool("git_add", {"repo_path": str(workspace), "files": ["a.txt"]})
        assert not added.is_error, _text(added)
        refused = await session.call_tool(
            "git_add", {"repo_path": str(workspace), "files": ["secret.txt"]}
        )
        assert refused.is_error and "Refused by the governor" in _text(refused)
        # unlisted: asked, and unattended an ask is refused
        commit = await session.call_tool(
            "git_commit", {"repo_path": str(workspace), "message": "x"}
        )
        assert commit.is_error and "Refused by the governor" in _text(commit)
    staged = subprocess.run(
        ["git", "-C", str(workspace), "diff", "--cached", "--name-only"],
        capture_output=True, text=True, check=True,
    ).stdout.split()
    assert staged == ["a.txt"]  # the allowed add happened, the refused one never reached git
    verdicts = [(r["subject"]["name"], r["verdict"]) for r in g.records()]
    assert verdicts == [
        ("git_status", "allow"), ("git_add", "allow"), ("git_add", "deny"), ("git_commit", "deny")
    ]
    assert g.verified()


async def test_a_server_not_writable_cannot_change_the_workspace_even_when_its_call_is_allowed(
    tmp_path: Path,
) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    _repo(workspace)
    text = GIT_POLICY.format(git=python_server("mcp-server-git"), repo=workspace)
    text = text.replace("writable = true\n", "")
    async with governed(bound(text, workspace), tmp_path / "audit.jsonl") as g, client(g, "git") as session:
        added = await session.call_tool("git_add", {"repo_path": str(workspace), "files": ["a.txt"]})
        assert added.is_error and "Read-only file system" in _text(added)
        status = await session.call_tool("git_status", {"repo_path": str(workspace)})
        assert not status.is_error and "a.txt" in _text(status)  # reading still works
    assert [r["verdict"] for r in g.records()] == ["allow", "allow"]
    assert not (workspace / ".git" / "index").exists() or subprocess.run(
        ["git", "-C", str(workspace), "diff", "--cached", "--name-only"],
        capture_output=True, text=True, check=True,
    ).stdout.split() == []


async def test_replay_re_decides_the_mcp_calls_under_another_policy(tmp_path: Path) -> None:
    import json

    from governor.audit.replay import replay

    workspace = tmp_path / "ws"
    workspace.mkdir()
    time = python_server("mcp-server-time")
    log = tmp_path / "audit.jsonl"
    async with governed(bound(TIME_POLICY.format(time=time), workspace), log) as g, client(g, "time") as session:
        await session.call_tool("get_current_time", {"timezone": "UTC"})
        await session.call_tool("convert_time", {"source_timezone": "UTC", "time": "1:00", "target_timezone": "UTC"})
    g.verified()
    lines = [(n, json.loads(line)) for n, line in enumerate(log.read_text().splitlines(), 1)]
    stricter = TIME_POLICY.format(time=time).replace('tools = ["time.get_current_time"]', "tools = []")
    stricter = stricter.replace('tools = ["time.convert_time"]', 'tools = ["time.get_*"]')
    (result,) = replay(lines, parse_policy(stricter, "stricter.toml"))
    changes = [(c.kind, c.subject, c.label, c.rule) for c in result.changes]
    # convert_time: no rule names it now, so read-only asks, and unattended an ask
    # is a refusal, as before: no change
    assert changes == [("mcp", "time.get_current_time", "allowed -> refused", "mcp.deny: time.get_*")]
    assert result.actions == 2 and result.skipped == ()
