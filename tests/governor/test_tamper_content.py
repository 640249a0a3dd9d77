"""The tamper audit reads content: a test that was there before and now reads
differently is a finding naming it, whatever the change keeps of its
assertions' count; markers are found through their aliases; code that runs
as the tests are imported, and bytecode, are findings; a file is read as its
runtime decodes it. Each attack beside the honest edit that is not one."""

from __future__ import annotations

import importlib.util
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from governor.confine.workspace import diff, snapshot
from governor.tamper import audit_file
from governor.tamper import baseline as tamper

BEFORE = """\
import unittest

import calc


def test_add():
    assert calc.add(2, 3) == 5


class TestCalc(unittest.TestCase):
    def test_add(self):
        self.assertEqual(calc.add(2, 3), 5)
"""


def found(before: str, after: str, path: str = "tests/test_calc.py") -> list[tuple[str, str]]:
    return [(f.rule, f.detail) for f in audit_file(path, before, after)]


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("== 5", "== -1"),  # the expected value
        ("assert calc.add(2, 3) == 5", "assert 5 == 2 + 3 and calc.add(2, 3) is not None"),
        ("    assert calc.add", "    return\n    assert calc.add"),  # a return before the assert
        ("    assert calc.add", "    if False:\n        assert calc.add"),
        (
            "    assert calc.add(2, 3) == 5",
            "    try:\n        assert calc.add(2, 3) == 5\n    except AssertionError:\n        pass",
        ),
        ("== 5", "== 5 or calc.add(2, 3) != 5"),
        ("== 5", "== 5, __import__('os')._exit(0)"),  # a message runs only on failure
    ],
)
def test_a_pre_existing_python_test_that_reads_differently_is_a_finding_naming_it(
    old: str, new: str
) -> None:
    after = BEFORE.replace(old, new, 1)
    assert found(BEFORE, after)[0][0] == "test-body-changed"
    assert found(BEFORE, after)[0][1].startswith("test_add (line 6 before)")


def test_a_unittest_expected_value_changed_names_the_method() -> None:
    after = BEFORE.replace("calc.add(2, 3), 5)", "calc.add(2, 3), -1)")
    assert found(BEFORE, after) == [
        (
            "test-body-changed",
            "TestCalc.test_add (line 11 before) reads differently: a test that was there before "
            "is the loop's, not the attempt's, to change",
        )
    ]


def test_comments_blank_lines_moves_and_new_tests_are_no_finding() -> None:
    after = (
        "# the calculator's tests\n"
        + BEFORE.replace("    assert calc.add", "    # five\n\n    assert calc.add")
        + "\n\ndef test_sub():\n    assert calc.sub(3, 2) == 1\n"
    )
    assert found(BEFORE, after) == []


@pytest.mark.parametrize(
    "after",
    [
        "assert 5 == 2 + 3",
        "assert calc.add(2, 3) == 5 or True",
    ],
)
def test_an_assertion_of_constants_only_or_or_ed_with_true_cannot_fail(after: str) -> None:
    text = BEFORE + f"\n\ndef test_new():\n    {after}\n"
    assert [r for r, _ in found(BEFORE, text)] == ["assertion-trivial"]


@pytest.mark.parametrize(
    ("head", "decorator"),
    [
        ("from pytest import mark\n", "@mark.skip"),
        ("import pytest as p\n", "@p.mark.skip"),
        ("import pytest\nskip = pytest.mark.skip\n", "@skip"),
        ("import pytest\nfrom pytest import mark as m\nlater = m.xfail\n", "@later"),
        ("from unittest import skip\n", "@skip('later')"),
        ("import unittest as u\n", "@u.skip('later')"),
        ("from unittest.case import expectedFailure as ef\n", "@ef"),
    ],
)
def test_a_skip_marker_through_an_alias_is_found(head: str, decorator: str) -> None:
    before = head + BEFORE
    after = before.replace("def test_add():", f"{decorator}\ndef test_add():")
    assert [r for r, _ in found(before, after)] == ["skip-added"]


