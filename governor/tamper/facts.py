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
from collections.abc import Callable, Sequence
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
    "test-body-changed": "a test that was there before reads differently (its expected values, assertions or the code around them)",
    "test-code-changed": "code of a test file that its tests use (a helper, fixture, constant or a test class's setup) was changed or removed",
    "import-code-added": "code that runs when the tests are imported or around them was added (a conftest.py, an __init__.py in a test folder, a .pth, sitecustomize, module-level code, an autouse fixture, a setup hook)",
    "bytecode-added": "bytecode or a runner's cache the attempt wrote does not match (or cannot be checked against) its source",
    "coding-changed": "a Python file declares an encoding other than UTF-8 (its runtime decodes it so; an audit that read UTF-8 would not see what runs)",
    "harness-changed": "a file of the checks' harness set (what decides what a check runs) was created, changed or deleted",
    "runner-lied": "a check's runner misreported tests the agent could not know (canaries put into the check's own copy of the acceptance test files, governor.checks.canaries): none of its results is believed",
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


class Shape:
    """What a piece of code does, compared cheaply: its source text first (the
    same text is the same code), and only when the texts differ its tree
    without positions and comments, made then (``make``) and kept. Most tests
    of an attempt are untouched: their trees are never dumped."""

    __slots__ = ("_make", "_value", "text")

    def __init__(self, text: str, make: Callable[[], str]) -> None:
        self.text = text
        self._make: Callable[[], str] | None = make
        self._value: str | None = None

    def value(self) -> str:
        """The tree as text (made once)."""
        if self._value is None:
            assert self._make is not None
            self._value, self._make = self._make(), None
        return self._value

    def same(self, other: Shape) -> bool:
        """Whether the two do the same thing."""
        return self.text == other.text or self.value() == other.value()


def constant(value: str) -> Callable[[], str]:
    """A `Shape`'s maker (or a `Code`'s reason) that is already known."""
    return lambda: value


@dataclass(slots=True)
class Test:
    """One test: where it starts, how many assertions it makes, and the lines of
    those that cannot fail (``assert True``, ``assert x == x``)."""

    line: int
    asserts: int = 0
    trivial: list[int] = field(default_factory=list)
    body: Shape | None = None
    """The test as its language's tree says it, positions and comments left out
    (None where the language module does not read it)."""


@dataclass(slots=True)
class Code:
    """A piece of a test file that is not a test (a helper, a fixture, a
    constant, an import, a test class's setup): where it starts, what it is
    and, asked when it is new, why it runs code as the file is imported or
    around the tests (None when it only defines)."""

    line: int
    body: Shape
    runs: Callable[[], str | None] = lambda: None
    around: bool = False
    """A class member that runs around its class's tests only (a ``setUp``):
    no finding when its class is new (it runs around new tests only)."""


@dataclass(frozen=True, slots=True)
class Mark:
    """A marker or suppression: its rule, what it is (``pytest.mark.skip``,
    ``# type: ignore``), where it sits (a test's name, or the source line) and
    its line."""

    rule: str
    label: str
    scope: str
    line: int
    near: tuple[str, str] = ("", "")
    """A suppression's neighbouring lines (above, below), stripped: the line that
    carried it before is the one between the same neighbours, however it was
    edited."""


@dataclass(slots=True)
class Facts:
    """What one file holds: tests by name, markers and suppressions; ``error``
    when the text does not parse (then the rest is empty)."""

    tests: dict[str, Test] = field(default_factory=dict)
    marks: list[Mark] = field(default_factory=list)
    error: str | None = None
    code: dict[str, Code] = field(default_factory=dict)
    """The rest of a test file by what it binds (``helper``, ``EXPECTED``,
    ``TestX.setUp``); empty where the language module does not read it."""


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
    named: set[str] = set()  # the tests a finding names: not also a changed body
    for name, test in old.tests.items():
        now = after.tests.get(name)
        if now is None:
            out.append(
                Finding(
                    path, test.line, "test-deleted", f"{name} (line {test.line} before) is gone"
                )
            )
        elif now.asserts < test.asserts:
            named.add(name)
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
            named.add(name)
            out.append(Finding(path, line, "assertion-trivial", f"in {name}: it cannot fail"))
    marks = _added_marks(path, old.marks, after.marks)
    named.update(scope for _, scope in marks)
    out.extend(f for f, _ in marks)
    out.extend(_changed_bodies(path, old, after, named))
    out.extend(_changed_code(path, old, after))
    return sorted(out, key=lambda f: (f.line or 0, f.rule))


