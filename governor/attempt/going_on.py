"""A paused attempt goes on from Python (issue 38): ``resume(outcome, "once")``
for a loop that owns its approvals, in one call.

What `governor approve` and `governor resume` do in two commands: the
decision is written into the attempt's own chain (an ``approval`` record
naming who decided: ``by``, the loop's name for itself, and the OS user it
runs as), then the attempt goes on under the same job
(`governor.attempt.paused.prepared_again`: the policy and the ceiling it began
with, what is left of its wall time), its agent's session resumed or loaded
where it can. The outcome covers both parts; it may pause again on another
request, and be resumed the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final, Literal

from governor.attempt import paused
from governor.ending.outcome import Outcome

Decision = Literal["once", "always", "deny"]
DECISIONS: Final = ("once", "always", "deny")


def _log(outcome: Outcome) -> Path:
    if outcome.status != "needs_approval":
        raise paused.NotPaused(
            f"attempt {outcome.run_id} ended {outcome.status}, not needs_approval: "
            "there is nothing to decide"
        )
    if outcome.log is None:
        raise paused.NotPaused(f"attempt {outcome.run_id} kept no audit log: it cannot go on")
    return Path(outcome.log)


async def resume_attempt(
    outcome: Outcome,
    decision: Decision,
    *,
    by: str = "library",
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
) -> Outcome:
    """Decide the request the paused ``outcome`` waits on (``once``, ``always``
    for the rest of the attempt, ``deny``), written into its chain as decided
    by ``by``, and run the attempt's next part (under trio). `NotPaused` when
    the outcome did not pause, was decided already, or its job cannot be given
    again (a `Policy` object rather than a file); `RefusedBeforeStart` when its
    policy or ceiling changed since, or its wall time is spent. A decision that
    is not one of the three words is a `ValueError` naming them."""
    from governor.attempt.lifecycle import run_attempt

    if decision not in DECISIONS:
        raise ValueError(f"decision {decision!r}: one of {', '.join(DECISIONS)}")
    log = _log(outcome)
    user, uid = paused.os_user()
    # the outcome's own attempt and request: a log several attempts share names
    # more than one, and the loop decided the one it was shown
    request = (outcome.pending or {}).get("request")
    paused.approve(
        log, request if isinstance(request, int) else None, decision, f"{by} ({user})", uid,
        attempt=outcome.run_id,
    )  # fmt: skip
    with paused.exclusive(outcome.run_id):  # one resume at a time: never two parts into one chain
        going_on = paused.continuation(log, outcome.run_id)
        prepared = paused.prepared_again(going_on, on_event=on_event)
        return await run_attempt(prepared, continues=going_on)


def resume(outcome: Outcome, decision: Decision, *, by: str = "library") -> Outcome:
    """`resume_attempt` from plain Python (runs trio itself)."""
    import trio

    return trio.run(lambda: resume_attempt(outcome, decision, by=by))
