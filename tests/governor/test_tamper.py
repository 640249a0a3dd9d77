"""The tamper audit's rules, driven with strings: each weakening is found with
its path, line and rule, and the honest edit beside it is not."""

from __future__ import annotations

import pytest

from governor.tamper import RULES, Finding, audit_file, looks_like_test


def rules(found: list[Finding]) -> list[tuple[int | None, str]]:
    return [(f.line, f.rule) for f in found]


PY_BEFORE = """\
import pytest
import unittest


def test_adds():
    assert add(1, 2) == 3
    assert add(0, 0) == 0


def test_subs():
    assert sub(2, 1) == 1


class TestMul(unittest.TestCase):
    def test_mul(self):
        self.assertEqual(mul(2, 3), 6)
"""


def test_an_honest_fix_of_the_code_under_test_gives_no_finding() -> None:
    after = (
        "# the tests of math\n"
        + PY_BEFORE.replace(
            "    assert add(0, 0) == 0\n", "    # zero too\n    assert add(0, 0) == 0\n"
        )
        + "\n\ndef test_new():\n    assert add(2, 2) == 4\n"
        + "\n\ndef test_other():\n    assert sub(2, 1) == sub(3, 2)\n"
    )
    assert audit_file("tests/test_math.py", PY_BEFORE, after) == []


def test_a_deleted_python_test_is_found_at_its_old_line() -> None:
    after = PY_BEFORE.replace("def test_subs():\n    assert sub(2, 1) == 1\n", "")
    found = audit_file("tests/test_math.py", PY_BEFORE, after)
    assert rules(found) == [(10, "test-deleted")]
    assert "test_subs" in found[0].detail


def test_a_deleted_test_file_is_found_with_its_tests_named() -> None:
    (found,) = audit_file("tests/test_math.py", PY_BEFORE, None)
    assert (found.line, found.rule) == (None, "test-file-deleted")
    assert "3 test(s)" in found.detail and "test_adds" in found.detail


def test_deleting_a_file_that_held_no_test_is_no_finding() -> None:
    assert audit_file("tests/helpers.py", "def helper():\n    return 1\n", None) == []


def test_an_assert_replaced_by_pass_is_an_assertion_removed() -> None:
    after = PY_BEFORE.replace("    assert sub(2, 1) == 1\n", "    pass\n")
    found = audit_file("tests/test_math.py", PY_BEFORE, after)
    assert rules(found) == [(10, "assertion-removed")]
    assert "made 1 assertion(s) and makes 0" in found[0].detail


@pytest.mark.parametrize(
    "trivial",
    ["assert True", "assert sub(2, 1) == sub(2, 1)", "assert 1", "assert (1, 2)"],
)
def test_an_assertion_that_cannot_fail_is_found(trivial: str) -> None:
    after = PY_BEFORE.replace("assert sub(2, 1) == 1", trivial)
    assert rules(audit_file("tests/test_math.py", PY_BEFORE, after)) == [(11, "assertion-trivial")]


def test_a_unittest_assertion_of_a_value_with_itself_is_found() -> None:
    after = PY_BEFORE.replace("mul(2, 3), 6", "mul(2, 3), mul(2, 3)")
    assert rules(audit_file("tests/test_math.py", PY_BEFORE, after)) == [(16, "assertion-trivial")]


def test_an_assertion_comparing_two_different_things_is_not_trivial() -> None:
    after = PY_BEFORE + "\n\ndef test_new():\n    assert sub(2, 1) == sub(3, 2)\n"
    assert audit_file("tests/test_math.py", PY_BEFORE, after) == []


@pytest.mark.parametrize(
    ("edit", "line"),
    [
        ("@pytest.mark.skip(reason='later')\ndef test_subs():", 10),
        ("@pytest.mark.skipif(True, reason='x')\ndef test_subs():", 10),
        ("@pytest.mark.xfail\ndef test_subs():", 10),
        ("@unittest.skip('x')\ndef test_subs():", 10),
        ("def test_subs():\n    pytest.skip('later')", 11),
    ],
)
def test_every_python_skip_marker_added_is_found(edit: str, line: int) -> None:
    after = PY_BEFORE.replace("def test_subs():", edit)
    assert rules(audit_file("tests/test_math.py", PY_BEFORE, after)) == [(line, "skip-added")]


def test_a_skiptest_in_a_unittest_method_is_found() -> None:
    after = PY_BEFORE.replace(
        "        self.assertEqual", "        self.skipTest('later')\n        self.assertEqual"
    )
    assert rules(audit_file("tests/test_math.py", PY_BEFORE, after)) == [(16, "skip-added")]


def test_a_module_pytestmark_skip_is_found() -> None:
    after = PY_BEFORE.replace(
        "import unittest\n", "import unittest\npytestmark = pytest.mark.skip\n"
    )
    assert rules(audit_file("tests/test_math.py", PY_BEFORE, after)) == [(3, "skip-added")]


