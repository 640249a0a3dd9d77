"""What each test came to, from the reports a check's runners wrote, and the
acceptance tests a verdict needs passed.

An exit status says only that a process ended with 0: a module under test
that calls ``os._exit(0)``, a ``tests/__init__.py`` that raises ``SkipTest``,
a ``load_tests`` that returns nothing, a ``process.exit(0)`` all end with 0
having run no test. So a check reports per test (`governor.checks.check_runs` makes the
runners write JUnit XML outside the workspace: pytest's ``--junitxml``,
``node --test``'s junit reporter, unittest through `governor.checks.unittest_report`,
and whatever the job's own command writes there), and the verdict is
``passed`` only when every **acceptance test** ran and passed: none missing,
none skipped, none failed or errored.

The acceptance tests are the job's (``[checks] acceptance``), or else the
tests in its frozen files as they were when the attempt started
(`collect`): a loop's acceptance tests are what it froze. **Every held-out
test is an acceptance test too**, whatever the job names: listed from the
held-out files before they are moved out (`governor.checks.held_out.hide`), so a
held-out test the code under test skips, or a held-out file whose process
ends before its tests (reported as one passing test named by its path), is
not passed. Which acceptance tests are held out is kept (`Acceptance.held_out`):
a verdict names the visible ones that did not pass and only counts the
held-out ones (`Judgement.to_json`), so no name of a held-out test reaches
an outcome, an event, or a next try's prompt.

**Loud, never silent** (`unjudged`): when a job with checks freezes or holds
out files and none holds a test the governor can list (a check script, Go or
shell tests), the verdict over no acceptance test is an exit status again
(the module under test exiting 0 at import passes), and the outcome says so
in a notice naming the files; the job names its tests (``[checks]
acceptance = [...]``) or says the exit status is its verdict (``acceptance =
[]``, no notice).

The reports are the check's words, read with bounds (`MAX_REPORT_BYTES`,
`MAX_REPORTS`, `MAX_KEPT`) by ``xml.etree`` (expat: its entity amplification
limits hold against a hostile file).
"""

from __future__ import annotations

import ast
import os
import posixpath
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal
from xml.etree import ElementTree as ET

from governor.confine import frozen
from governor.policies.policy import Policy
from governor.tamper import looks_like_test

Result = Literal["passed", "failed", "error", "skipped"]
Judged = Literal["passed", "failed", "error", "skipped", "missing"]

MAX_REPORT_BYTES: Final = 16 * 2**20
MAX_REPORTS: Final = 64
MAX_KEPT: Final = 200
"""Per-test results a check's outcome lists (failures first); the rest are counted."""
MAX_ACCEPTANCE: Final = 10_000
_PY_EXT: Final = (".py",)
_JS_EXT: Final = (".js", ".mjs", ".cjs", ".ts", ".mts", ".cts")
_JS_TEST: Final = re.compile(r"""\b(?:test|it)\s*(?:\.\s*\w+\s*)?\(\s*(['"`])((?:\\.|(?!\1).)*)\1""")


@dataclass(frozen=True, slots=True)
class CaseResult:
    """One test a report names: its id (``module.Class.test`` for Python, the
    test's name for ``node --test``), what it came to and why, in short."""

    id: str
    outcome: Result
    detail: str = ""
    runner: str = "junit"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"test": self.id, "outcome": self.outcome, "runner": self.runner}
        if self.detail:
            out["detail"] = self.detail
        return out


@dataclass(frozen=True, slots=True)
class Reports:
    """What a check's report folder held: the results, the runs that began and
    never reported (a unittest run ended from inside), and the files that could
    not be read."""

    results: tuple[CaseResult, ...] = ()
    unfinished: int = 0
    unreadable: tuple[str, ...] = ()


def read_reports(folder: str) -> Reports:
    """Every JUnit XML file the check wrote into ``folder`` (its own, not the workspace)."""
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return Reports()
    results: list[CaseResult] = []
    unreadable: list[str] = []
    xml = [n for n in names if n.endswith(".xml")][:MAX_REPORTS]
    unfinished = sum(
        1 for n in names if n.endswith(".started") and n[: -len(".started")] + ".xml" not in names
    )
    for name in xml:
        runner = _runner_of(name)
        try:
            fd = os.open(os.path.join(folder, name), os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as f:
                data = f.read(MAX_REPORT_BYTES + 1)
            if len(data) > MAX_REPORT_BYTES:
                raise ValueError("too large")
            root = ET.fromstring(data)
        except (OSError, ValueError, ET.ParseError):
            unreadable.append(name)
            continue
        results.extend(_cases(root, runner))
    return Reports(tuple(results), unfinished, tuple(unreadable))


def _runner_of(name: str) -> str:
    for runner in ("pytest", "unittest", "node"):
        if name.startswith(runner):
            return runner
    return "junit"


def _cases(root: ET.Element, runner: str) -> Iterable[CaseResult]:
    for case in root.iter("testcase"):
        name = case.get("name") or ""
        classname = case.get("classname") or ""
        ident = name if runner == "node" else f"{classname}.{name}" if classname else name
        outcome: Result = "passed"
        detail = ""
        for child in case:
            tag = child.tag
            if tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]  # type: ignore[assignment]
                detail = (child.get("message") or child.text or "").strip()[:300]
                if outcome != "skipped":
                    break
        yield CaseResult(ident, outcome, detail, runner)


