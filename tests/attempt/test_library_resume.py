"""A loop that owns its approvals goes on with one call (issue 38):
``governor.resume(outcome, "once")`` writes the decision into the paused
attempt's chain (who: the loop's name and its OS user) and runs its next part
under the same job; ``"deny"`` goes on with the request refused. The demo
agent over real pipes, its commands in bubblewrap; the state folder is the
test's own."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import governor
from governor.attempt.paused import NotPaused
from governor.audit.verify import read_lines, verify

DEMO = str(Path(__file__).resolve().parents[2] / "governor" / "agents" / "demo.py")


@pytest.fixture
def spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> governor.AttemptSpec:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "ws").mkdir()
    policy = tmp_path / "ask.toml"
    policy.write_text('capability = "edit-workspace"\n[ask]\ntools = ["edit"]\n')
    return governor.AttemptSpec(
        prompt="write hello.py", argv=[sys.executable, DEMO], workspace=tmp_path / "ws",
        policy=policy, approver="pause", log=tmp_path / "audit.jsonl", timeout=120,
    )  # fmt: skip


def _records(log: str | None) -> list[dict[str, object]]:
    assert log is not None
    return [json.loads(line) for line in Path(log).read_text().splitlines()]


def test_a_paused_attempt_approved_in_one_call_goes_on_under_its_own_id(
    spec: governor.AttemptSpec,
) -> None:
    first = governor.run(spec)
    assert first.status == "needs_approval"
    assert not (Path(spec.workspace) / "hello.py").exists()
    going_on = governor.resume(first, "once", by="my-loop")
    assert going_on.status == "completed", going_on.reason
    assert going_on.run_id == first.run_id
    assert (Path(spec.workspace) / "hello.py").exists()
    written = _records(going_on.log)
    (approval,) = [r for r in written if r["kind"] == "approval"]
    assert approval["answer"] == "once" and str(approval["user"]).startswith("my-loop (")
    assert {r["attempt"] for r in written} == {first.run_id}
    assert verify(read_lines(Path(str(going_on.log)))).problem is None
    with pytest.raises(NotPaused, match="not needs_approval"):
        governor.resume(going_on, "once")


def test_a_denied_request_never_lands_and_a_decision_is_one_of_three_words(
    spec: governor.AttemptSpec,
) -> None:
    first = governor.run(spec)
    with pytest.raises(ValueError, match="once, always, deny"):
        governor.resume(first, "yes")  # type: ignore[arg-type]
    going_on = governor.resume(first, "deny")
    assert going_on.run_id == first.run_id
    assert not (Path(spec.workspace) / "hello.py").exists()
    refused = [r for r in _records(going_on.log) if r.get("verdict") == "deny" and r.get("by") == "person"]
    assert refused, "the refusal is not the person's"


SCRIPTED = Path(__file__).resolve().parents[1] / "audit" / "scripted_agent.py"


@pytest.mark.parametrize(("limit", "status"), [(1000, "failed"), (2000, "completed")])
def test_the_tokens_limit_spans_every_part_not_a_fresh_allowance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int, status: str
) -> None:
    """An agent that reports 600 tokens, then asks (paused), and reports 600
    again in its next part: 1,200 over both, past a limit of 1,000 (each part
    alone is under it) and under one of 2,000."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    (tmp_path / "ws").mkdir()
    allow = [{"optionId": "yes", "name": "Allow", "kind": "allow_once"},
             {"optionId": "no", "name": "Reject", "kind": "reject_once"}]  # fmt: skip
    script = tmp_path / "script.json"
    script.write_text(json.dumps([
        {"update": {"sessionUpdate": "usage_update", "used": 600, "size": 200000}},
        {"update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Edit notes",
                    "kind": "edit", "status": "pending"}},
        {"request": "session/request_permission",
         "params": {"sessionId": "{session}", "toolCall": {"toolCallId": "t1"}, "options": allow}},
        {"say": "done"},
    ]))  # fmt: skip
    policy = tmp_path / "ask.toml"
    policy.write_text(
        f'capability = "edit-workspace"\n[ask]\ntools = ["edit"]\n[limits]\ntokens = {limit}\n'
    )
    spec = governor.AttemptSpec(
        prompt="play", argv=[sys.executable, str(SCRIPTED), "--script", str(script)],
        workspace=tmp_path / "ws", policy=policy, approver="pause",
        log=tmp_path / "audit.jsonl", timeout=60, sandbox_agent=False,
    )  # fmt: skip
    first = governor.run(spec)
    assert first.status == "needs_approval" and first.usage["tokens"] == 600, first.usage
    going_on = governor.resume(first, "once")
    assert going_on.status == status, going_on.reason
    assert going_on.usage["tokens"] == 1200, going_on.usage
    if status == "failed":
        assert "tokens limit 1000" in str(going_on.reason) and "600 of them in earlier parts" in str(
            going_on.reason
        )


def test_an_attempt_paused_on_its_last_allowed_tool_call_goes_on_and_the_limit_still_binds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The paused call is counted once, by the part that decides it (the agent
    asks it again there): with ``[limits] tool_calls`` at exactly the calls the
    task takes, the resumed attempt completes, counting as many as an attempt
    that never paused; one fewer still ends it at the limit."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))

    def spec(name: str, limit: int | None, approver: object) -> governor.AttemptSpec:
        (tmp_path / name).mkdir()
        policy = tmp_path / f"{name}.toml"
        limits = f"[limits]\ntool_calls = {limit}\n" if limit is not None else ""
        policy.write_text(f'capability = "edit-workspace"\n[ask]\ntools = ["edit"]\n{limits}')
        return governor.AttemptSpec(
            prompt="write hello.py", argv=[sys.executable, DEMO], workspace=tmp_path / name,
            policy=policy, approver=approver, log=tmp_path / f"{name}.jsonl", timeout=120,
        )  # fmt: skip

    never_paused = governor.run(spec("straight", None, lambda ask: "once"))
    assert never_paused.status == "completed", never_paused.reason
    calls = never_paused.usage["tool_calls"]
    assert calls >= 1
    first = governor.run(spec("exact", calls, "pause"))
    assert first.status == "needs_approval", first.reason
    going_on = governor.resume(first, "once")
    assert going_on.status == "completed", going_on.reason
    assert going_on.usage["tool_calls"] == calls, going_on.usage
    short = governor.resume(governor.run(spec("short", calls - 1, "pause")), "once")
    assert short.status == "failed" and f"tool_calls limit {calls - 1}" in str(short.reason), short.reason
