"""Operational logs (not the audit) are structlog events that carry the attempt and
the agent, bound once per attempt -- and nothing of it is left bound afterwards."""

from __future__ import annotations

from pathlib import Path

import structlog
from audit_helpers import scripted_spec
from structlog.testing import capture_logs

from governor.attempt.lifecycle import run_attempt

MALFORMED = [
    {"update": {"sessionUpdate": "tool_call", "title": "no id"}},  # toolCallId is required
    {"say": "done"},
]


async def test_an_attempts_operational_log_events_carry_its_attempt_and_agent(
    tmp_path: Path,
) -> None:
    with capture_logs(processors=[structlog.contextvars.merge_contextvars]) as events:
        outcome = await run_attempt(scripted_spec(tmp_path, MALFORMED))
    bad = [e for e in events if e["event"] == "agent.bad_update"]
    assert bad, events
    assert bad[0]["attempt"] == outcome.run_id
    assert bad[0]["agent"] == "acp"
    assert structlog.contextvars.get_contextvars() == {}  # unbound after the attempt