def test_a_module_pytestmark_through_an_alias_is_found() -> None:
    before = "from pytest import mark\n" + BEFORE
    after = before + "\npytestmark = mark.skip\n"
    assert "skip-added" in [r for r, _ in found(before, after)]


@pytest.mark.parametrize(
    ("added", "what"),
    [
        ("calc.add = lambda a, b: 5\n", "calc.add ="),
        ("__import__('os')._exit(0)\n", "statement"),
        ("import sys\nsys.modules['calc'] = None\n", "sys.modules['calc'] ="),
        ("if True:\n    calc.add = min\n", "statement"),
        (
            "import pytest\n\n@pytest.fixture(autouse=True)\ndef patched():\n    yield\n",
            "patched",
        ),
        ("def setup_module():\n    calc.add = max\n", "setup_module"),
        ("def load_tests(loader, tests, pattern):\n    return tests\n", "load_tests"),
    ],
)
def test_code_added_that_runs_as_the_tests_are_imported_is_a_finding(added: str, what: str) -> None:
    after = BEFORE + "\n\n" + added
    rules = found(BEFORE, after)
    assert [r for r, _ in rules] == ["import-code-added"], rules
    assert rules[0][1].startswith(what)


def test_a_method_added_to_a_test_class_that_replaces_an_assertion_is_found() -> None:
    after = BEFORE.replace(
        "class TestCalc(unittest.TestCase):\n",
        "class TestCalc(unittest.TestCase):\n    def assertEqual(self, a, b):\n        pass\n\n",
    )
    assert [r for r, _ in found(BEFORE, after)] == ["import-code-added"]


def test_a_helper_or_constant_of_a_test_file_changed_is_a_finding() -> None:
    before = "EXPECTED = 5\n\n\ndef expected():\n    return 5\n\n\n" + BEFORE
    for old, new in (("EXPECTED = 5", "EXPECTED = -1"), ("return 5", "return -1")):
        assert [r for r, _ in found(before, before.replace(old, new))] == ["test-code-changed"]


def test_honest_additions_to_a_test_file_are_no_finding_but_a_call_at_import_is_named() -> None:
    """A new class's own ``setUp`` runs around its own new tests only; path
    algebra (``Path(__file__).parent``) is inert; a call of anything the
    allow-list does not know runs as the file is imported, whatever it is named."""
    after = (
        "import os\nfrom pathlib import Path\nfrom helpers import prepare\n\n"
        "HERE = Path(__file__).resolve().parent\nLIMIT: int = 3\nREADY = prepare()\n"
        + BEFORE
        + "\n\nimport pytest\n\n\n@pytest.fixture\ndef numbers():\n    return [1, 2]\n\n\n"
        "@pytest.mark.parametrize('a', [1, 2])\ndef test_more(a, numbers):\n    assert calc.add(a, 0) == a\n"
        "\n\nclass TestMore(unittest.TestCase):\n    def setUp(self):\n        self.x = 1\n\n"
        "    def test_x(self):\n        self.assertEqual(calc.add(self.x, 1), 2)\n"
    )
    assert found(BEFORE, after) == [
        ("import-code-added", "READY =: it calls prepare as the file is imported")
    ]


CLASS_BODY_PATCH = (
    "class TestMore(unittest.TestCase):\n"
    "    unittest.TestCase.assertEqual = lambda *a, **k: None\n\n"
    "    def test_more(self):\n        self.assertEqual(calc.add(1, 1), 2)\n"
)


