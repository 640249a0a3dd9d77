"""The values a job's checks come to: each check's run, the checks together, their verdict.

Apart from the runner (`governor.checks.check_runs`), so that whoever reads a
check's end -- `governor.ending`, the outcome, a loop, the command line --
imports no sandbox and no runner: at run time this module imports nothing of
ours (the types its fields name are imported for the type checker only).
`CheckRun` is where a held-out test's words are withheld at the source (see
`governor.checks.check_runs`: its ``tail`` is then `check_runs.WITHHELD`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

if TYPE_CHECKING:  # field types only: a check's end is read without them
    from governor.checks import canaries
    from governor.checks.test_results import CaseResult, Judgement

WorkspaceMode = Literal["overlay", "read-only"]
Verdict = Literal["passed", "failed"]
"""The checks' verdict: ``passed`` when every check passed, else ``failed``."""

READ_ONLY_NOTICE: Final = (
    "the checks ran on the workspace bound read-only (this bwrap has no --tmp-overlay, "
    "bubblewrap 0.10 or newer has it): a check that writes in the workspace fails there"
)


@dataclass(frozen=True, slots=True)
class CheckRun:
    """One check's end: its command, exit status (None: it could not start or
    was killed at its timeout), duration and the masked tail of its output."""

    command: str
    exit: int | None
    duration_s: float
    tail: str
    timed_out: bool = False
    error: str | None = None
    """Why the check could not run (the sandbox could not be built), in words."""
    tests: tuple[CaseResult, ...] = ()
    """What each test its runners reported came to (failures first, at most
    `governor.checks.test_results.MAX_KEPT`; ``tests_more`` counts the rest)."""
    tests_more: int = 0
    unfinished: int = 0
    """Test runs that began and never reported (ended from inside)."""
    lie: canaries.Lie | None = None
    """What the check misreported of its canaries (`governor.checks.canaries`): its
    results are not believed."""
    explained: bool = False
    """Its non-zero exit status is its must-fail canaries' (every test its
    reports name that did not pass is one)."""

    @property
    def passed(self) -> bool:
        """Exit status 0 (or one its canaries explain), within its timeout, and
        no canary misreported."""
        return (
            (self.exit == 0 or (self.exit is not None and self.explained))
            and not self.timed_out
            and self.lie is None
        )

    def to_json(self) -> dict[str, Any]:
        """The run as plain JSON values (``timed_out`` and ``error`` only when set)."""
        out: dict[str, Any] = {
            "command": self.command,
            "exit": self.exit,
            "passed": self.passed,
            "duration_s": self.duration_s,
            "tail": self.tail,
        }
        if self.timed_out:
            out["timed_out"] = True
        if self.error is not None:
            out["error"] = self.error
        if self.tests:
            out["tests"] = [t.to_json() for t in self.tests]
        if self.tests_more:
            out["tests_more"] = self.tests_more
        if self.unfinished:
            out["unfinished_runs"] = self.unfinished
        if self.lie is not None:
            out["runner_lied"] = self.lie.detail()
        return out


@dataclass(frozen=True, slots=True)
class Checks:
    """Every check of a job, in order, and how the workspace was shown to them."""

    runs: tuple[CheckRun, ...] = ()
    workspace: WorkspaceMode = "overlay"
    judgement: Judgement | None = None
    """The acceptance tests against every check's reports (`governor.checks.test_results`)."""
    read: tuple[str, ...] = ()
    """The files in the roots some check was seen to read, map or execute
    (`governor.checks.observed`): a loop's harness is what its checks read,
    whatever idiom reached it (`governor.confine.harness.read_findings`)."""
    unobserved: str | None = None
    """Why what a check read could not be observed (it ran on an overlay): a
    file it reached by an idiom the parsed closure does not follow is then
    neither pinned nor a finding."""

    def lies(self) -> list[tuple[int, CheckRun]]:
        """The checks (numbered from 1) whose runners misreported their canaries."""
        return [(n, r) for n, r in enumerate(self.runs, 1) if r.lie is not None]

    @property
    def verdict(self) -> Verdict | None:
        """``passed`` when every check exited 0 and every acceptance test ran and
        passed (no reported test failed, no run ended unreported), ``failed``
        otherwise; None without checks."""
        if not self.runs:
            return None
        if not all(r.passed for r in self.runs):
            return "failed"
        if self.judgement is not None and not self.judgement.ok:
            return "failed"
        return "passed"