def _changed_bodies(path: str, old: Facts, new: Facts, named: set[str]) -> list[Finding]:
    """A pre-existing test whose body reads differently: `test-body-changed`,
    unless a finding already names it (a skip marker added is that, not also
    a changed body). Every change counts, an assertion's message too: ``assert
    f() == 5, os._exit(0)`` passes by exiting when the assertion fails."""
    out = []
    for name, test in old.tests.items():
        now = new.tests.get(name)
        if name in named or now is None or test.body is None or now.body is None:
            continue
        if now.body.same(test.body):
            continue
        out.append(
            Finding(
                path,
                now.line,
                "test-body-changed",
                f"{name} (line {test.line} before) reads differently: a test that was there "
                "before is the loop's, not the attempt's, to change",
            )
        )
    return out


def _changed_code(path: str, old: Facts, new: Facts) -> list[Finding]:
    """What the tests use, changed (`test-code-changed`: a helper returning
    another value, a constant, an import rebound to a stub), and code added that
    runs as the file is imported or around its tests (`import-code-added`:
    ``calc.add = ...`` at module level, an autouse fixture, a ``setUp``)."""
    out = []
    for key, was in old.code.items():
        now = new.code.get(key)
        if now is None or not now.body.same(was.body):
            how = "removed" if now is None else "changed"
            line = was.line if now is None else now.line
            out.append(
                Finding(path, line, "test-code-changed", f"{key} (line {was.line} before) {how}")
            )
    for key, now in new.code.items():
        owner, dot, _ = key.partition(".")
        new_class = f"class {owner}" in new.code and f"class {owner}" not in old.code
        if dot and new_class and now.around:
            continue  # a new class's setup runs around its own new tests only (not at import)
        why = None if key in old.code else now.runs()
        if why is not None:
            out.append(Finding(path, now.line, "import-code-added", f"{key}: {why}"))
    return out


def _added_marks(
    path: str, before: Sequence[Mark], after: Sequence[Mark]
) -> list[tuple[Finding, str]]:
    """The marks of ``after`` that ``before`` did not hold: the same kind at the
    same place (its test, or its line's code, wherever the line moved); and for
    a suppression, also the same kind on the line between the same neighbours
    (the line that carried it before, edited: fixing a line that already had
    a ``# type: ignore`` adds none)."""
    counts: dict[tuple[str, str, str], int] = defaultdict(int)
    for m in before:
        counts[m.rule, m.label, m.scope] += 1
    fresh = []
    for m in after:
        key = (m.rule, m.label, m.scope)
        if counts[key] > 0:
            counts[key] -= 1
            continue
        fresh.append(m)
    unmatched: list[Mark] = []
    for m in before:  # the ones no mark of ``after`` took by scope
        key = (m.rule, m.label, m.scope)
        if counts[key] > 0:
            counts[key] -= 1
            unmatched.append(m)
    out: list[tuple[Finding, str]] = []
    for m in fresh:
        same = next((b for b in unmatched if _same_line(b, m)), None)
        if same is not None:
            unmatched.remove(same)
            continue
        where = f"on {m.scope}" if m.rule != "suppression-added" else "added"
        out.append((Finding(path, m.line, m.rule, f"{m.label} {where}"), m.scope))
    return out


def _same_line(before: Mark, after: Mark) -> bool:
    """Whether ``after`` sits on the line ``before`` was on, edited: a
    suppression of the same kind between the same non-blank neighbours."""
    if before.rule != "suppression-added" or (before.rule, before.label) != (
        after.rule,
        after.label,
    ):
        return False
    return any(b and b == a for b, a in zip(before.near, after.near, strict=True))
