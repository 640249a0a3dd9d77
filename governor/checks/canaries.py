"""Canaries: tests the agent could not know, put into each check's own view of
the acceptance test files, whose results say whether the check's runner
tells the truth.

The per-test results a check reports are the words of the process that runs
the workspace's code: the module under test, imported by the runner, can
no-op ``assertEqual`` or ``assert.deepEqual``, replace pytest's ``runtest``,
patch ``TestResult.addFailure`` or rewrite the JUnit files at exit, and then
*every* test passes, held-out ones too, without knowing any test. **A runner
that lies about one failure lies about the canary.** So for every check the
governor writes, fresh for that check (`plant`):

- a copy of each acceptance test file (`governor.checks.test_results.Acceptance`)
  and each held-out test file (`carriers`) with canary tests appended, shown read-only at the file's path in that
  check's sandbox only (`governor.sandbox.plan.profile.Profile.shown_as`): never in the
  agent's workspace, never there before or after, made after the agent and
  everything it started are gone;
- names drawn at random for each check, shaped like their neighbours (a
  ``Test*`` class of ``test_*`` methods, ``test_*`` functions, a
  ``test('...')`` named like the file's tests), values drawn at random;
- some that **must fail** and some that **must pass**, written with the
  assertion families runners use: ``assertEqual``, ``assertTrue``, a bare
  ``assert ==``, a thrown error (a ``unittest.TestCase`` class, which pytest
  runs too); plain ``assert`` and ``pytest.raises`` functions (pytest only);
  ``node:assert``'s ``deepEqual``, ``strictEqual``, ``equal``, ``ok`` and a
  thrown error (``node --test`` and any runner that runs the file).

After the check, before any verdict (`judge`), every canary a runner reported
must be reported as it must end (must-fail: failed or errored; must-pass:
passed), and none of a file's canaries may be missing once a test of that
file was reported; otherwise the check's results are not believed (`Lie`: the
verdict is ``failed`` and the outcome has a ``runner-lied`` finding naming the
check and what was misreported, never a canary's source). The canaries'
results are taken out of the check's results: they are never acceptance
tests, never in the outcome's ``tests`` counts or a check's ``tests``, and
the lines of the check's output tail that name or quote them are dropped
(`scrub`), so a next try's digest does not carry them.

Because the must-fail canaries fail, an honest runner exits non-zero: a
check's exit status counts as passed when it is 0, or when every test its
reports name that did not pass is a must-fail canary (`Judged.explained`).

What this does not close (said in ``docs/loops.md``): a lie that recognises
the tests it lies about. The agent knows the visible acceptance tests (their
names, their files' text), so code that lies only about those, or about
every test but what was appended to a file it knows, still passes them;
held-out tests (names and files it never saw, indistinguishable from a
canary) are what catch that. A check that runs only some tests of an acceptance file by name (``-k``,
``file::test``) runs no canary of it, and is ``runner-lied``: run the file.
"""

from __future__ import annotations

import ast
import os
import re
import secrets
import shlex
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from governor.checks.test_results import _JS_EXT, _PY_EXT, Acceptance, CaseResult, _matches, collect
from governor.confine import frozen
from governor.policies.policy import Policy

Expect = Literal["passed", "failed"]
Group = Literal["unittest", "pytest", "node"]

MAX_FILE_BYTES: Final = 2**20
"""An acceptance file larger than this gets no canaries (as `collect` reads none)."""
MAX_FILES: Final = 64
"""Acceptance files a check gets canaries in (the first, by path)."""

_WORDS: Final = (
    "parse", "empty", "order", "keeps", "value", "round", "trip", "large", "small", "input",
    "output", "handles", "returns", "single", "many", "none", "zero", "negative", "limit",
    "default", "nested", "repeat", "unicode", "spaces", "upper", "lower", "first", "last",
    "merge", "split", "join", "count", "total", "range", "bounds", "format", "string", "number",
    "list", "items", "pairs", "keys", "sorted", "unique", "twice", "again", "basic", "edge",
    "case", "simple", "mixed", "long", "short", "valid", "invalid", "missing", "extra", "state",
)  # fmt: skip
_RNG: Final = secrets.SystemRandom()


@dataclass(frozen=True, slots=True)
class Canary:
    """One canary: the file it is in (relative, as acceptance tests name it), the
    test as an acceptance test would name it after ``::``, how it must end,
    which runners run it and the assertion family it uses (for the finding)."""

    file: str
    name: str
    expect: Expect
    group: Group
    family: str

    def matches(self, result: CaseResult) -> bool:
        return _matches(f"{self.file}::{self.name}", result)


