"""`governor.observe.otel` driven in process: spans and metrics kept in memory (the SDK's
in-memory exporter and reader), fed by a real attempt of the demo agent or by
events written here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from otel_receiver import needs_otel

from governor.attempt.lifecycle import run_attempt
from governor.boundary.secrets import Masker
from governor.ending.outcome import AcpReport, Outcome
from governor.job.spec import AttemptSpec, RefusedBeforeStart
from governor.observe import otel
from governor.policies.policy import parse_policy

EDIT = parse_policy('capability = "edit-workspace"', "test")


class Memory:
    """A `Telemetry` whose spans and metrics stay in memory."""

    def __init__(self) -> None:
        needs_otel()
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        self.exporter = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        self.telemetry = otel.Telemetry(span_exporter=self.exporter, metric_reader=self.reader)

    def finish(self) -> tuple[list[Any], dict[str, list[tuple[dict[str, Any], int]]]]:
        """The spans ended, and each counter's points (attributes, value)."""
        data = self.reader.get_metrics_data()
        counters: dict[str, list[tuple[dict[str, Any], int]]] = {}
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    counters.setdefault(m.name, []).extend(
                        (dict(p.attributes), p.value) for p in m.data.data_points
                    )
        assert self.telemetry.shutdown() is None
        return list(self.exporter.get_finished_spans()), counters


def test_a_traced_library_attempt_carries_its_trace_id_into_the_log_and_the_outcome(
    tmp_path: Path,
) -> None:
    memory = Memory()
    ws = tmp_path / "ws"
    ws.mkdir()
    seen: list[str] = []
    trace = memory.telemetry.attempt()
    spec = trace.traced(
        AttemptSpec(
            prompt="make hello",
            agent="demo",
            workspace=ws,
            policy=EDIT,
            log=tmp_path / "audit.jsonl",
            timeout=60,
            on_event=lambda kind, info: seen.append(kind),
        )
    )
    import trio

    outcome = trio.run(run_attempt, spec)
    trace.ended(outcome)
    spans, counters = memory.finish()
    assert outcome.trace_id == trace.trace_id and seen[0] == "attempt"  # its own listener too
    assert {format(s.context.trace_id, "032x") for s in spans} == {trace.trace_id}
    assert [(a["acp_governor.status"], v) for a, v in counters["acp_governor.attempts"]] == [
        ("completed", 1)
    ]
    unasked = {a["acp_governor.kind"]: v for a, v in counters["acp_governor.unasked"]}
    assert unasked == {"unasked": 1}


def outcome(status: str = "completed", **kw: Any) -> Outcome:
    return Outcome(status, acp=AcpReport(agent="Agent", preset="acp"), duration_s=1.0, **kw)


def test_a_tool_call_still_open_at_the_end_is_ended_with_the_attempt() -> None:
    memory = Memory()
    trace = memory.telemetry.attempt()
    trace("attempt", {"id": "a-1", "agent": "Agent", "log": "/logs/a.jsonl"})
    trace("tool_call", {"id": "t1", "title": "Run tests", "kind": "execute", "status": "pending"})
    trace(
        "tool_call", {"id": "t1", "title": "Run tests", "kind": "execute", "status": "in_progress"}
    )
    trace.ended(outcome())
    spans, _ = memory.finish()
    (tool,) = [s for s in spans if s.name == "execute_tool execute"]
    assert tool.attributes["acp_governor.tool.status"] == "in_progress"
    (root,) = [s for s in spans if s.name == "invoke_agent Agent"]
    assert tool.parent.span_id == root.context.span_id and tool.end_time <= root.end_time


def test_a_decision_that_names_a_tool_call_opens_its_span_at_that_first_mention() -> None:
    memory = Memory()
    trace = memory.telemetry.attempt()
    record = {"seq": 2, "time": 1796139056.25, "kind": "permission", "verdict": "deny",
              "by": "policy", "rule": "deny: rm *", "reason": "denied", "hash": "ab" * 32,
              "subject": {"tool_call": "t9", "tool_kind": "delete", "title": "rm -rf x"}}  # fmt: skip
    trace("permission", {"records": [record]})
    trace("tool_call", {"id": "t9", "title": "rm -rf x", "kind": "delete", "status": "failed"})
    trace.ended(outcome())
    spans, counters = memory.finish()
    (tool,) = [s for s in spans if s.name == "execute_tool delete"]
    (event,) = tool.events
    assert event.name == "acp_governor.decision" and event.timestamp == 1796139056250000000
    assert event.attributes["acp_governor.hash"] == "ab" * 32
    assert event.attributes["acp_governor.rule"] == "deny: rm *"
    assert not tool.status.is_ok
    assert counters["acp_governor.decisions"] == [
        ({"acp_governor.kind": "permission", "acp_governor.verdict": "deny"}, 1)
    ]


def test_open_tool_spans_are_bounded_the_oldest_ended_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    memory = Memory()
    monkeypatch.setattr(otel, "OPEN_TOOL_SPANS", 8)  # (2,048 would overflow the batch queue here)
    trace = memory.telemetry.attempt()
    for i in range(8 + 3):
        trace("tool_call", {"id": f"t{i}", "kind": "read", "status": "pending"})
    assert list(trace._tools) == [f"t{i}" for i in range(3, 11)]
    trace.ended(outcome())
    spans, _ = memory.finish()
    ended_first = sorted(spans, key=lambda s: s.end_time)[:3]
    assert [s.attributes["gen_ai.tool.call.id"] for s in ended_first] == ["t0", "t1", "t2"]
    assert len(spans) == 8 + 3 + 1