@dataclass(frozen=True, slots=True)
class Acceptance:
    """The tests a passed verdict needs, as ``path::Class::test`` (Python) or
    ``path::test name`` (JavaScript), and where they come from
    (``job``: ``[checks] acceptance``; ``frozen``: the frozen files' tests);
    ``held_out``: those of them listed from the held-out files (in ``tests``
    too), never named outside the governor."""

    tests: tuple[str, ...] = ()
    source: str = "frozen"
    held_out: tuple[str, ...] = ()


def collect(files: Iterable[tuple[str, str]]) -> tuple[str, ...]:
    """The tests in ``files`` (``(relative path, absolute path)``, the frozen
    files as the attempt starts): Python test functions and the test methods of
    test classes (``Test*``, or a ``*TestCase`` subclass) read with `ast`;
    JavaScript ``test('name')`` and ``it('name')`` calls. Only test files count
    (`governor.tamper.looks_like_test`); an unreadable one names none."""
    out: list[str] = []
    for rel, path in sorted(files):
        if not looks_like_test(rel) or len(out) >= MAX_ACCEPTANCE:
            continue
        try:
            with open(path, "rb") as f:
                data = f.read(2**20 + 1)
        except OSError:
            continue
        if len(data) > 2**20:
            continue
        if rel.endswith(_PY_EXT):
            out += [f"{rel}::{name}" for name in _python_tests(data)]
        elif rel.endswith(_JS_EXT):
            text = data.decode("utf-8", "replace")
            out += [f"{rel}::{m.group(2)}" for m in _JS_TEST.finditer(text)]
    return tuple(dict.fromkeys(out))[:MAX_ACCEPTANCE]


def _python_tests(data: bytes) -> list[str]:
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test"):
            out.append(node.name)
        elif isinstance(node, ast.ClassDef) and _test_class(node):
            out += [
                f"{node.name}::{item.name}"
                for item in node.body
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef)
                and item.name.startswith("test")
            ]
    return out


def _test_class(node: ast.ClassDef) -> bool:
    if node.name.startswith("Test"):
        return True
    for base in node.bases:
        name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
        if str(name).endswith("TestCase"):
            return True
    return False


@dataclass(frozen=True, slots=True)
class Judgement:
    """The acceptance tests against the reports: how many, how many passed, and
    each that did not, with what it came to (``missing``: no report names it)."""

    expected: int = 0
    passed: int = 0
    not_passed: tuple[tuple[str, Judged], ...] = ()
    source: str = "frozen"
    failed_elsewhere: tuple[str, ...] = ()
    """Reported tests outside the acceptance set that failed or errored."""
    unfinished: int = 0
    held_out: frozenset[str] = frozenset()
    """The acceptance tests that are held out: counted, never named, in `to_json`;
    with any, the tests failed elsewhere are counted too (one may be a
    held-out test the listing could not name: a generated one)."""

    @property
    def ok(self) -> bool:
        return not self.not_passed and not self.failed_elsewhere and not self.unfinished

    def to_json(self) -> dict[str, Any]:
        """As an outcome's ``tests`` holds it: the held-out tests counted
        (``held_out``, ``held_out_not_passed``), never named."""
        shown = [(t, o) for t, o in self.not_passed if t not in self.held_out]
        out: dict[str, Any] = {
            "acceptance": self.expected,
            "source": self.source,
            "passed": self.passed,
            "not_passed": [{"test": t, "outcome": o} for t, o in shown[:MAX_KEPT]],
        }
        if len(shown) > MAX_KEPT:
            out["more_not_passed"] = len(shown) - MAX_KEPT
        if self.held_out:
            out["held_out"] = len(self.held_out)
            out["held_out_not_passed"] = len(self.not_passed) - len(shown)
        if self.failed_elsewhere and self.held_out:
            out["failed_elsewhere_count"] = len(self.failed_elsewhere)
        elif self.failed_elsewhere:
            out["failed_elsewhere"] = list(self.failed_elsewhere[:MAX_KEPT])
        if self.unfinished:
            out["unfinished_runs"] = self.unfinished
        return out


