"""`governor run` exporting OpenTelemetry over OTLP/HTTP to a receiver on loopback,
through the real console entry point and the bundled demo agent; what arrives is
decoded with the official `opentelemetry-proto` messages and held to the audit log."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from otel_receiver import Receiver, attributes, needs_otel

GOVERNOR = Path(sys.executable).parent / "governor"
SECRET = "planted-secret-value-5e1d0b"
DECIDED = ("permission", "read", "write", "terminal", "network")


def run_demo(
    tmp_path: Path, *extra: str, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    ws = tmp_path / f"ws-{SECRET}"  # the secret is in every path the demo touches
    ws.mkdir(exist_ok=True)
    argv = [str(GOVERNOR), "run", "--agent", "demo", "--capability", "edit-workspace",
            "--workspace", str(ws), "--log", str(tmp_path / "audit.jsonl"), *extra, "make hello"]  # fmt: skip
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    environ = {**base, "MY_SERVICE_TOKEN": SECRET, **(env or {})}
    return subprocess.run(argv, capture_output=True, text=True, env=environ, timeout=timeout)


def logged(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]


def test_the_demo_is_one_attempt_span_a_span_per_tool_call_and_an_event_per_decision(
    tmp_path: Path,
) -> None:
    needs_otel()
    with Receiver() as rx:
        done = run_demo(
            tmp_path,
            "--json",
            "--events",
            str(tmp_path / "events.jsonl"),
            env={"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url},
        )
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    records = logged(tmp_path)
    spans = rx.spans()
    attempt = [
        s for s in spans if attributes(s.attributes)["gen_ai.operation.name"] == "invoke_agent"
    ]
    tools = [
        s for s in spans if attributes(s.attributes)["gen_ai.operation.name"] == "execute_tool"
    ]
    assert len(attempt) == 1 and len(attempt) + len(tools) == len(spans)
    (root,) = attempt

    # one trace: the outcome's, and the log's first record's
    trace_id = outcome["trace_id"]
    assert records[0]["kind"] == "attempt-start" and records[0]["trace_id"] == trace_id
    assert {s.trace_id.hex() for s in spans} == {trace_id}
    assert {s.parent_span_id for s in tools} == {root.span_id} and not root.parent_span_id

    # the attempt's span: GenAI attributes and ours
    a = attributes(root.attributes)
    agent = outcome["acp"]["agent"]  # as the agent introduced itself
    assert root.name == f"invoke_agent {agent}" and a["gen_ai.agent.name"] == agent
    assert a["gen_ai.conversation.id"] == "demo-session-1"
    assert a["acp_governor.attempt.id"] == outcome["run_id"] == records[0]["attempt"]
    assert a["acp_governor.status"] == "completed"
    tally = outcome["acp"]["tally"]
    assert {k: a[f"acp_governor.tally.{k}"] for k in tally} == tally
    # the log's head, kept by the collector apart from the log
    assert a["acp_governor.audit.head"] == outcome["log_head"] == records[-1]["hash"]
    assert a["acp_governor.audit.records"] == outcome["log_records"] == len(records)

    # one execute_tool span per tool call the agent made, ended at its last update
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    calls = {e["id"]: e for e in events if e["type"] == "tool_call"}  # the last state of each
    by_call = {attributes(s.attributes)["gen_ai.tool.call.id"]: s for s in tools}
    assert len(by_call) == len(tools) and set(by_call) == set(calls) == {
        "write",
        "read",
        "run",
        "hook",
        "notes",
    }
    for call, span in by_call.items():
        t = attributes(span.attributes)
        assert t["gen_ai.tool.name"] == calls[call]["kind"] and t["gen_ai.tool.type"] == "function"
        assert span.name == f"execute_tool {calls[call]['kind']}"
        assert t["acp_governor.tool.status"] == calls[call]["status"]
        assert span.start_time_unix_nano <= span.end_time_unix_nano <= root.end_time_unix_nano
    assert by_call["hook"].status.code == 2  # STATUS_CODE_ERROR: the agent's write was refused
    assert by_call["write"].status.code != 2

    # one event per decision record of the log, with the record's own fields
    decisions = [r for r in records if r["kind"] in DECIDED]
    seen = sorted(
        (attributes(e.attributes) | {"span": s.span_id} for s in spans for e in s.events if e.name == "acp_governor.decision"),
        key=lambda d: d["acp_governor.seq"],
    )  # fmt: skip
    assert [d["acp_governor.seq"] for d in seen] == [r["seq"] for r in decisions]
    for d, r in zip(seen, decisions, strict=True):
        for field in ("kind", "verdict", "by", "rule", "reason", "hash"):
            assert d[f"acp_governor.{field}"] == r[field], field
        call = r["subject"].get("tool_call")
        assert d["span"] == (by_call[call].span_id if call else root.span_id)

    # the tally as counters
    metrics = rx.metrics()
    requests = {p["acp_governor.verdict"]: v for p, v in metrics["acp_governor.requests"]}
    assert requests == {k: tally[k] for k in ("allowed", "waited", "refused", "failed") if tally[k]}
    assert sum(requests.values()) == tally["asked"]
    assert [(p["acp_governor.status"], v) for p, v in metrics["acp_governor.attempts"]] == [
        ("completed", 1)
    ]
    assert sum(v for _, v in metrics["acp_governor.decisions"]) == len(decisions)
    assert {r["service.name"] for r in rx.resources()} == {"acp-governor"}

    # nothing planted arrived: not in an attribute, not in a path, nowhere
    assert SECRET.encode() not in rx.raw()
    assert SECRET not in done.stderr


def test_the_operators_service_name_wins(tmp_path: Path) -> None:
    needs_otel()
    with Receiver() as rx:
        done = run_demo(
            tmp_path, "--json", env={"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url, "OTEL_SERVICE_NAME": "ci-agents"}
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert {r["service.name"] for r in rx.resources()} == {"ci-agents"}


def test_an_unreachable_collector_neither_fails_the_attempt_nor_hides_that_it_failed(
    tmp_path: Path,
) -> None:
    needs_otel()
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    done = run_demo(tmp_path, "--json", "--otel", env={"OTEL_EXPORTER_OTLP_ENDPOINT": closed})
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["status"] == "completed" and len(outcome["trace_id"]) == 32
    notices = [line for line in done.stderr.splitlines() if "OpenTelemetry" in line]
    assert len(notices) == 1 and "the attempt was not affected" in notices[0], done.stderr
    assert "Traceback" not in done.stderr


def test_a_collector_that_never_answers_does_not_hold_the_governor(tmp_path: Path) -> None:
    needs_otel()
    with Receiver(hang=True) as rx:  # it holds every request for 120 s
        done = run_demo(tmp_path, "--json", env={"OTEL_EXPORTER_OTLP_ENDPOINT": rx.url}, timeout=60)
        assert rx.bodies  # the export was tried, and not waited for
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "completed"


def hide_the_extra(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python finds an `opentelemetry` that fails to import."""
    shadow = tmp_path / "shadow" / "opentelemetry"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text(
        "raise ModuleNotFoundError('hidden by the test', name='opentelemetry')\n"
    )
    return {"PYTHONPATH": str(shadow.parent)}