def test_a_failed_attempt_is_an_error_span_with_its_reason_masked() -> None:
    memory = Memory()
    trace = memory.telemetry.attempt(Masker(values=("hunter2-secret-value",)))
    trace.ended(outcome("failed", reason="the agent printed hunter2-secret-value and died"))
    spans, _ = memory.finish()
    (root,) = spans
    assert root.attributes["error.type"] == "failed" and not root.status.is_ok
    assert "hunter2" not in str(root.attributes) and "hunter2" not in str(root.status.description)


def test_a_refusal_before_start_ends_the_span_in_error() -> None:
    memory = Memory()
    trace = memory.telemetry.attempt()
    trace.refused(["the workspace does not exist or is not a directory: /nope"])
    trace("tool_call", {"id": "late", "kind": "read", "status": "pending"})  # ignored: ended
    spans, counters = memory.finish()
    (root,) = spans
    assert root.attributes["acp_governor.status"] == "refused" and not root.status.is_ok
    assert counters["acp_governor.attempts"] == [({"acp_governor.status": "refused"}, 1)]


def test_export_is_wanted_with_the_flag_or_the_endpoint_unless_the_sdk_is_disabled() -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    assert otel.wanted(True, {}) and otel.wanted(False, endpoint)
    assert not otel.wanted(False, {}) and not otel.wanted(
        False, {"OTEL_EXPORTER_OTLP_ENDPOINT": ""}
    )
    assert not otel.wanted(True, {**endpoint, "OTEL_SDK_DISABLED": "true"})


def test_without_the_extra_telemetry_is_an_error_naming_the_install_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(otel, "_MISSING", ModuleNotFoundError("No module named 'opentelemetry'"))
    with pytest.raises(otel.OtelMissing, match=r"pip install 'acp-governor\[otel\]'"):
        otel.Telemetry()
    with pytest.raises(RefusedBeforeStart) as e:
        otel.for_run(True, Masker(), {})
    assert e.value.problems[0].startswith("--otel: ")
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    assert otel.for_run(False, Masker(), endpoint) is None  # the variable alone: a warning
    assert "pip install 'acp-governor[otel]'" in capsys.readouterr().err


def test_a_setting_the_sdk_refuses_stops_an_otel_run_and_only_warns_otherwise(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    needs_otel()
    monkeypatch.setenv("OTEL_METRIC_EXPORT_INTERVAL", "-5")
    with pytest.raises(RefusedBeforeStart) as e:
        otel.for_run(True, Masker(), {})
    assert e.value.problems[0].startswith("--otel: OpenTelemetry cannot start: interval value")
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"}
    assert otel.for_run(False, Masker(), endpoint) is None
    assert "OpenTelemetry cannot start" in capsys.readouterr().err


def test_a_request_that_waits_for_a_person_is_an_event_before_its_decision(
    tmp_path: Path,
) -> None:
    memory = Memory()
    ws = tmp_path / "ws"
    ws.mkdir()
    asking = parse_policy('capability = "edit-workspace"\n[ask]\ntools = ["execute"]', "ask.toml")
    trace = memory.telemetry.attempt()
    spec = AttemptSpec(
        prompt="make hello",
        agent="demo",
        workspace=ws,
        policy=asking,
        log=tmp_path / "audit.jsonl",
        timeout=60,
        approver=lambda ask: True,
    )
    import trio

    trace.ended(trio.run(run_attempt, trace.traced(spec)))
    spans, _ = memory.finish()
    (root,) = [s for s in spans if s.attributes["gen_ai.operation.name"] == "invoke_agent"]
    (waiting,) = [e for e in root.events if e.name == "acp_governor.waiting"]
    assert waiting.attributes["acp_governor.kind"] == "permission"
    (run,) = [s for s in spans if s.attributes.get("gen_ai.tool.call.id") == "run"]
    # the request's records, one per part: the part the person settled, and the command's
    (decided,) = [e for e in run.events if e.attributes["acp_governor.by"] == "person"]
    assert decided.attributes["acp_governor.rule"] == "ask: tool execute"
    assert waiting.timestamp <= decided.timestamp


def test_a_mention_after_a_tool_calls_end_is_not_a_second_span_of_it() -> None:
    memory = Memory()
    trace = memory.telemetry.attempt()
    trace("tool_call", {"id": "t1", "kind": "edit", "status": "completed"})
    trace("tool_call", {"id": "t1", "kind": "edit", "status": "completed"})
    late = {"seq": 4, "kind": "permission", "verdict": "allow", "subject": {"tool_call": "t1"}}
    trace("permission", {"records": [late]})
    trace.ended(outcome())
    spans, _ = memory.finish()
    (tool,) = [s for s in spans if s.name == "execute_tool edit"]
    (root,) = [s for s in spans if s.name == "invoke_agent Agent"]
    assert not tool.events and [e.attributes["acp_governor.seq"] for e in root.events] == [4]
