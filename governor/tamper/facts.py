"""What a test file holds that an audit compares, and the comparison: pure.

A language module (`governor.tamper.python`, `governor.tamper.syntax`) reads one
file's text into `Facts`: its tests (by name, with how many assertions each
makes and which of them cannot fail), the markers that stop tests from running
or stop the others (skip, xfail, ignore; only), and the suppressions that hide
code from coverage, type checks or linters. `compare` turns the facts of a
file before and after an attempt into findings.

Counts, not positions, are compared: an edit above a test moves its lines, and
a comparison by line would report every moved marker as added. A marker or
suppression is identified by what it is and where it sits (the test or the
source line around it), and one is added when the after-text has more of that
kind than the before-text had.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

RULES: Final = {
    "test-file-deleted": "a test file was deleted",
    "test-deleted": "a test was deleted (or renamed)",
    "assertion-removed": "a test makes fewer assertions than before",
    "assertion-trivial": "an assertion that cannot fail was added",
    "skip-added": "a marker that skips a test (skip, xfail, ignore) was added",
    "only-added": "a focus marker (only) was added: the other tests stop running",
    "runner-config-changed": "test-runner configuration that changes what runs or how it is judged was changed",
    "suppression-added": "a coverage, type-check or lint suppression was added",
    "unparsable": "a test file no longer parses: the audit could not look inside it",
    "harness-changed": "a file of the checks' harness set (what decides what a check runs) was created, changed or deleted",
}
"""Every rule a finding can name, with what it means."""


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing in the diff that weakens what the checks prove: the file, the
    line (in the file after the attempt, or before it for what was deleted;
    None for a whole file) and the rule (`RULES`), with the detail in words."""

    path: str
    line: int | None
    rule: str
    detail: str

    def __post_init__(self) -> None:
        if self.rule not in RULES:
            raise ValueError(f"unknown tamper rule {self.rule!r} (known: {', '.join(RULES)})")

    def to_json(self) -> dict[str, Any]:
        """The finding as plain JSON values."""
        return {"path": self.path, "line": self.line, "rule": self.rule, "detail": self.detail}


@dataclass(slots=True)
class Test:
    """One test: where it starts, how many assertions it makes, and the lines of
    those that cannot fail (``assert True``, ``assert x == x``)."""

    line: int
    asserts: int = 0
    trivial: list[int] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Mark:
    """A marker or suppression: its rule, what it is (``pytest.mark.skip``,
    ``# type: ignore``), where it sits (a test's name, or the source line) and
    its line."""

    rule: str
    label: str
    scope: str
    line: int


@dataclass(slots=True)
class Facts:
    """What one file holds: tests by name, markers and suppressions; ``error``
    when the text does not parse (then the rest is empty)."""

    tests: dict[str, Test] = field(default_factory=dict)
    marks: list[Mark] = field(default_factory=list)
    error: str | None = None


def compare(path: str, before: Facts | None, after: Facts | None) -> list[Finding]:
    """The findings between a file's facts before and after (None: the file did
    not exist then)."""
    if after is None:
        if before is not None and before.tests:
            names = ", ".join(sorted(before.tests)[:5])
            more = f" and {len(before.tests) - 5} more" if len(before.tests) > 5 else ""
            return [
                Finding(
                    path,
                    None,
                    "test-file-deleted",
                    f"the file held {len(before.tests)} test(s) ({names}{more})",
                )
            ]
        return []
    if after.error is not None:
        if before is not None and before.error is None:
            return [Finding(path, None, "unparsable", after.error)]
        return []
    old = before if before is not None and before.error is None else Facts()
    out: list[Finding] = []
    for name, test in old.tests.items():
        now = after.tests.get(name)
        if now is None:
            out.append(
                Finding(
                    path, test.line, "test-deleted", f"{name} (line {test.line} before) is gone"
                )
            )
        elif now.asserts < test.asserts:
            out.append(
                Finding(
                    path,
                    now.line,
                    "assertion-removed",
                    f"{name} made {test.asserts} assertion(s) and makes {now.asserts}",
                )
            )
    for name, test in after.tests.items():
        was = old.tests.get(name)
        for line in test.trivial[len(was.trivial) if was else 0 :]:
            out.append(Finding(path, line, "assertion-trivial", f"in {name}: it cannot fail"))
    out.extend(_added_marks(path, old.marks, after.marks))
    return sorted(out, key=lambda f: (f.line or 0, f.rule))


def _added_marks(path: str, before: Iterable[Mark], after: Iterable[Mark]) -> list[Finding]:
    counts: dict[tuple[str, str, str], int] = defaultdict(int)
    for m in before:
        counts[m.rule, m.label, m.scope] += 1
    out = []
    for m in after:
        key = (m.rule, m.label, m.scope)
        if counts[key] > 0:
            counts[key] -= 1
            continue
        where = f"on {m.scope}" if m.rule != "suppression-added" else "added"
        out.append(Finding(path, m.line, m.rule, f"{m.label} {where}"))
    return out