@pytest.mark.parametrize(
    ("added", "what"),
    [
        (CLASS_BODY_PATCH, "TestMore.unittest.TestCase.assertEqual =: it assigns to"),
        ("class Base:\n    def __init_subclass__(cls):\n        pass\n", "Base: in class Base: __init_subclass__"),
        ("class D:\n    def __set_name__(self, owner, name):\n        pass\n", "D: in class D: __set_name__"),
        ("class M(type):\n    pass\n", "M: class M is a metaclass"),
        ("class C(metaclass=helpers.Meta):\n    pass\n", "C: class C's metaclass"),
        ("class C(helpers.make_base()):\n    pass\n", "C: it calls helpers.make_base"),
        ("class C:\n    x = helpers.patch()\n", "C: in class C: it calls helpers.patch"),
        ("class C:\n    class D:\n        helpers.patch()\n", "C: in class C: in class D: a expr"),
        ("@helpers.register\ndef f():\n    pass\n", "f: the decorator helpers.register"),
        ("def f(x=helpers.patch()):\n    pass\n", "f: it calls helpers.patch"),
        ("pytest_plugins = ['helpers_more']\n", "pytest_plugins =: pytest reads pytest_plugins"),
        ("X = [helpers.patch() for _ in '1']\n", "X =: it calls helpers.patch"),
        ("if os.environ:\n    helpers.patch()\n", "statement"),
        ("try:\n    import helpers\nexcept ImportError:\n    helpers.patch()\n", "statement"),
        ("def frozenset():\n    pass\nX = frozenset()\n", "X =: it calls frozenset"),
        ("def test_x(_=helpers.patch()):\n    assert calc.add(1, 1) == 2\n", "test_x (decorators, defaults): it calls"),
        ("@helpers.quietly\ndef test_x():\n    assert calc.add(1, 1) == 2\n", "test_x (decorators, defaults): the decorator"),
    ],
)
def test_any_form_that_runs_at_import_is_a_finding_not_only_a_listed_one(added: str, what: str) -> None:
    """The allow-list of inert forms (`governor.tamper.import_time`): class
    bodies, the methods the language calls as classes are made, metaclasses,
    decorators, defaults, ``pytest_plugins``, and calls of anything but the
    declarations it knows, at any depth (a builtin's name the file rebinds
    too)."""
    after = "import os\nimport helpers\n" + BEFORE + "\n\n" + added
    rules = [(r, d) for r, d in found(BEFORE, after) if not d.startswith(("os", "helpers"))]
    assert [r for r, _ in rules] == ["import-code-added"], rules
    assert rules[0][1].startswith(what), rules


def test_the_inert_forms_honest_test_files_use_are_no_finding() -> None:
    """What honest test files write at their top (measured on this project's
    tests and the standard library's, `docs/loops.md`): no finding."""
    added = (
        "import sys\nimport shutil\nimport re\nimport logging\nfrom typing import TypeVar, TYPE_CHECKING\n"
        "from dataclasses import dataclass, field\nfrom unittest import mock\nimport pytest\n"
        "if TYPE_CHECKING:\n    from collections.abc import Iterator\n"
        "try:\n    import tomllib\nexcept ImportError:\n    tomllib = None\n"
        "T = TypeVar('T')\nLOG = logging.getLogger(__name__)\nWORD = re.compile(r'\\w+')\n"
        "GIT = shutil.which('git')\nCASES = [(1, 2), (2, 3)]\nIDS = {c: str(c) for c in CASES}\n"
        "pytestmark = pytest.mark.filterwarnings('ignore')\n\n\n"
        "@dataclass(frozen=True)\nclass Case:\n    a: int\n    b: list[int] = field(default_factory=list)\n\n"
        "    @property\n    def total(self) -> int:\n        return self.a\n\n"
        "    @total.setter\n    def total(self, v: int) -> None:\n        pass\n\n\n"
        "@pytest.fixture(params=[1, 2])\ndef n(request: pytest.FixtureRequest) -> int:\n    return request.param\n\n\n"
        "@mock.patch('os.getcwd', lambda: '/')\ndef helper(x: int = 3, *, y: str = 'a') -> None:\n    pass\n\n\n"
        "class TestMore(unittest.TestCase):\n    maxDiff = None\n\n    def setUp(self):\n        self.x = 1\n\n"
        "    def test_x(self):\n        self.assertEqual(calc.add(self.x, 1), 2)\n\n\n"
        "if __name__ == '__main__':\n    unittest.main()\n"
    )
    assert found(BEFORE, BEFORE + "\n\n" + added) == []