def test_a_skip_marker_that_was_there_before_and_moved_is_not_added() -> None:
    before = PY_BEFORE.replace("def test_subs():", "@pytest.mark.skip\ndef test_subs():")
    after = "# a comment above everything\n\n" + before
    assert audit_file("tests/test_math.py", before, after) == []


@pytest.mark.parametrize(
    ("comment", "label"),
    [
        ("# pragma: no cover", "# pragma: no cover"),
        ("# type: ignore[arg-type]", "# type: ignore"),
        ("# noqa: E501", "# noqa"),
    ],
)
def test_a_python_suppression_added_to_source_is_found(comment: str, label: str) -> None:
    before = "def f(x):\n    return x + 1\n"
    after = f"def f(x):\n    return x + 1  {comment}\n"
    (found,) = audit_file("src/app.py", before, after)
    assert (found.line, found.rule) == (2, "suppression-added") and label in found.detail


def test_a_suppression_word_inside_a_string_is_no_suppression() -> None:
    before = "def f():\n    return 1\n"
    after = 'def f():\n    return "# type: ignore"\n'
    assert audit_file("src/app.py", before, after) == []


def test_a_test_file_that_no_longer_parses_is_reported_as_unparsable() -> None:
    (found,) = audit_file("tests/test_math.py", PY_BEFORE, PY_BEFORE + "def broken(:\n")
    assert found.rule == "unparsable" and "not valid Python" in found.detail


JS_BEFORE = """\
describe("math", () => {
  it("adds", () => {
    expect(add(1, 2)).toBe(3);
  });
  test("subs", () => {
    expect(sub(2, 1)).toBe(1);
  });
});
"""


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        ('it("adds"', 'it.skip("adds"', "skip-added"),
        ('it("adds"', 'xit("adds"', "skip-added"),
        ('describe("math"', 'describe.skip("math"', "skip-added"),
        ('it("adds"', 'it.only("adds"', "only-added"),
        ('test("subs"', 'test.only("subs"', "only-added"),
    ],
)
def test_every_js_marker_added_is_found(old: str, new: str, rule: str) -> None:
    after = JS_BEFORE.replace(old, new)
    found = audit_file("src/math.test.js", JS_BEFORE, after)
    assert [f.rule for f in found] == [rule]


def test_a_js_test_deleted_or_weakened_is_found_in_typescript_too() -> None:
    after = JS_BEFORE.replace("expect(sub(2, 1)).toBe(1);", "expect(1).toBe(1);").replace(
        '  it("adds", () => {\n    expect(add(1, 2)).toBe(3);\n  });\n', ""
    )
    found = audit_file("src/math.test.ts", JS_BEFORE, after)
    assert rules(found) == [(2, "test-deleted"), (3, "assertion-trivial")]
    assert "math > adds" in found[0].detail


def test_a_ts_ignore_or_eslint_disable_added_is_found() -> None:
    before = "const x: number = f();\n"
    after = "// @ts-ignore\nconst x: number = f();\n/* eslint-disable */\n"
    assert rules(audit_file("src/app.ts", before, after)) == [
        (1, "suppression-added"),
        (3, "suppression-added"),
    ]


def test_an_honest_js_edit_gives_no_finding() -> None:
    after = JS_BEFORE.replace(
        "  test(",
        '  // the second\n  it("adds more", () => {\n    expect(add(2, 2)).toBe(4);\n  });\n  test(',
    ).replace("toBe(3);", "toBe(3);  // three")
    assert audit_file("src/math.test.js", JS_BEFORE, after) == []


RS_BEFORE = """\
pub fn add(a: i32, b: i32) -> i32 { a + b }

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adds() {
        assert_eq!(add(1, 2), 3);
    }
}
"""


def test_a_rust_ignore_and_allow_added_are_found() -> None:
    after = RS_BEFORE.replace("    #[test]\n", "    #[test]\n    #[ignore]\n").replace(
        "pub fn add", "#[allow(dead_code)]\npub fn add"
    )
    assert rules(audit_file("src/lib.rs", RS_BEFORE, after)) == [
        (1, "suppression-added"),
        (9, "skip-added"),
    ]


def test_a_rust_assertion_of_a_value_with_itself_or_removed_is_found() -> None:
    trivial = RS_BEFORE.replace("assert_eq!(add(1, 2), 3)", "assert_eq!(add(1, 2), add(1, 2))")
    assert rules(audit_file("src/lib.rs", RS_BEFORE, trivial)) == [(9, "assertion-trivial")]
    removed = RS_BEFORE.replace("assert_eq!(add(1, 2), 3);", "")
    assert rules(audit_file("src/lib.rs", RS_BEFORE, removed)) == [(8, "assertion-removed")]


GO_BEFORE = """\
package calc

import "testing"

func TestAdd(t *testing.T) {
	if Add(1, 2) != 3 {
		t.Errorf("Add(1, 2) = %d", Add(1, 2))
	}
}
"""


