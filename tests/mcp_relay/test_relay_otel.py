"""The relay's `mcp` decisions in OpenTelemetry: a span per governed MCP request, sent
over OTLP/HTTP to the loopback receiver and decoded there, with the real
mcp-server-time behind the relay. Arguments never leave the governor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from mcp_harness import bound, client, governed, python_server
from otel_receiver import Receiver, attributes, needs_otel

from governor.ending.outcome import AcpReport, Outcome
from governor.observe import otel

POLICY = """
capability = "read-only"

[[mcp.servers]]
name = "time"
command = ["{time}", "--local-timezone", "UTC"]

[mcp.allow]
tools = ["time.get_current_time"]

[mcp.deny]
tools = ["time.convert_time"]
"""
SECRET = "Planted/secret-zone-7c41e9"


def _telemetry(url: str) -> otel.Telemetry:
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

    return otel.Telemetry(
        span_exporter=OTLPSpanExporter(endpoint=f"{url}/v1/traces"),
        metric_reader=PeriodicExportingMetricReader(
            OTLPMetricExporter(endpoint=f"{url}/v1/metrics"), export_interval_millis=3_600_000
        ),
    )


async def test_each_governed_mcp_call_is_a_span_with_server_tool_verdict_and_by_and_no_arguments(
    tmp_path: Path,
) -> None:
    needs_otel()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    policy = bound(POLICY.format(time=python_server("mcp-server-time")), workspace)
    with Receiver() as rx:
        telemetry = _telemetry(rx.url)
        trace = telemetry.attempt()
        async with governed(policy, tmp_path / "audit.jsonl", listener=trace) as g, client(
            g, "time"
        ) as session:
            fine = await session.call_tool("get_current_time", {"timezone": "UTC"})
            bad = await session.call_tool("get_current_time", {"timezone": SECRET})
            refused = await session.call_tool(
                "convert_time", {"source_timezone": SECRET, "time": "12:00", "target_timezone": "UTC"}
            )
        assert not fine.is_error and bad.is_error and refused.is_error
        trace.ended(Outcome("completed", acp=AcpReport(agent="Agent", preset="acp"), duration_s=1.0))
        assert telemetry.shutdown(timeout=30) is None
    spans = rx.spans()
    (root,) = [s for s in spans if s.name == "invoke_agent Agent"]
    calls = [s for s in spans if attributes(s.attributes).get("mcp.method.name") == "tools/call"]
    assert [s.name for s in calls] == ["tools/call get_current_time"] * 2 + ["tools/call convert_time"]
    assert {s.parent_span_id for s in calls} == {root.span_id}
    seen = [attributes(s.attributes) for s in calls]
    assert [(a["acp_governor.mcp.server"], a["gen_ai.tool.name"], a["acp_governor.verdict"],
             a["acp_governor.by"]) for a in seen] == [
        ("time", "get_current_time", "allow", "rule"),
        ("time", "get_current_time", "allow", "rule"),
        ("time", "convert_time", "deny", "rule"),
    ]
    assert seen[2]["acp_governor.rule"] == "mcp.deny: time.convert_time"
    # ok; the server's own error; refused by the governor (status code 2: error)
    assert [s.status.code for s in calls] == [0, 2, 2]
    assert [a.get("error.type") for a in seen] == [None, "tool_error", "refused"]
    # each span holds its decision's event, the record's own hash
    records = g.records()
    hashes = [attributes(s.events[0].attributes)["acp_governor.hash"] for s in calls]
    assert hashes == [r["hash"] for r in records]
    # the allowed calls' spans last until the server's answer: they end after they start
    assert all(s.end_time_unix_nano >= s.start_time_unix_nano for s in calls)
    counted = rx.metrics()["acp_governor.mcp.requests"]
    by: dict[tuple[Any, ...], int] = {}
    for a, v in counted:
        key = (a["acp_governor.mcp.server"], a["mcp.method.name"], a["acp_governor.verdict"])
        by[key] = by.get(key, 0) + v
    assert by == {("time", "tools/call", "allow"): 2, ("time", "tools/call", "deny"): 1}
    decisions = {(a["acp_governor.kind"], a["acp_governor.verdict"]): v
                 for a, v in rx.metrics()["acp_governor.decisions"]}  # fmt: skip
    assert decisions == {("mcp", "allow"): 2, ("mcp", "deny"): 1}
    # the arguments are in the log (as recorded) and nowhere in what was sent
    assert records[1]["subject"]["arguments"] == {"timezone": SECRET}
    assert SECRET.encode() not in rx.raw()
    assert g.verified()