@dataclass(frozen=True, slots=True)
class Planted:
    """The canaries of one check and the copies that carry them, as (host copy,
    path inside the sandbox)."""

    canaries: tuple[Canary, ...] = ()
    shown_as: tuple[tuple[str, str], ...] = ()
    words: frozenset[str] = frozenset()
    """What names or quotes a canary in the check's output (`scrub`)."""
    starts: tuple[tuple[str, int], ...] = ()
    """(file, first line of its canaries): a frame or ``test at FILE:LINE`` past it is a canary's."""


@dataclass(frozen=True, slots=True)
class Lie:
    """What a check misreported of its canaries: each as (how it must end, what
    was reported, family), never its name or source."""

    misreported: tuple[tuple[Expect, str, str], ...]

    def detail(self) -> str:
        must_fail = [(got, fam) for want, got, fam in self.misreported if want == "failed"]
        must_pass = [(got, fam) for want, got, fam in self.misreported if want == "passed"]
        parts = []
        if must_fail:
            parts.append(f"{len(must_fail)} test(s) that must fail reported " + _said(must_fail))
        if must_pass:
            parts.append(f"{len(must_pass)} test(s) that must pass reported " + _said(must_pass))
        return (
            "; ".join(parts)
            + ": tests the agent could not know, put into this check's own copy of the "
            "acceptance test files, were misreported, so none of its results is believed "
            "(code in the runner's process changes what it reports)"
        )


def _said(items: Sequence[tuple[str, str]]) -> str:
    outcomes = sorted({got for got, _ in items})
    families = sorted({fam for _, fam in items})
    return f"{'/'.join(outcomes)} ({', '.join(families)})"


@dataclass(frozen=True, slots=True)
class Judged:
    """A check's results with its canaries taken out, and what the canaries say."""

    results: tuple[CaseResult, ...]
    lie: Lie | None = None
    explained: bool = False
    """Every reported test that did not pass is a must-fail canary, and one was
    reported: a non-zero exit status is the canaries', not the check's."""
    reported: int = 0
    planted: int = 0


def carriers(policy: Policy, acceptance: Acceptance) -> Acceptance:
    """The tests whose files carry canaries: the acceptance tests, and the
    held-out files' tests (``[sandbox] held_out``, back in place for the
    checks). In a held-out file the agent never saw, a canary cannot be told
    from a held-out test by what was added to a file it knows: a lie that
    spares what was appended to the visible files lies about those."""
    if not policy.held_out:
        return acceptance
    try:
        found = collect(frozen.files_under(policy.held_out, policy.roots))
    except (frozen.FrozenTooLarge, OSError):
        return acceptance
    return Acceptance(tuple(dict.fromkeys((*acceptance.tests, *found))), acceptance.source)


def acceptance_files(acceptance: Acceptance) -> list[str]:
    """The files the acceptance tests are in, in order, without repeats."""
    files = dict.fromkeys(t.partition("::")[0] for t in acceptance.tests)
    return [f for f in files if f.endswith(_PY_EXT + _JS_EXT)][:MAX_FILES]


def plant(acceptance: Acceptance, roots: Sequence[str], folder: str) -> Planted:
    """Fresh canaries for one check: for each acceptance file found in ``roots``
    (the first root that has it), a copy with canaries appended written into
    ``folder`` (the governor's, outside every root). A file that cannot be read
    or does not parse gets none."""
    canaries: list[Canary] = []
    shown: list[tuple[str, str]] = []
    words: set[str] = set()
    starts: list[tuple[str, int]] = []
    for n, rel in enumerate(acceptance_files(acceptance)):
        path = next(
            (os.path.join(r, rel) for r in roots if os.path.isfile(os.path.join(r, rel))), None
        )
        if path is None or os.path.islink(path):
            continue
        try:
            with open(path, "rb") as f:
                data = f.read(MAX_FILE_BYTES + 1)
        except OSError:
            continue
        if len(data) > MAX_FILE_BYTES:
            continue
        made = _python(rel, data) if rel.endswith(_PY_EXT) else _javascript(rel, data)
        if made is None:
            continue
        text, planted, said = made
        at = _main_guard(data) if rel.endswith(_PY_EXT) else len(data)
        head = data[:at].rstrip(b"\n") + b"\n" if data[:at].strip() else b""
        copy = os.path.join(folder, f"canary-{n}")
        with open(copy, "wb") as f:
            f.write(head + text.encode("ascii") + (b"\n\n" + data[at:] if data[at:] else b""))
        os.chmod(copy, stat.S_IMODE(os.stat(path).st_mode))
        canaries += planted
        words |= said
        shown.append((copy, path))
        starts.append((rel, head.count(b"\n") + 1))
    return Planted(tuple(canaries), tuple(shown), frozenset(words), tuple(starts))