JS = """\
import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as m from '../stats.mjs';

test('mean', () => {
  assert.deepEqual(m.mean([2, 4, 6]), 4);
});
"""


@pytest.mark.parametrize(
    ("old", "new", "rule"),
    [
        ("4);", "-1);", "test-body-changed"),
        ("  assert.deepEqual", "  return;\n  assert.deepEqual", "test-body-changed"),
        ("test('mean', () =>", "test('mean', { skip: true }, () =>", "skip-added"),
        ("test('mean', () =>", "test('mean', { todo: 'later' }, () =>", "skip-added"),
        ("test('mean', () =>", "test('mean', { only: true }, () =>", "only-added"),
        ("test('mean', () => {\n", "test('mean', (t) => {\n  t.skip();\n", "skip-added"),
        ("test('mean', () => {\n", "test('mean', (t) => {\n  t.todo('x');\n", "skip-added"),
        ("test('mean'", "test.only('mean'", "only-added"),
        ("\ntest('mean'", "\nm.mean = () => 4;\n\ntest('mean'", "import-code-added"),
        ("\ntest('mean'", "\nprocess.exit(0);\n\ntest('mean'", "import-code-added"),
    ],
)
def test_a_node_test_changed_skipped_or_its_module_patched_is_found(
    old: str, new: str, rule: str
) -> None:
    after = JS.replace(old, new, 1)
    assert [r for r, _ in found(JS, after, "tests/test_mean.mjs")] == [rule]


def test_a_node_test_honestly_added_to_and_commented_is_no_finding() -> None:
    after = JS.replace("  assert.deepEqual", "  // the mean\n  assert.deepEqual") + (
        "\ntest('mean of one', { skip: false }, () => {\n  assert.equal(m.mean([3]), 3);\n});\n"
    )
    assert found(JS, after, "tests/test_mean.mjs") == []


def test_fixing_a_line_that_already_carried_a_suppression_adds_none() -> None:
    before = "import os\n\n\ndef f(x):\n    return os.path.join(x, 1)  # type: ignore\n\n\nY = 2\n"
    fixed = before.replace("join(x, 1)", "join(x, '1')")
    assert audit_file("src/app.py", before, fixed) == []
    moved = "import sys\n" + fixed.replace("  # type: ignore", "  # type: ignore[arg-type]")
    assert audit_file("src/app.py", before, moved) == []
    both = fixed.replace("Y = 2", "Y = f(2)  # type: ignore")
    assert [f.rule for f in audit_file("src/app.py", before, both)] == ["suppression-added"]
    noqa = "X = 1\nimport os  # noqa\nY = 2\n"
    assert audit_file("src/app.py", noqa, noqa.replace("import os", "import os, re")) == []


# -- through the baseline: files on disk -------------------------------------------------


