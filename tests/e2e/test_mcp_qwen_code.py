"""Qwen Code passing a job's MCP server on: the real mcp-server-time behind the
governor's relay, through the real ``governor run``, the loopback Chat
Completions stand-in scripted to call it.

Qwen Code names an MCP tool ``mcp__SERVER__TOOL`` and defers it: the model is
offered ``tool_search`` and ``tool_call``, not the tool, so the script first
selects the tools by name (again until the agent's MCP discovery, which goes on
beside the first prompt, has found them), then calls each through ``tool_call``.
Before each it asks permission titled with the arguments' JSON, of kind ``read``
(the server marks both tools ``readOnlyHint``) and naming the tool in
``_meta.toolName``: the governor decides that by the same ``[mcp]`` rules. A
refused permission ends Qwen's turn. In ``yolo`` (a policy that allows it) Qwen
asks nothing, and the relay alone decides each call: a refusal there is a tool
result the model reads.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from mcp_relay.mcp_harness import python_server
from npm_agents import MODULES, NODE_22, QWEN_CODE, Job, qwen_argv
from openai_standin import Call, OpenAIStandIn

from governor.audit.tally import Tally, tally

pytestmark = [pytest.mark.e2e, pytest.mark.npm_agent(QWEN_CODE, node=str(MODULES / NODE_22))]

GOVERNOR = str(Path(sys.executable).parent / "governor")

POLICY = """
capability = "edit-workspace"

[[mcp.servers]]
name = "time"
command = ["{time}", "--local-timezone", "UTC"]

[mcp.allow]
tools = ["time.get_current_time"]

[mcp.deny]
tools = [{{ tool = "time.convert_time", args = {{ target_timezone = "Europe/*" }} }}]
"""

TOOLS = "mcp__time__get_current_time,mcp__time__convert_time"
STEPS = [
    Call(("tool_search",), {"query": f"select:{TOOLS}"}, again_if="Not found"),
    Call(("tool_call",), {"name": "mcp__time__get_current_time", "arguments": {"timezone": "UTC"}}),
    Call(
        ("tool_call",),
        {
            "name": "mcp__time__convert_time",
            "arguments": {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Europe/Paris"},
        },
    ),
]


def _governor(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GOVERNOR, *args], env=env, capture_output=True, text=True, timeout=300
    )


async def _governor_run(
    job: Job, *extra: str, policy_extra: str = ""
) -> tuple[dict[str, Any], OpenAIStandIn, list[dict[str, Any]]]:
    """``governor run --json`` of Qwen Code with mcp-server-time, its model the
    stand-in playing `STEPS`: the outcome, the stand-in, the decision records."""
    policy = job.root / "policy.toml"
    policy.write_text(policy_extra + POLICY.format(time=python_server("mcp-server-time")))
    with OpenAIStandIn(STEPS) as model:
        kw = job.qwen(model.url)
        argv = ["run", "--json", "--policy", str(policy), "--workspace", str(job.workspace)]
        argv += ["--log", str(job.log), "--timeout", "120", *extra]
        argv += [a for name in kw["env"] for a in ("--env", name)]
        argv += ["What time is it in UTC, and in Paris at noon UTC?", "--", *qwen_argv()]
        environ = {**kw["environ"], "XDG_STATE_HOME": str(job.root / "state")}
        done = await trio.to_thread.run_sync(lambda: _governor(*argv, env=environ))
    assert done.stdout.strip(), done.stderr[-3000:]
    outcome: dict[str, Any] = json.loads(done.stdout)
    described = f"{model.describe()}\n{done.stderr[-3000:]}"
    assert outcome["status"] == "completed", f"{outcome}\n{described}"
    # it searched (again until its discovery had found them), then called each
    calls = model.tool_calls()
    assert calls[-2:] == ["tool_call", "tool_call"], described
    assert set(calls[:-2]) == {"tool_search"}, described
    return outcome, model, outcome["tool_calls"]  # its decision records, read from the log


def _of(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in records if r.get("kind") == kind]


def _answered(model: OpenAIStandIn) -> list[str]:
    """The tool results the model was sent holding mcp-server-time's answer."""
    results = [s.tool_messages[-1] for s in model.served if s.tool_messages]
    return [t for t in results if '"timezone":"UTC"' in t and '"datetime"' in t]