def _test_case(tree: ast.Module) -> str | None:
    """How the file itself names ``unittest.TestCase`` at its top level, if it
    does (the canaries' class is written as its neighbours are, and needs no
    import of its own)."""
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "unittest":
                    return f"{alias.asname or 'unittest'}.TestCase"
        elif isinstance(node, ast.ImportFrom) and node.module == "unittest" and not node.level:
            for alias in node.names:
                if alias.name == "TestCase":
                    return alias.asname or "TestCase"
    return None


def _main_guard(data: bytes) -> int:
    """Where in a Python file its canaries go: before a top-level ``if __name__
    == "__main__":`` (which runs the tests when the file is run, before any
    class after it is made), else at its end."""
    tree = ast.parse(data)
    for node in tree.body:
        if isinstance(node, ast.If) and "__name__" in ast.dump(node.test):
            lines = data.split(b"\n")
            return sum(len(line) + 1 for line in lines[: node.lineno - 1])
    return len(data)


def _name(taken: set[str], sep: str, count: int = 2) -> str:
    while True:
        name = sep.join(_RNG.sample(_WORDS, count))
        if name not in taken:
            taken.add(name)
            return name


def _python(rel: str, data: bytes) -> tuple[str, list[Canary], set[str]] | None:
    try:
        tree = ast.parse(data)
    except (SyntaxError, ValueError):
        return None
    taken = {
        n.name
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
    }
    taken |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    a, b = _RNG.randint(2, 97), _RNG.randint(2, 97)
    off = _RNG.randint(1, 9)
    word = _RNG.choice(_WORDS)
    methods: list[tuple[Expect, str, str]] = [
        ("passed", "assertEqual", f"self.assertEqual(sum([{a}, {b}]), {a + b})"),
        ("passed", "assert ==", f"assert max([{a}, {b}]) == {max(a, b)}"),
        ("passed", "assertTrue", f"self.assertTrue(str({a}).isdigit())"),
        ("failed", "assertEqual", f"self.assertEqual(sum([{a}, {b}]), {a + b + off})"),
        ("failed", "assertTrue", f"self.assertTrue(len([{a}, {b}]) == {2 + off})"),
        ("failed", "assert ==", f"assert min([{a}, {b}]) == {min(a, b) - off}"),
        ("failed", "a raised error", f'int("{word}")'),
    ]
    functions: list[tuple[Expect, str, str]] = [
        ("failed", "assert ==", f'assert len("{word}") == {len(word) + off}'),
        (
            "passed",
            "pytest.raises",
            f"import pytest  # type: ignore[import-not-found,unused-ignore]\n\n"
            f"    with pytest.raises(ZeroDivisionError):\n        divmod({a}, 0)",
        ),
        (
            "failed",
            "pytest.raises",
            f"import pytest  # type: ignore[import-not-found,unused-ignore]\n\n"
            f"    with pytest.raises(KeyError):\n        {{{a}: {b}}}.get({a + b})",
        ),
    ]
    _RNG.shuffle(methods)
    _RNG.shuffle(functions)
    module = _name(taken, "_")
    # after every class of the file by name, as unittest orders them (the last
    # one's name and more): a lie that starts in a test before (a patch made
    # as the code runs) is told
    classes = [n.name for n in tree.body if isinstance(n, ast.ClassDef)]
    last = max(classes, default="Test")
    cls = last + "".join(w.title() for w in _name(taken, " ").split())
    base = _test_case(tree)
    imported = "" if base else f"\n\nimport unittest as _{module}  # noqa: E402"
    base = base or f"_{module}.TestCase"
    out = [f"{imported}\n\n{chr(10) if imported else ''}class {cls}({base}):"]
    canaries: list[Canary] = []
    said = {cls, f"_{module}"}
    for expect, family, body in methods:
        test = "test_" + _name(taken, "_")
        out.append(f"    def {test}(self) -> None:\n        {body}\n")
        canaries.append(Canary(rel, f"{cls}::{test}", expect, "unittest", family))
        said |= {test, body.strip()}
    for expect, family, body in functions:
        test = "test_" + _name(taken, "_")
        out.append(f"\ndef {test}() -> None:\n    {body}\n")
        canaries.append(Canary(rel, test, expect, "pytest", family))
        said |= {test, *(line.strip() for line in body.splitlines())}
    return "\n".join(out), canaries, said


