"""The `governor` command's exit codes: an outcome's status and verdict as one number.

The convention the command line states (`governor.cli`) and a batch's jobs use
for their outcome lines (`governor.batch.work`): it lives here, below both, so
that a batch never imports the command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from governor.ending.outcome import Outcome

EXITS: Final[tuple[tuple[int, str, tuple[str, ...]], ...]] = (
    (0, "completed", ("completed",)),
    (1, "failed or incomplete", ("failed", "incomplete")),
    (2, "refused before start (usage, config, ceiling, environment)", ()),
    (3, "blocked (the agent said BLOCKED:)", ("blocked",)),
    (4, "needs approval", ("needs_approval",)),
    (5, "completed, but a check failed (the verdict is failed)", ()),
    (6, "completed, but --fail-on matched (a refusal or an unasked change)", ()),
)
"""The exit-code convention: code, what it means, the outcome statuses it stands for."""

EXIT_BY_STATUS: Final = {status: code for code, _, statuses in EXITS for status in statuses}
REFUSED_BEFORE_START: Final = 2
CHECK_FAILED: Final = 5
FAILED_ON: Final = 6
EXIT_CODES: Final = "exit codes:\n" + "".join(f"  {code}  {text}\n" for code, text, _ in EXITS)


def exit_code(outcome: Outcome) -> int:
    """The exit code of an outcome (`EXITS`): its status's, but a completed
    attempt whose checks failed says so, since an agent's success is its own
    claim and the checks' verdict is the job's."""
    return exit_code_of(outcome.status, outcome.verdict)


def exit_code_of(status: str, verdict: str | None) -> int:
    """`exit_code` of an outcome's status and verdict (a batch's outcome lines
    are plain values)."""
    if status == "completed" and verdict == "failed":
        return CHECK_FAILED
    return EXIT_BY_STATUS[status]