def _the_allowed_call(records: list[dict[str, Any]]) -> dict[str, Any]:
    call = _of(records, "mcp")[0]
    assert (call["subject"]["server"], call["subject"]["name"], call["verdict"]) == (
        "time", "get_current_time", "allow"
    )
    assert call["subject"]["arguments"] == {"timezone": "UTC"}
    assert call["rule"] == "mcp.allow: time.get_current_time"
    return call


async def test_qwen_asks_before_each_mcp_tool_and_the_mcp_rules_decide_and_the_relay_decides_again(
    job: Job,
) -> None:
    outcome, model, records = await _governor_run(job)
    described = model.describe()
    # Qwen asks before each MCP tool: its permission, titled with the arguments'
    # JSON and naming the tool in _meta, is decided by the [mcp] rules.
    asked = [
        (r["subject"].get("tool_name"), r["subject"]["tool_kind"], r["verdict"], r["rule"])
        for r in _of(records, "permission")
    ]
    assert asked == [
        ("mcp__time__get_current_time", "read", "allow", "mcp.allow: time.get_current_time"),
        ("mcp__time__convert_time", "read", "deny", "mcp.deny: time.convert_time (target_timezone=Europe/*)"),
    ], asked
    assert _of(records, "permission")[0]["subject"]["title"] == '{"timezone":"UTC"}'
    # The allowed one went through the relay to the real server, decided again
    # there; the refused one never reached the relay.
    (call,) = _of(records, "mcp")
    _the_allowed_call(records)
    # The server's answer came back to the model: the next request holds it. The
    # refusal (Reject) ended Qwen's turn: its model was not asked again.
    assert _answered(model), described
    assert "datetime" in model.served[-1].tool_messages[-1], described
    # each counts as an ask in the tally, as the outcome's does
    assert tally([*_of(records, "permission"), call]) == Tally(asked=3, allowed=2, refused=1)
    t = outcome["acp"]["tally"]
    assert t["asked"] == sum(len(_of(records, k)) for k in ("permission", "mcp", "network")), t
    # `governor audit` reads them back: the call per server, the refusal among the refused
    shown = _governor("audit", "--mcp", str(job.log))
    assert "allow    tools/call: time.get_current_time" in shown.stdout, shown
    assert "time: 1 call(s), 1 allowed, 0 refused or waiting" in shown.stdout, shown
    refused = _governor("audit", "--refused", str(job.log))
    assert "mcp.deny: time.convert_time (target_timezone=Europe/*)" in refused.stdout, refused
    # replay re-decides the permission by its tool name: under a policy that
    # allows the server's tools and refuses other zones, the refused one is allowed
    other = job.root / "other.toml"
    text = (job.root / "policy.toml").read_text().replace("Europe/*", "Asia/*")
    other.write_text(text.replace('["time.get_current_time"]', '["time.*"]'))
    replayed = _governor("audit", "replay", str(job.log), "--policy", str(other))
    assert "refused -> allowed [mcp.allow: time.*]" in replayed.stdout, replayed
    assert _governor("audit", "verify", str(job.log)).returncode == 0
    job.verified_log()


async def test_in_yolo_qwen_asks_nothing_and_the_relay_alone_refuses_the_denied_call(
    job: Job,
) -> None:
    outcome, model, records = await _governor_run(
        job, "--mode", "yolo", policy_extra="allow_mode_switch = true\n"
    )
    described = model.describe()
    assert outcome["acp"]["mode"]["id"] == "yolo", outcome["acp"]
    assert _of(records, "permission") == [], _of(records, "permission")
    # Both calls came to the relay; the allowed one reached the server ...
    allowed, denied = _of(records, "mcp")
    assert allowed == _the_allowed_call(records)
    assert _answered(model), described
    # ... the denied one did not, and the model read why.
    assert (denied["subject"]["name"], denied["verdict"], denied["rule"]) == (
        "convert_time", "deny", "mcp.deny: time.convert_time (target_timezone=Europe/*)"
    )
    assert denied["subject"]["arguments"]["target_timezone"] == "Europe/Paris"
    read = model.served[-1].tool_messages[-1]
    assert "Refused by the governor" in read and "Europe/*" in read, described
    assert tally([allowed, denied]) == Tally(asked=2, allowed=1, refused=1)
    shown = _governor("audit", "--mcp", str(job.log))
    assert "deny     tools/call: time.convert_time" in shown.stdout, shown
    assert "time: 2 call(s), 1 allowed, 1 refused or waiting" in shown.stdout, shown
    assert _governor("audit", "verify", str(job.log)).returncode == 0
    job.verified_log()