def _javascript(rel: str, data: bytes) -> tuple[str, list[Canary], set[str]] | None:
    from governor.checks.test_results import _JS_TEST

    text = data.decode("utf-8", "replace")
    names = [m.group(2) for m in _JS_TEST.finditer(text)]
    if not names:
        return None
    call = "test" if re.search(r"\btest\s*\(", text) else "it"
    firsts = [n.split()[0] for n in names if n.split()]
    taken = set(names)
    a, b = _RNG.randint(2, 97), _RNG.randint(2, 97)
    if a == b:
        b += 1
    off = _RNG.randint(1, 9)
    word = _RNG.choice(_WORDS)
    strict = "(await import('node:assert/strict')).default"
    loose = "(await import('node:assert')).default"
    bodies: list[tuple[Expect, str, str]] = [
        (
            "passed",
            "assert.deepEqual",
            f"{strict}.deepEqual([{a}, {b}].map(String), ['{a}', '{b}'])",
        ),
        ("passed", "assert.strictEqual", f"{loose}.strictEqual(Math.max({a}, {b}), {max(a, b)})"),
        ("failed", "assert.deepEqual", f"{strict}.deepEqual([{a}, {b}].reverse(), [{a}, {b}])"),
        (
            "failed",
            "assert.strictEqual",
            f"{loose}.strictEqual(Math.min({a}, {b}), {min(a, b) - off})",
        ),
        ("failed", "assert.equal", f"{loose}.equal(String({a}).length, {len(str(a)) + off})"),
        ("failed", "assert.ok", f"{loose}.ok({min(a, b)} > {max(a, b)})"),
        ("failed", "a thrown error", f"throw new RangeError('{word}')"),
    ]
    _RNG.shuffle(bodies)
    out = ["\n"]
    canaries: list[Canary] = []
    said: set[str] = set()
    for expect, family, body in bodies:
        lead = _RNG.choice(firsts) + " " if firsts and _RNG.random() < 0.7 else ""
        name = lead + _name(taken, " ")
        out.append(f"{call}('{name}', async () => {{\n  {body};\n}});\n")
        canaries.append(Canary(rel, name, expect, "node", family))
        said |= {name, body}
    return "\n".join(out), canaries, said


_RUNNER_FLAGS: Final = {
    "pytest": re.compile(
        r"^(-x|--exitfirst|--maxfail(=.*)?|--sw|--stepwise(-skip)?|--sw-skip|-k.*|--lf|--last-failed"
        r"|--deselect(=.*)?|-m.*|--co|--collect-only"
        # short options together (-xvs): up to the first that takes a value (-rxs is -r's "xs")
        r"|-[a-jlnq-zA-Z]*?(?<![rpcoWm])[xk].*)$"
    ),
    "unittest": re.compile(r"^(-f|--failfast|-k.*|-[a-jlnq-zA-Z]*?[fk].*)$"),
    "node": re.compile(r"^--test-(name-pattern|skip-pattern|only)(=.*)?$"),
}
"""The options, by runner, that stop at the first failure or run some tests by
name or mark: with them a runner never reaches a file's canaries, and an honest
check would be judged ``runner-lied``."""