def judge(acceptance: Acceptance, results: Sequence[CaseResult], unfinished: int = 0) -> Judgement:
    """Each acceptance test against every check's results."""
    not_passed: list[tuple[str, Judged]] = []
    passed = 0
    matched: set[int] = set()
    for test in acceptance.tests:
        found = [i for i, r in enumerate(results) if _matches(test, r)]
        matched.update(found)
        got = _worst([results[i].outcome for i in found])
        if got == "passed":
            passed += 1
        else:
            not_passed.append((test, got))
    # A held-out file's every test must pass, listed or not: the listing names
    # tests by form (`collect`), and a test it could not name (a subclass of a
    # local base) skipped by the code under test would otherwise pass unseen.
    held_modules = tuple(
        f"{path[:-3].replace('/', '.')}."
        for path in {t.split("::", 1)[0] for t in acceptance.held_out}
        if path.endswith(".py")
    )
    elsewhere = tuple(
        r.id
        for i, r in enumerate(results)
        if i not in matched
        and (r.outcome in ("failed", "error") or (r.outcome == "skipped" and r.id.startswith(held_modules)))
    )
    return Judgement(
        len(acceptance.tests),
        passed,
        tuple(not_passed),
        acceptance.source,
        elsewhere,
        unfinished,
        frozenset(acceptance.held_out),
    )


def _worst(outcomes: Sequence[Result]) -> Judged:
    if not outcomes:
        return "missing"
    for worst in ("error", "failed", "skipped"):
        if worst in outcomes:
            return worst
    return "passed"


def _matches(test: str, result: CaseResult) -> bool:
    path, _, name = test.partition("::")
    ident = re.sub(r"\[.*\]$", "", result.id)
    if path.endswith(_JS_EXT):
        return result.runner in ("node", "junit") and (ident == name or ident.endswith(" > " + name))
    dotted = posixpath.splitext(path)[0].replace("/", ".") + "." + name.replace("::", ".")
    if ident == dotted:
        return True
    depth = name.count("::") + 1  # the module, and the class when there is one
    return dotted.endswith("." + ident) and ident.count(".") >= depth


@dataclass(slots=True)
class Kept:
    """A check's per-test results as its outcome lists them: failures first, bounded."""

    shown: list[CaseResult] = field(default_factory=list)
    more: int = 0


def kept(results: Sequence[CaseResult]) -> Kept:
    order = {"error": 0, "failed": 1, "skipped": 2, "passed": 3}
    ranked = sorted(results, key=lambda r: order[r.outcome])
    return Kept(ranked[:MAX_KEPT], max(0, len(ranked) - MAX_KEPT))


def acceptance_of(policy: Policy, held_out: tuple[str, ...] = ()) -> Acceptance:
    """The job's acceptance tests (``[checks] acceptance``), or the tests in its
    frozen files now, and the held-out tests ``held_out`` (listed before they
    were moved out, `governor.checks.held_out.HeldOut.tests`): call it as the attempt
    starts, before the agent can touch them."""
    if policy.acceptance is not None:
        named, source = policy.acceptance, "job"
    else:
        named, source = collect(frozen.files(policy)), "frozen"
    tests = tuple(dict.fromkeys((*named, *held_out)))[:MAX_ACCEPTANCE]
    return Acceptance(tests, source, tuple(t for t in held_out if t in tests))


def unjudged(policy: Policy, acceptance: Acceptance, held_files: int = 0) -> list[str]:
    """What the outcome must say when the bound ``policy``'s checks come to a
    verdict over no test the governor could list (see the module's header):
    its frozen files (with no ``[checks] acceptance``) or its ``held_files``
    held-out files (unless ``acceptance = []`` takes the exit status as the
    verdict) hold none. Call it as the attempt starts, with its acceptance."""
    if not policy.checks or policy.acceptance == ():
        return []
    out = []
    if held_files and not acceptance.held_out:
        out.append(
            f"the {held_files} held-out file(s) hold no test the governor can list "
            "(Python test functions and methods, node test() and it() calls): whether they "
            "ran is the checks' exit status only; hold out such tests, or say "
            "[checks] acceptance = [] to take the exit status as the verdict"
        )
    if policy.acceptance is None and not acceptance.tests:
        files = frozen.files(policy)
        if files:
            out.append(
                f"the frozen {_some(files)} hold no test the governor can list (Python test "
                "functions and methods, node test() and it() calls): the verdict is the "
                "checks' exit status, which code under test gives by exiting 0; name the "
                "tests with [checks] acceptance = [\"path::test\"], or say acceptance = [] "
                "to take the exit status as the verdict"
            )
    return out


def _some(files: Sequence[tuple[str, str]]) -> str:
    names = sorted(rel for rel, _ in files)
    more = f" and {len(names) - 3} more" if len(names) > 3 else ""
    return f"{len(names)} file(s) ({', '.join(names[:3])}{more})"
