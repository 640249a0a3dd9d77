"""Every decision is written to the audit log before it is answered: one record
per decision (one per part of a compound command), before a session exists as
well as after."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pytest
import trio

from governor.acp.dispatch import begin, reply
from governor.audit.log import AuditLog
from governor.gate.approver import Unattended
from governor.gate.gatekeeper import Gate
from governor.policies.policy import parse_policy

COMMANDS = {"echo hi": 1, "git status; pytest -q": 2, "ls && cat a | grep b": 3}
"""Command -> the parts it is decided in (one record each)."""


def permission(command: str) -> dict[str, Any]:
    return {
        "sessionId": "s1",
        "toolCall": {
            "toolCallId": f"call {command}",
            "title": f"Run `{command}`",
            "kind": "execute",
            "rawInput": {"command": command},
        },
        "options": [
            {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
            {"optionId": "no", "name": "No", "kind": "reject_once"},
        ],
    }


@pytest.mark.parametrize("session", [None, "s1"], ids=["before session/new", "in a session"])
def test_each_decision_has_its_records_with_or_without_a_session(
    tmp_path: Path, session: str | None
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("n\n")
    log = tmp_path / "audit.jsonl"

    async def main() -> tuple[list[bytes], list[dict[str, Any]]]:
        policy = parse_policy('capability = "edit-workspace"\n').bind(str(ws))
        gov = Gate(policy, AuditLog(log, "att"), Unattended())
        gov.session_id = session
        answers = []
        requests = [("session/request_permission", permission(c)) for c in COMMANDS]
        requests.append(("fs/read_text_file", {"sessionId": "s1", "path": str(ws / "notes.txt")}))
        for n, (method, params) in enumerate(requests):
            before = len(gov.audit.records)
            result = begin(gov.routes(), method, params)
            if inspect.isawaitable(result):
                result = await result
            # written before the answer exists
            assert len(gov.audit.records) > before, method
            answers.append(reply(n, result))
        gov.audit.close()
        return answers, gov.audit.records

    answers, records = trio.run(main)
    assert all(b'"result"' in a for a in answers), answers
    by_request: dict[int, int] = {}
    for r in records:
        by_request[r["request"]] = by_request.get(r["request"], 0) + 1
        assert ("session" in r) is (session is not None)
        assert r["verdict"] == "allow" and r["rule"] and r["reason"]
    assert list(by_request.values()) == [*COMMANDS.values(), 1]
    assert [r["kind"] for r in records][-1] == "read"


MCP_POLICY = """
capability = "edit-workspace"

[[mcp.servers]]
name = "time"
command = ["mcp-server-time"]

[mcp.deny]
tools = ["time.convert_time"]
"""


def _qwen_mcp_permission(meta: object) -> dict[str, Any]:
    """As Qwen Code asks before an MCP tool: titled with the arguments' JSON, the
    tool named in ``_meta.toolName``."""
    params = permission("x")
    params["toolCall"] = {
        "toolCallId": "call_1",
        "title": '{"time":"12:00"}',
        "kind": "read",
        "rawInput": {"time": "12:00"},
        "_meta": meta,
    }
    return params


@pytest.mark.parametrize(
    ("meta", "verdict", "rule", "named"),
    [
        ({"toolName": "mcp__time__convert_time"}, "deny", "mcp.deny: time.convert_time", True),
        # no name, or one that is not text: the request is what its kind says
        (None, "allow", "kind: read", False),
        ({"toolName": ["mcp__time__convert_time"]}, "allow", "kind: read", False),
    ],
)
def test_a_permission_naming_an_mcp_tool_in_its_meta_is_decided_by_the_mcp_rules_and_records_the_name(
    tmp_path: Path, meta: object, verdict: str, rule: str, named: bool
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()

    async def main() -> tuple[bytes, list[dict[str, Any]]]:
        policy = parse_policy(MCP_POLICY).bind(str(ws))
        gov = Gate(policy, AuditLog(tmp_path / "audit.jsonl", "att"), Unattended())
        result = begin(gov.routes(), "session/request_permission", _qwen_mcp_permission(meta))
        if inspect.isawaitable(result):
            result = await result
        gov.audit.close()
        return reply(1, result), gov.audit.records

    answer, records = trio.run(main)
    (record,) = records
    assert (record["verdict"], record["rule"]) == (verdict, rule)
    assert (b'"no"' if verdict == "deny" else b'"yes"') in answer
    assert ("tool_name" in record["subject"]) is named
    if named:
        assert record["subject"]["tool_name"] == "mcp__time__convert_time"
