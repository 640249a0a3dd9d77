"""acp-governor: an ACP client that governs coding agents.

The library surface for coding loops::

    from governor import AttemptSpec, decision_records, run_attempt, run

    outcome = run(AttemptSpec(prompt="...", agent="claude", workspace="repo",
                              policy="edit-workspace"))  # shipped, by name
    for record in decision_records(outcome.log, outcome.run_id, outcome.decisions):
        ...  # the attempt's decision log, read from its audit log one record at a time

`run_attempt` is the same under trio. A loop that owns its retries has the
three steps of a try (`governor.attempt.tries`): `run_attempt`, `run_checks` over the
prepared policy, and `digest` of the failed checks for the next prompt
(`with_digest`), with `StartingCopy` to start each try from the same
workspace; `run_tries` is those steps as ``governor run --tries`` runs them.
Names are imported lazily so that the command line starts fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from governor.version import __version__

__all__ = [
    "Ask",
    "AttemptSpec",
    "Outcome",
    "RefusedBeforeStart",
    "StartingCopy",
    "Status",
    "Tally",
    "Verdict",
    "__version__",
    "decision_records",
    "digest",
    "prepare",
    "resume",
    "resume_attempt",
    "run",
    "run_attempt",
    "run_checks",
    "run_tries",
    "with_digest",
]

if TYPE_CHECKING:
    from governor.attempt.going_on import resume, resume_attempt
    from governor.attempt.lifecycle import run, run_attempt
    from governor.attempt.tries import StartingCopy, digest, run_tries, with_digest
    from governor.audit.reading import decision_records
    from governor.audit.tally import Tally
    from governor.checks.check_runs import run_checks
    from governor.checks.check_values import Verdict
    from governor.ending.outcome import Outcome, Status
    from governor.gate.approver import Ask
    from governor.job.spec import AttemptSpec, RefusedBeforeStart, prepare

_LAZY = {
    "AttemptSpec": "governor.job.spec",
    "RefusedBeforeStart": "governor.job.spec",
    "prepare": "governor.job.spec",
    "run_checks": "governor.checks.check_runs",
    "digest": "governor.attempt.tries",
    "with_digest": "governor.attempt.tries",
    "run_tries": "governor.attempt.tries",
    "StartingCopy": "governor.attempt.tries",
    "run": "governor.attempt.lifecycle",
    "resume": "governor.attempt.going_on",
    "resume_attempt": "governor.attempt.going_on",
    "run_attempt": "governor.attempt.lifecycle",
    "Outcome": "governor.ending.outcome",
    "Status": "governor.ending.outcome",
    "Verdict": "governor.checks.check_values",
    "Tally": "governor.audit.tally",
    "decision_records": "governor.audit.reading",
    "Ask": "governor.gate.approver",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'governor' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
