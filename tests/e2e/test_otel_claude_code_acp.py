"""OpenTelemetry from a real agent: claude-code-acp, driven by the loopback model
stand-in, through `governor run --otel` to an OTLP/HTTP receiver on loopback; what
arrives (decoded with `opentelemetry-proto`) is held to the audit log."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio
from npm_agents import CLAUDE_CODE_ACP, Job, installed
from otel_receiver import Receiver, attributes, needs_otel
from standin import StandIn, bash, read, write

pytestmark = [pytest.mark.e2e, pytest.mark.npm_agent(CLAUDE_CODE_ACP)]

SECRET = "planted-secret-value-c0ffee42"
DECIDED = ("permission", "read", "write", "terminal", "network")


async def test_a_real_agents_trace_has_a_span_per_tool_call_and_an_event_per_decision(
    job: Job,
) -> None:
    needs_otel()
    target = job.workspace / f"a-{SECRET}.txt"  # the secret is in a path the agent names
    steps = [write(str(target), "a\n"), bash("echo governed; ls"), read(str(target))]
    with StandIn(steps) as model, Receiver() as rx:
        kw = job.claude(model.url)
        names = [word for name in kw["env"] for word in ("--env", name)]
        environ = {**kw["environ"], "MY_SERVICE_TOKEN": SECRET, "OTEL_EXPORTER_OTLP_ENDPOINT": rx.url}
        argv = [str(Path(sys.executable).parent / "governor"), "run", "--otel", "--capability",
                "edit-workspace", "--workspace", str(job.workspace), "--log", str(job.log),
                "--events", "-", *names, "Do the task.", "--", *installed(CLAUDE_CODE_ACP)]  # fmt: skip
        done = await trio.run_process(argv, env=environ, capture_stdout=True, check=False)
    assert done.returncode == 0, done.stdout[-2000:]
    events = [json.loads(x) for x in done.stdout.decode().splitlines()]
    outcome = events[-1]["outcome"]
    assert outcome["status"] == "completed", outcome
    log = job.verified_log()
    spans = rx.spans()
    kinds = [attributes(s.attributes)["gen_ai.operation.name"] for s in spans]
    (root,) = [s for s, k in zip(spans, kinds, strict=True) if k == "invoke_agent"]
    tools = {
        attributes(s.attributes)["gen_ai.tool.call.id"]: s
        for s, k in zip(spans, kinds, strict=True)
        if k == "execute_tool"
    }
    assert len(tools) == len(spans) - 1  # one span per tool call id
    assert set(tools) == {e["id"] for e in events if e["type"] == "tool_call"}
    assert len(tools) >= 3

    # one trace, the outcome's and the log's
    assert log[0]["kind"] == "attempt-start" and log[0]["trace_id"] == outcome["trace_id"]
    assert {s.trace_id.hex() for s in spans} == {outcome["trace_id"]}
    assert {s.parent_span_id for s in tools.values()} == {root.span_id}

    # one event per decision record, same seqs and hashes
    decisions = [r for r in log if r["kind"] in DECIDED]
    seen = sorted(
        (attributes(e.attributes) for s in spans for e in s.events if e.name == "acp_governor.decision"),
        key=lambda a: a["acp_governor.seq"],
    )  # fmt: skip
    assert [(a["acp_governor.seq"], a["acp_governor.hash"]) for a in seen] == [
        (r["seq"], r["hash"]) for r in decisions
    ]
    assert len(decisions) >= 5

    assert SECRET.encode() not in rx.raw()