def test_a_go_skip_or_a_build_ignore_added_is_found() -> None:
    skipped = GO_BEFORE.replace("\tif Add", '\tt.Skip("later")\n\tif Add')
    assert rules(audit_file("calc_test.go", GO_BEFORE, skipped)) == [(6, "skip-added")]
    ignored = "//go:build ignore\n\n" + GO_BEFORE
    assert rules(audit_file("calc_test.go", GO_BEFORE, ignored)) == [(1, "skip-added")]


def test_a_go_nolint_added_is_found() -> None:
    after = GO_BEFORE.replace(
        "func TestAdd(t *testing.T) {", "func TestAdd(t *testing.T) { //nolint:errcheck"
    )
    assert rules(audit_file("calc_test.go", GO_BEFORE, after)) == [(5, "suppression-added")]


@pytest.mark.parametrize(
    ("path", "before", "after", "line"),
    [
        (
            "pytest.ini",
            "[pytest]\ntestpaths = tests\n",
            "[pytest]\ntestpaths = tests\naddopts = -k 'not slow'\n",
            3,
        ),
        (
            "setup.cfg",
            "[tool:pytest]\naddopts = -q\n",
            "[tool:pytest]\naddopts = -q -p no:cacheprovider --deselect t.py::x\n",
            2,
        ),
        ("tox.ini", "[pytest]\n", "[pytest]\nnorecursedirs = tests\n", 2),
        (
            "pyproject.toml",
            "[project]\nname = 'x'\n",
            "[project]\nname = 'x'\n\n[tool.pytest.ini_options]\naddopts = '--co'\n",
            5,
        ),
        (
            "tests/conftest.py",
            "import pytest\n",
            "import pytest\n\ndef pytest_collection_modifyitems(items):\n    items.clear()\n",
            3,
        ),
        ("conftest.py", "", "def pytest_ignore_collect(collection_path):\n    return True\n", 1),
        ("conftest.py", "", "collect_ignore = ['tests/test_math.py']\n", 1),
        (
            "jest.config.js",
            "module.exports = {\n  testMatch: ['**/*.test.js'],\n};\n",
            "module.exports = {\n  testMatch: ['**/*.test.js'],\n  testPathIgnorePatterns: ['math'],\n};\n",
            3,
        ),
        (
            "vitest.config.ts",
            "export default { test: { include: ['src'] } };\n",
            "export default { test: { include: ['src'], exclude: ['src/math.test.ts'] } };\n",
            1,
        ),
        (
            "package.json",
            '{\n  "name": "x",\n  "jest": {}\n}\n',
            '{\n  "name": "x",\n  "jest": {"testPathIgnorePatterns": ["math"]}\n}\n',
            3,
        ),
        (
            ".github/workflows/ci.yml",
            "on: push\njobs:\n  test:\n    steps:\n      - run: pytest\n",
            "on: push\njobs:\n  test:\n    steps:\n      - run: pytest || true\n",
            5,
        ),
    ],
)
def test_runner_configuration_that_changes_what_runs_is_found(
    path: str, before: str, after: str, line: int
) -> None:
    found = audit_file(path, before, after)
    assert rules(found) == [(line, "runner-config-changed")], found


def test_runner_configuration_edits_that_change_nothing_that_runs_are_not_found() -> None:
    assert (
        audit_file(
            "pytest.ini", "[pytest]\naddopts = -q\n", "[pytest]\naddopts = -q\nmarkers = slow\n"
        )
        == []
    )
    before = '{"name": "x", "jest": {"testMatch": ["a"]}}'
    assert audit_file("package.json", before, before.replace('"x"', '"y"')) == []
    assert audit_file("conftest.py", "import pytest\n", "import pytest\nimport os\n") == []


def test_a_conftest_hook_that_changes_is_found_and_one_that_moves_is_not() -> None:
    before = "def pytest_collection_modifyitems(items):\n    pass\n"
    moved = "import os\n\n" + before
    assert audit_file("conftest.py", before, moved) == []
    changed = before.replace("pass", "items[:] = items[:1]")
    assert rules(audit_file("conftest.py", before, changed)) == [(1, "runner-config-changed")]


def test_what_looks_like_a_test_is_told_by_its_path() -> None:
    tests = [
        "tests/test_a.py",
        "a_test.py",
        "pkg/tests/helpers.py",
        "src/x.test.ts",
        "x.spec.js",
        "__tests__/a.js",
        "a_test.go",
        "src/lib.rs",
        "pytest.ini",
        ".github/workflows/ci.yml",
    ]
    others = ["src/app.py", "src/app.ts", "main.go", "README.md", "testdata.txt"]
    assert [p for p in tests if not looks_like_test(p)] == []
    assert [p for p in others if looks_like_test(p)] == []


def test_a_finding_names_a_known_rule_or_is_refused() -> None:
    assert set(RULES) >= {f.rule for f in audit_file("tests/test_math.py", PY_BEFORE, None)}
    with pytest.raises(ValueError, match="unknown tamper rule 'made-up'"):
        Finding("x", 1, "made-up", "")