def cannot_judge(command: str) -> str | None:
    """Why the canaries cannot judge ``command`` (a check's line), or None:
    a runner told to stop at its first failure (every check has the must-fail
    canaries' failures), or to run some tests only (by name, node id or mark).
    Said before the attempt starts, naming the option, rather than an honest
    check found ``runner-lied`` after the agent's whole run. Only options
    written on the line itself are seen; a script or Makefile that adds one is
    found ``runner-lied`` (docs/loops.md)."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    runner: str | None = None  # the runner whose options the words after it are
    for word in words:
        name = os.path.basename(word)
        if name in ("pytest", "py.test", "unittest", "node"):
            runner = "pytest" if name == "py.test" else name
            continue
        if runner is None or word in ("&&", "||", ";", "|"):
            runner = None
            continue
        if "::" in word and runner == "pytest":
            return f"{word!r} runs some tests of a file by name"
        if _RUNNER_FLAGS[runner].match(word):
            return f"{runner}'s {word} stops at the first failure or runs some tests only"
    return None


def judge(
    planted: Planted, results: Iterable[CaseResult], acceptance: Acceptance | None = None
) -> Judged:
    """A check's ``results`` without its canaries, and whether its runners told
    the truth about them (see the module's header). A canary is owed a result
    once a runner that runs its kind reported a test of its file (another
    canary, or one of ``acceptance``): a pytest-only canary when pytest did,
    the others when any runner did. An owed canary no report names is
    misreported (``missing``): a report that names only the tests its writer
    knew is a lie too."""
    every = list(results)
    if not planted.canaries:
        return Judged(tuple(every))
    mine: set[int] = set()
    misreported: list[tuple[Expect, str, str]] = []
    ran: set[tuple[str, str]] = set()  # (file, runner) of a reported test
    found: dict[Canary, list[CaseResult]] = {}
    for canary in planted.canaries:
        at = [i for i, r in enumerate(every) if canary.matches(r)]
        mine.update(at)
        found[canary] = [every[i] for i in at]
        ran |= {(canary.file, every[i].runner) for i in at}
    for test in acceptance.tests if acceptance is not None else ():
        file = test.partition("::")[0]
        ran |= {(file, r.runner) for r in every if _matches(test, r)}
    reported = 0
    for canary, hits in found.items():
        if not hits:
            owed = any(
                f == canary.file and (canary.group != "pytest" or runner == "pytest")
                for f, runner in ran
            )
            if owed:
                misreported.append((canary.expect, "missing", canary.family))
            continue
        reported += 1
        for r in hits:
            ok = (
                r.outcome == "passed"
                if canary.expect == "passed"
                else r.outcome in ("failed", "error")
            )
            if not ok:
                misreported.append((canary.expect, r.outcome, canary.family))
                break
    rest = tuple(r for i, r in enumerate(every) if i not in mine)
    canary_fails = any(c.expect == "failed" and hits for c, hits in found.items())
    explained = canary_fails and all(r.outcome in ("passed", "skipped") for r in rest)
    lie = Lie(tuple(misreported)) if misreported else None
    return Judged(rest, lie, explained and lie is None, reported, len(planted.canaries))


_UNITTEST_SEP: Final = re.compile(r"^={70}$")
_UNITTEST_END: Final = re.compile(r"^-{70}$")
_PYTEST_HEADER: Final = re.compile(r"^_{3,} .* _{3,}$")
_PYTEST_SECTION: Final = re.compile(r"^={3,} .* ={3,}$")
_AT_LINE: Final = re.compile(r"(?:test at |[(\s/])(\S+?):(\d+):\d+\)?$")


def scrub(text: str, planted: Planted) -> str:
    """``text`` (a check's output) without what names or quotes a canary: a
    unittest failure block (``====`` ... up to the next), a pytest one (``___
    name ___`` ... up to the next header or section), and any other line
    that names one (node's ``✖ name``, ``test at FILE:LINE`` past the file's
    own lines, a ``FAILED`` summary line) with the indented lines after it.
    The runner's counts (``Ran 12 tests``, ``FAILED (failures=4)``) stay."""
    if not planted.words:
        return text
    words = [w for w in planted.words if w]

    def hit(line: str) -> bool:
        if any(w in line for w in words):
            return True
        at = _AT_LINE.search(line.rstrip())
        if at is None:
            return False
        return any(at.group(1).endswith(f) and int(at.group(2)) >= n for f, n in planted.starts)

    lines = text.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i].rstrip("\n")
        j = i + 1
        if _UNITTEST_SEP.match(line) and j < len(lines) and hit(lines[j]):
            while j < len(lines) and not _UNITTEST_SEP.match(lines[j].rstrip("\n")):
                if (
                    _UNITTEST_END.match(lines[j].rstrip("\n"))
                    and lines[j + 1 :][:1] != []
                    and (lines[j + 1].startswith("Ran "))
                ):
                    break
                j += 1
        elif _PYTEST_HEADER.match(line) and hit(line):
            while j < len(lines) and not (
                _PYTEST_HEADER.match(lines[j].rstrip("\n"))
                or _PYTEST_SECTION.match(lines[j].rstrip("\n"))
            ):
                j += 1
        elif hit(line):
            while j < len(lines) and (lines[j].startswith((" ", "\t")) or not lines[j].strip()):
                j += 1
        else:
            out.append(lines[i])
        i = j
    return "".join(out)
