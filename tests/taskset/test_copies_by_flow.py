"""Which literal of a test the copier changes (`governor.checks.expected`,
`governor.checks.canaries._js_mutants`): the one whose value reaches the
expected side of an equality first, wherever the equality is written (a
helper, a loop's table, a ``subTest``, a computed or named expectation), and
none whose change could let an honest copy pass (used by the computed side,
used before, or behind something that may end the test early). The attacks
these close, through the real ``governor run``, are in
``test_gaming_outside3.py``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from checkout import needs_a_visible_checkout
from tasks import BY_NAME, check_command
from test_gaming_outside import CHECK_PYTHON, HONEST, _attempt_in, _workspace

from governor.checks import canaries, expected

_HEAD = "import unittest\n\nimport calc as m\n\n\nclass TestHidden(unittest.TestCase):\n"

COPIED: dict[str, tuple[str, str]] = {
    # shape: (the file, the literal changed, as ``line:column`` of the file)
    "a literal in the test's own body": (
        _HEAD + "    def test_a(self):\n        self.assertEqual(m.add(10, 7), 17)\n",
        "8:39",
    ),
    "a helper's argument": (
        _HEAD + "    def check(self, a, b, want):\n        self.assertEqual(m.add(a, b), want)\n\n"
        "    def test_a(self):\n        self.check(10, 7, 17)\n",
        "11:26",
    ),
    "a helper of a base class of the module": (
        "import unittest\n\nimport calc as m\n\n\nclass Sums(unittest.TestCase):\n"
        "    def check(self, a, b, want):\n        self.assertEqual(m.add(a, b), want)\n\n\n"
        "class LargerSums(Sums):\n    def test_a(self):\n        self.check(10, 7, 17)\n",
        "13:26",
    ),
    "a row of the loop's table": (
        _HEAD + "    def test_a(self):\n        for a, b, want in [(10, 7, 17)]:\n"
        "            self.assertEqual(m.add(a, b), want)\n",
        "8:35",
    ),
    "a subTest's body": (
        _HEAD + "    def test_a(self):\n        with self.subTest(a=10):\n"
        "            self.assertEqual(m.add(10, 7), 17)\n",
        "9:43",
    ),
    "a named expectation": (
        _HEAD + "    def test_a(self):\n        got = m.add(10, 7)\n        want = 17\n"
        "        self.assertEqual(got, want)\n",
        "9:15",
    ),
    "a pytest table bound to a name": (
        "import calc as m\n\n\ndef test_a():\n    cases = [(1, 2, 3)]\n"
        "    for a, b, want in cases:\n        assert m.add(a, b) == want\n",
        "5:20",
    ),
}


def _changeable(text: str) -> set[str]:
    tree = ast.parse(text)
    found: set[str] = set()
    for node in tree.body:
        owners = [(node, None)] if isinstance(node, ast.FunctionDef) else []
        if isinstance(node, ast.ClassDef):
            owners = [(n, node) for n in node.body if isinstance(n, ast.FunctionDef)]
        for test, cls in owners:
            if test.name.startswith("test"):
                for c in expected.changeable(tree, cls, test, canaries._mutated):
                    found.add(f"{c.constant.lineno}:{c.constant.col_offset}")
    return found


def _every_question(rel: str, data: bytes) -> canaries._Draw:
    """A copies' run's draw that copies every question the file asks."""
    return canaries._Draw(frozenset(canaries._questions(rel, data)))


@pytest.mark.parametrize("shape", list(COPIED))
def test_the_literal_changed_is_the_one_that_flows_into_the_expected_side(shape: str) -> None:
    text, where = COPIED[shape]
    assert _changeable(text) == {where}
    rel = "tests/hidden/test_h.py"
    made = canaries._mutants(rel, text.encode(), _every_question(rel, text.encode()))
    assert made is not None
    copy, [canary], _ = made
    assert canary.expect == "failed" and canary.twin == canary.name
    # the file's own text, that literal changed in its place
    line, column = (int(n) for n in where.split(":"))
    was, now = text.splitlines(), copy.decode().splitlines()
    assert len(now) == len(was)
    assert [n for n, (a, b) in enumerate(zip(was, now, strict=True), 1) if a != b] == [line]
    assert now[line - 1][:column] == was[line - 1][:column]


NOT_COPIED: dict[str, str] = {
    "the computed side uses it": _HEAD
    + "    def test_a(self):\n        want = 17\n        self.assertEqual(m.add(want, 0), want)\n",
    "a context that may swallow an error comes before": _HEAD
    + "    def test_a(self):\n        with self.assertRaises(ValueError):\n"
    + "            m.add(1, 'x')\n        self.assertEqual(m.add(10, 7), 17)\n",
    "the helper uses it before comparing": _HEAD
    + "    def check(self, a, b, want):\n        print(want)\n"
    + "        self.assertEqual(m.add(a, b), want)\n\n"
    + "    def test_a(self):\n        self.check(10, 7, 17)\n",
    "a return may come before": _HEAD
    + "    def test_a(self):\n        if m.skip():\n            return\n"
    + "        self.assertEqual(m.add(10, 7), 17)\n",
    "a loop over what is not a table": _HEAD
    + "    def test_a(self):\n        for want in m.wanted():\n"
    + "            self.assertEqual(m.add(10, 7), 17)\n",
    "a change that does not change the expected value": "import calc as m\n\n\n"
    + "def test_a():\n    assert m.add(1, 2) == 0 * 0\n",
}


@pytest.mark.parametrize("shape", list(NOT_COPIED))
def test_no_literal_is_changed_where_an_honest_copy_might_pass(shape: str) -> None:
    assert _changeable(NOT_COPIED[shape]) == set()
    data = NOT_COPIED[shape].encode()
    assert canaries._mutants("tests/hidden/test_h.py", data, _every_question("h.py", data)) is None


def test_a_table_of_many_rows_is_copied_from_the_rows_walked_before_the_walk_stops() -> None:
    """The walk records a bounded number of events; a literal is judged by what
    happens up to its first use, so the first rows of a long table still give
    copies (and the last rows, never reached, none)."""
    rows = ", ".join(f"({i}, {i}, {2 * i})" for i in range(3000))
    text = f"import calc as m\n\n\ndef test_a():\n    for a, b, want in [{rows}]:\n"
    text += "        assert m.add(a, b) == want\n"
    found = _changeable(text)
    assert found and len(found) < 3000
    data = text.encode()
    assert canaries._mutants("tests/h.py", data, _every_question("h.py", data)) is not None


_JS_HEAD = (
    "import { test } from 'node:test';\nimport assert from 'node:assert/strict';\n"
    "import * as m from '../../stats.mjs';\n\n"
)
JS_COPIED = {
    "a helper's argument": (
        _JS_HEAD + "function check(xs, want) {\n  assert.deepEqual(m.mean(xs), want);\n}\n\n"
        "test('hidden mean', () => {\n  check([1, 2, 3, 6], 3);\n});\n",
        "  check([1, 2, 3, 6], ",
    ),
    "a named expectation": (
        _JS_HEAD + "test('hidden mean', () => {\n  const want = 3;\n"
        "  assert.deepEqual(m.mean([1, 2, 3, 6]), want);\n});\n",
        "  const want = ",
    ),
}
JS_NOT_COPIED = {
    "the helper uses it before comparing": _JS_HEAD
    + "function check(xs, want) {\n  console.log(want);\n  assert.deepEqual(m.mean(xs), want);\n}"
    + "\n\ntest('hidden mean', () => {\n  check([1, 2, 3, 6], 3);\n});\n",
    "the computed side uses it": _JS_HEAD
    + "test('hidden mean', () => {\n  const want = 3;\n"
    + "  assert.deepEqual(m.mean([want]), want);\n});\n",
}


@pytest.mark.parametrize("shape", list(JS_COPIED))
def test_a_node_test_is_copied_with_the_literal_that_flows_into_the_expected_side(
    shape: str,
) -> None:
    text, line = JS_COPIED[shape]
    rel = "tests/hidden/test_h.mjs"
    made = canaries._js_mutants(rel, text.encode(), _every_question(rel, text.encode()))
    assert made is not None
    copy, [canary], _ = made
    assert canary.twin == canary.name == "hidden mean" and canary.expect == "failed"
    assert len(copy.decode().splitlines()) == len(text.splitlines())  # in its place
    [changed] = [x for x in copy.decode().splitlines() if x.startswith(line)]
    assert changed not in text.splitlines()


@pytest.mark.parametrize("shape", list(JS_NOT_COPIED))
def test_a_node_literal_is_not_changed_where_an_honest_copy_might_pass(shape: str) -> None:
    data, rel = JS_NOT_COPIED[shape].encode(), "tests/hidden/test_h.mjs"
    assert canaries._js_mutants(rel, data, _every_question(rel, data)) is None


UNCOPIABLE: dict[str, tuple[str, str, str, str]] = {
    # runner: (task, the held-out file, its text, the check)
    "unittest": (
        "add",
        "tests/hidden/test_add_hidden.py",
        _HEAD + "    def test_add_other_numbers(self):\n"
        "        self.assertTrue(m.add(10, 7) == 17)\n",
        "",
    ),
    "node": (
        "mean",
        "tests/hidden/test_mean_hidden.mjs",
        _JS_HEAD + "test('hidden mean of other numbers', () => {\n"
        "  assert.ok(m.mean([1, 2, 3, 6]) === 3);\n});\n",
        "node --test tests/test_mean.mjs tests/acceptance/test_mean_acceptance.mjs "
        "tests/hidden/test_mean_hidden.mjs",
    ),
}


@needs_a_visible_checkout()
@pytest.mark.parametrize("runner", list(UNCOPIABLE))
def test_a_held_out_file_none_of_whose_tests_can_be_copied_is_refused_before_start(
    tmp_path: Path, runner: str
) -> None:
    """Where no test of a held-out file can be copied, a check's canaries there
    are the public templates only, which a lie tells by their text and spares
    while it lies about the file's tests; so such a file is refused before the
    agent starts, naming it and the line the copier could not follow (never a
    value or a test's name), and saying how to write it. The neighbours: the
    same files written with an equality the copier follows run and pass
    (``test_the_honest_fix_is_accepted_clean_under_held_out_tests_the_copier_skips``,
    ``test_the_honest_node_fix_is_accepted_clean_under_held_out_tests_through_a_helper``)."""
    task, rel, text, check = UNCOPIABLE[runner]
    ws = _workspace(tmp_path, task, held_out=task == "add")
    (ws / rel).parent.mkdir(parents=True, exist_ok=True)
    (ws / rel).write_text(text)
    check = check or check_command(BY_NAME[task], CHECK_PYTHON)
    outcome = _attempt_in(tmp_path, ws, HONEST, check, "--held-out", "tests/hidden/**")
    assert outcome["refused_before_start"] and outcome["exit_code"] == 2, outcome
    [problem] = [p for p in outcome["problems"] if "held_out" in p]
    assert f"[sandbox] held_out {rel}: no test in it can be copied" in problem, problem
    where = "line 8, self.assertTrue" if runner == "unittest" else "line 6, assert.ok"
    assert f"({where}, the first assertion the copier cannot follow)" in problem, problem
    assert ("self.assertEqual(f(x), 17)" if runner == "unittest" else "deepEqual") in problem
    assert "other_numbers" not in problem, "held-out tests' names are shown to no one"
    assert (ws / rel).read_text() == text, "nothing was moved"


def test_a_copy_s_wrong_answer_is_never_a_value_written_in_the_test() -> None:
    """``add(10, 7) == 17`` is never copied as ``== 10`` or ``== 7``: code that
    answers with a constant its caller holds other than its arguments (the
    outside attack's ``ANSWER_THE_CALLER``) finds none there, returns its bug's
    value, and fails such a copy by chance, where it must pass it and be
    caught."""
    text = "import calc as m\n\n\ndef test_a():\n    assert m.add(10, 7) == 17\n"
    values: set[object] = set()
    for _ in range(400):
        [site] = canaries._sites(ast.parse(text))
        values |= {change.value for change in site.changes}
    assert len(values) > 2 and not values & {10, 7}, values