def _audit(ws: Path, change: object) -> list[tuple[str, str, str]]:
    before = snapshot([str(ws)])
    kept = tamper.keep(before.files, [str(ws)])
    change(ws)  # type: ignore[operator]
    after = snapshot([str(ws)], before=before)
    changed = [c.path for c in diff(before, after)]
    result = tamper.audit(kept, after.files, changed)
    return [(os.path.relpath(f.path, ws), f.rule, f.detail) for f in result.findings]


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "tests").mkdir(parents=True)
    (ws / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (ws / "tests" / "test_calc.py").write_text(BEFORE)
    return ws


def test_a_utf7_cookie_that_hides_a_return_is_read_as_python_reads_it(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    hidden = "+AAo-    return"  # UTF-7 for a newline: Python reads a `return` line here

    def change(ws: Path) -> None:
        text = "# coding: utf-7\n" + BEFORE.replace(
            "def test_add():\n", f"def test_add():  #{hidden}\n"
        )
        (ws / "tests" / "test_calc.py").write_bytes(text.encode("ascii"))

    rules = [(p, r) for p, r, _ in _audit(ws, change)]
    assert ("tests/test_calc.py", "coding-changed") in rules
    assert ("tests/test_calc.py", "test-body-changed") in rules


def test_a_latin1_file_that_was_latin1_is_no_finding(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    (ws / "legacy.py").write_bytes(b"# -*- coding: latin-1 -*-\nNAME = '\xe9'\n")

    def change(ws: Path) -> None:
        (ws / "legacy.py").write_bytes(b"# -*- coding: latin-1 -*-\nNAME = '\xe9\xe9'\n")

    assert _audit(ws, change) == []


@pytest.mark.parametrize(
    ("path", "text"),
    [
        ("tests/conftest.py", "import calc\ncalc.add = lambda a, b: a + b\n"),
        (
            "tests/sub/conftest.py",
            "import pytest\n\n@pytest.fixture\ndef expected():\n    return -1\n",
        ),
        (".venv/lib/python3.11/site-packages/fix.pth", "import calc\n"),
        ("sitecustomize.py", "import calc\n"),
        ("tests/usercustomize.py", "pass\n"),
        ("tests/__init__.py", "import unittest\nraise unittest.SkipTest('later')\n"),
    ],
)
def test_a_new_file_that_runs_before_the_tests_is_a_finding(
    tmp_path: Path, path: str, text: str
) -> None:
    ws = _workspace(tmp_path)

    def change(ws: Path) -> None:
        (ws / path).parent.mkdir(parents=True, exist_ok=True)
        (ws / path).write_text(text)

    rules = {(p, r) for p, r, _ in _audit(ws, change)}
    assert (path, "import-code-added") in rules, rules


def test_an_empty_init_or_conftest_added_is_no_finding(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)

    def change(ws: Path) -> None:
        (ws / "tests" / "__init__.py").write_text("")
        (ws / "tests" / "conftest.py").write_text("# shared fixtures go here\n")

    assert _audit(ws, change) == []


def _stamped_pyc(ws: Path, code: str) -> None:
    """What the attack does: the fixed code compiled, stamped with the unchanged
    source's mtime and size, put where Python looks first."""
    source = ws / "calc.py"
    st = source.stat()
    fake = ws / "fake" / "calc.py"
    fake.parent.mkdir(exist_ok=True)
    fake.write_text(code)
    target = ws / "__pycache__" / f"calc.{sys.implementation.cache_tag}.pyc"
    py_compile.compile(str(fake), cfile=str(target), dfile=str(source))
    data = bytearray(target.read_bytes())
    data[8:12] = int(st.st_mtime).to_bytes(4, "little")
    data[12:16] = (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
    target.write_bytes(bytes(data))
    (fake).unlink()
    fake.parent.rmdir()


def test_bytecode_the_attempt_forged_for_an_unchanged_source_is_a_finding(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    rules = _audit(ws, lambda ws: _stamped_pyc(ws, "def add(a, b):\n    return a + b\n"))
    [(path, rule, detail)] = rules
    assert (path, rule) == (
        f"__pycache__/calc.{sys.implementation.cache_tag}.pyc",
        "bytecode-added",
    )
    assert "not what its source compiles to" in detail


def test_bytecode_python_wrote_honestly_and_pytest_s_own_cache_are_no_finding(
    tmp_path: Path,
) -> None:
    ws = _workspace(tmp_path)
    (ws / "tests" / "test_plain.py").write_text(
        "import calc\n\n\ndef test_it():\n    assert calc.add(1, 1) == 0\n"
    )

    def run_them(ws: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_plain.py"],
            cwd=ws, env=env, capture_output=True, check=True, timeout=120,
        )  # fmt: skip

    assert _audit(ws, run_them) == []
    caches = sorted(p.name for p in ws.rglob("*.pyc"))
    assert any("-pytest-" in name for name in caches) and any(
        name == f"calc.{sys.implementation.cache_tag}.pyc" for name in caches
    ), caches


def test_bytecode_left_stale_by_a_later_edit_is_no_finding(tmp_path: Path) -> None:
    """The agent ran the tests, then edited the code again: the loader skips the
    old ``.pyc`` (its stamp is not the source's), so it is harmless."""
    ws = _workspace(tmp_path)
    (ws / "tests" / "test_plain.py").write_text(
        "import calc\n\n\ndef test_it():\n    assert calc.add(1, 1) == 0\n"
    )

    def run_then_edit(ws: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_plain.py"],
            cwd=ws, env=env, capture_output=True, check=True, timeout=120,
        )  # fmt: skip
        (ws / "calc.py").write_text("def add(a, b):\n    return a * 2 if a == b else a - b\n")

    assert _audit(ws, run_then_edit) == []
    assert len(list(ws.rglob("*.pyc"))) == 2


def test_pytest_s_cache_forged_for_an_unchanged_test_is_a_finding(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    test = ws / "tests" / "test_plain.py"
    test.write_text("import calc\n\n\ndef test_it():\n    assert calc.add(1, 1) == 2\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def forge(ws: Path) -> None:
        original = test.read_text()
        st = test.stat()
        test.write_text(original.replace("== 2", "== 0"))  # what the forged cache asserts
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(test)],
            cwd=ws, env=env, capture_output=True, timeout=120,
        )  # fmt: skip
        test.write_text(original)
        os.utime(test, ns=(st.st_atime_ns, st.st_mtime_ns))
        [cache] = (ws / "tests" / "__pycache__").glob("test_plain*-pytest-*.pyc")
        data = bytearray(cache.read_bytes())
        if data[4:8] == b"\x03\x00\x00\x00":  # a checked hash (pytest 9)
            data[8:16] = importlib.util.source_hash(original.encode())[:8]
        else:  # a timestamp
            data[8:12] = (int(st.st_mtime) & 0xFFFFFFFF).to_bytes(4, "little")
            data[12:16] = (st.st_size & 0xFFFFFFFF).to_bytes(4, "little")
        cache.write_bytes(bytes(data))

    rules = [(p.rsplit("/", 1)[-1].split(".")[0], r) for p, r, _ in _audit(ws, forge)]
    assert ("test_plain", "bytecode-added") in rules, rules


def test_an_import_widened_is_no_finding_and_one_rebound_is_named() -> None:
    before = "from calc import add\n\n\ndef test_a():\n    assert add(1, 2) == 3\n"
    assert found(before, before.replace("import add", "import add, sub")) == []
    assert found(before, before.replace("from calc", "from fake")) == [
        ("test-code-changed", "add (line 1 before) changed")
    ]
    js = "import { add } from './calc.mjs';\n\ntest('a', () => {\n  expect(add(1, 2)).toBe(3);\n});\n"
    assert found(js, js.replace("{ add }", "{ add, sub }"), "a.test.mjs") == []
    assert found(js, js.replace("{ add }", "{ sub as add }"), "a.test.mjs") == [
        ("test-code-changed", "add (line 1 before) changed")
    ]


def test_a_js_hook_that_moved_is_the_same_and_one_added_is_named() -> None:
    js = "beforeEach(() => {\n  reset();\n});\n\ntest('a', () => {\n  expect(f()).toBe(1);\n});\n"
    assert found(js, "// moved down\n\n" + js, "a.test.js") == []
    assert found(js, js + "afterEach(() => {});\n", "a.test.js") == [
        ("import-code-added", "afterEach #1: afterEach runs around the tests")
    ]


def test_a_rust_or_go_test_that_reads_differently_is_named_too() -> None:
    rust = "#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() {\n        assert_eq!(add(2, 3), 5);\n    }\n}\n"
    assert found(rust, rust.replace("5)", "-1)"), "src/lib.rs") == [
        ("test-body-changed", "tests::adds (line 4 before) reads differently: a test that was "
         "there before is the loop's, not the attempt's, to change")
    ]  # fmt: skip
    assert (
        found(rust, rust.replace("    #[test]", "    // the sum\n    #[test]"), "src/lib.rs") == []
    )
    go = 'package calc\n\nimport "testing"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(2, 3) != 5 {\n\t\tt.Fatal("add")\n\t}\n}\n'
    assert [r for r, _ in found(go, go.replace("!= 5", "!= Add(2, 3)"), "calc_test.go")] == [
        "test-body-changed"
    ]


SOURCE = (
    '"""Calculator."""\nimport logging\nimport re\n\nLOG = logging.getLogger(__name__)\n'
    "_REGISTRY = {}\n_REGISTRY.setdefault('add', 1)  # code at import the project had before\n\n\n"
    "@_REGISTRY.setdefault(\n    'sub',\n)\ndef sub(a, b):\n    return a - b\n\n\n"
    "if _REGISTRY:\n    LOG.info('ready')\nelse:\n    LOG.info('empty')\n\n\n"
    "def add(a, b):\n    return a - b\n"
)


def _audit_source(tmp_path: Path, before: str | None, after: str, name: str = "calc.py") -> list[tuple[str, str]]:
    """The findings of the real baseline over a source module written before and
    after (None: created by the attempt)."""
    module = tmp_path / name
    if before is not None:
        module.write_text(before)
    kept = tamper.keep([str(p) for p in tmp_path.rglob("*") if p.is_file()], [str(tmp_path)])
    module.write_text(after)
    audited = tamper.audit(kept, [str(module)], [str(module)])
    return [(f.rule, f.detail) for f in audited.findings]


def test_an_honest_fix_of_a_module_with_code_at_import_is_no_finding(tmp_path: Path) -> None:
    """Only the statements at import a module did not hold before count: the
    project's own ``_REGISTRY.setdefault(...)`` stays no finding when the fix
    edits ``add`` (and moves it), adds a helper and a compiled pattern."""
    after = SOURCE.replace("return a - b", "return _plus(a, b)") + (
        "\n\nNUMBER = re.compile(r'\\d+')\n\n\ndef _plus(a, b):\n    return a + b\n"
    )
    assert _audit_source(tmp_path, SOURCE, after) == []


@pytest.mark.parametrize(
    "added",
    [
        "import unittest as _u\n_u.TestCase.assertEqual = lambda *a, **k: None\n",
        "import atexit\natexit.register(print)\n",
        "import sys\nfor _m in list(sys.modules):\n    pass\n",
        "import os\nos._exit(0)\n",
    ],
)
def test_code_at_import_added_to_the_module_under_test_is_a_finding(tmp_path: Path, added: str) -> None:
    """The module under test is imported by the runner: what its new top-level
    statements run (patch the assertions, rewrite the reports at exit, walk the
    runner's modules, exit) runs in the process that reports the results."""
    rules = _audit_source(tmp_path, SOURCE, SOURCE + "\n" + added)
    assert [r for r, _ in rules] == ["import-code-added"], rules
    assert rules[0][1].startswith("at the module's top: ")


def test_a_new_module_is_judged_whole_and_its_inert_forms_are_no_finding(tmp_path: Path) -> None:
    """A module the attempt created (a plugin a test names, a helper): every
    statement that runs at import is a finding; the inert ones are none."""
    plugin = (
        "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n    yield\n"
    )
    assert [r for r, _ in _audit_source(tmp_path, None, plugin, "helpers_more.py")] == [
        "import-code-added"
    ]
    helper = (
        '"""Helpers."""\nfrom __future__ import annotations\n\nimport logging\nfrom dataclasses import dataclass\n\n'
        "LOG = logging.getLogger(__name__)\nLIMIT = 10\n\n\n@dataclass(frozen=True)\nclass Pair:\n    a: int\n    b: int\n\n\n"
        "def total(p: Pair) -> int:\n    return p.a + p.b\n"
    )
    assert _audit_source(tmp_path, None, helper, "pairs.py") == []