def test_otel_without_the_extra_is_refused_before_start_naming_the_install_line(
    tmp_path: Path,
) -> None:
    done = run_demo(tmp_path, "--otel", env=hide_the_extra(tmp_path))
    assert done.returncode == 2, done.stderr
    assert "pip install 'acp-governor[otel]'" in done.stderr
    assert not (tmp_path / "audit.jsonl").exists()  # nothing ran


def test_the_endpoint_variable_without_the_extra_warns_and_runs(tmp_path: Path) -> None:
    env = {**hide_the_extra(tmp_path), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    done = run_demo(tmp_path, "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert "pip install 'acp-governor[otel]'" in done.stderr
    assert "trace_id" not in json.loads(done.stdout)


def test_without_the_flag_or_the_variable_nothing_is_traced(tmp_path: Path) -> None:
    done = run_demo(tmp_path, "--json")
    assert done.returncode == 0, done.stderr
    assert "trace_id" not in json.loads(done.stdout) and "trace_id" not in logged(tmp_path)[0]


def test_an_attempt_interrupted_by_sigint_still_ends_its_span_failed(tmp_path: Path) -> None:
    needs_otel()
    import signal
    import time

    scripted = Path(__file__).resolve().parents[1] / "audit" / "scripted_agent.py"
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"write": "{cwd}/started", "text": "x"}, {"sleep": 60}]))
    ws = tmp_path / "ws"
    ws.mkdir()
    argv = [str(GOVERNOR), "run", "--capability", "edit-workspace", "--workspace", str(ws),
            "--log", str(tmp_path / "audit.jsonl"), "--json", "--no-sandbox-agent", "wait",
            "--", sys.executable, str(scripted), "--script", str(script)]  # fmt: skip
    base = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with Receiver() as rx:
        governor = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env={**base, "OTEL_EXPORTER_OTLP_ENDPOINT": rx.url})  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while not (ws / "started").exists():  # the agent's own write, then its sleep
                assert time.monotonic() < deadline, "the agent never started"
                time.sleep(0.05)
            governor.send_signal(signal.SIGINT)  # the agent sleeps for a minute now
            out, err = governor.communicate(timeout=60)
        finally:
            governor.kill()
        spans = rx.spans()
    assert json.loads(out)["status"] == "failed", err
    (root,) = [s for s in spans if attributes(s.attributes)["gen_ai.operation.name"] == "invoke_agent"]
    a = attributes(root.attributes)
    assert a["acp_governor.status"] == "failed" and "interrupted" in str(a["acp_governor.reason"])
    assert root.end_time_unix_nano > root.start_time_unix_nano
