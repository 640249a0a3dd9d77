"""Python test files read with `ast` (and comments with `tokenize`): pure.

A test is a module-level function named ``test*``, or a ``test*`` method of a
class named ``Test*`` or deriving from a ``TestCase``; its name is
``Class.test_name`` for a method. An assertion is an ``assert`` statement, a
call of a method or function whose name starts with ``assert`` (unittest's
``self.assertEqual``, a mock's ``assert_called_once``) or ``fail``, and
``pytest.raises`` / ``pytest.warns``. One cannot fail when it asserts a true
constant or compares an expression with itself.

Markers: ``@pytest.mark.skip/skipif/xfail``, ``pytestmark = ...`` of those,
``pytest.skip()/xfail()/importorskip()``, ``@unittest.skip*``,
``@unittest.expectedFailure``, ``self.skipTest()``, ``raise SkipTest``.
Suppressions are comments: ``# pragma: no cover``, ``# type: ignore``,
``# noqa``, ``# pylint: disable``, ``# pyright: ignore``.

A conftest's hooks (`conftest_hooks`) are the runner's configuration, not
tests: `governor.tamper.runner` judges them.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from typing import Final

from governor.tamper.facts import Facts, Mark, Test

_SKIP_MARKS: Final = {"skip", "skipif", "xfail"}
_UNITTEST_SKIPS: Final = {"skip", "skipIf", "skipUnless", "expectedFailure"}
_SKIP_CALLS: Final = {"skip", "xfail", "importorskip"}
_RAISES: Final = {"raises", "warns", "deprecated_call"}
SUPPRESSIONS: Final = (
    ("# pragma: no cover", re.compile(r"#\s*pragma:\s*no\s*(cover|branch)", re.I)),
    ("# type: ignore", re.compile(r"#\s*type:\s*ignore")),
    ("# noqa", re.compile(r"#\s*noqa\b", re.I)),
    ("# pylint: disable", re.compile(r"#\s*pylint:\s*disable")),
    ("# pyright: ignore", re.compile(r"#\s*pyright:\s*(ignore|basic|strict)")),
    ("# mypy: ignore-errors", re.compile(r"#\s*mypy:\s*ignore-errors")),
)
"""Comment suppressions: (label, pattern matched against one comment token)."""
_MAY_SUPPRESS: Final = re.compile(r"#\s*(pragma|type|noqa|pylint|pyright|mypy)", re.I)
"""What a line holding a suppression must contain (a cheap test before tokenizing)."""


def facts(text: str) -> Facts:
    """The tests, markers and suppressions of one Python file."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as e:
        line = getattr(e, "lineno", None)
        return Facts(
            error=f"not valid Python{f' (line {line})' if line else ''}: {e.msg if isinstance(e, SyntaxError) else e}"
        )
    out = Facts()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            _test(out, node.name, node)
        elif isinstance(node, ast.ClassDef) and _is_test_class(node):
            _marks_of_decorators(out, node.decorator_list, node.name)
            for item in node.body:
                if isinstance(
                    item, ast.FunctionDef | ast.AsyncFunctionDef
                ) and item.name.startswith("test"):
                    _test(out, f"{node.name}.{item.name}", item)
                elif isinstance(item, ast.Assign) and _assigns(item, "pytestmark"):
                    _marks_in(out, item.value, node.name)
        elif isinstance(node, ast.Assign) and _assigns(node, "pytestmark"):
            _marks_in(out, node.value, "the module")
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            _marks_in(out, node, "the module")  # pytest.skip(allow_module_level=True)
    out.marks.extend(suppressions(text))
    return out


def _assigns(node: ast.Assign, name: str) -> bool:
    return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)


def _is_test_class(node: ast.ClassDef) -> bool:
    if node.name.startswith("Test"):
        return True
    return any(_name(base).endswith("TestCase") for base in node.bases)


def _test(out: Facts, name: str, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
    test = Test(node.lineno)
    _marks_of_decorators(out, node.decorator_list, name)
    for sub in (sub for stmt in node.body for sub in ast.walk(stmt)):
        if isinstance(sub, ast.Assert):
            test.asserts += 1
            if _cannot_fail(sub.test):
                test.trivial.append(sub.lineno)
        elif isinstance(sub, ast.Call):
            called = _name(sub.func)
            last = called.rsplit(".", 1)[-1]
            if last.startswith(("assert", "fail")) or (
                called.startswith("pytest.") and last in _RAISES
            ):
                test.asserts += 1
                if _trivial_call(last, sub.args):
                    test.trivial.append(sub.lineno)
            _skip_call(out, sub, name)
        elif (
            isinstance(sub, ast.Raise)
            and sub.exc is not None
            and _name(sub.exc).endswith("SkipTest")
        ):
            out.marks.append(Mark("skip-added", "raise SkipTest", name, sub.lineno))
    out.tests[name] = test


def _marks_of_decorators(out: Facts, decorators: list[ast.expr], scope: str) -> None:
    for d in decorators:
        _marks_in(out, d, scope)


def _marks_in(out: Facts, node: ast.AST, scope: str) -> None:
    """Skip markers anywhere inside ``node`` (a decorator, a ``pytestmark``
    list, a module-level statement)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute | ast.Name):
            label = _mark_label(_name(sub))
            if label is not None:
                out.marks.append(Mark("skip-added", label, scope, sub.lineno))
        elif isinstance(sub, ast.Call):
            _skip_call(out, sub, scope)


def _mark_label(name: str) -> str | None:
    parts = name.split(".")
    if len(parts) >= 3 and parts[-2] == "mark" and parts[-1] in _SKIP_MARKS:
        return f"pytest.mark.{parts[-1]}"
    if len(parts) == 2 and parts[0] == "unittest" and parts[1] in _UNITTEST_SKIPS:
        return name
    return None


def _skip_call(out: Facts, call: ast.Call, scope: str) -> None:
    called = _name(call.func)
    parts = called.split(".")
    if len(parts) == 2 and parts[0] == "pytest" and parts[1] in _SKIP_CALLS:
        out.marks.append(Mark("skip-added", f"{called}()", scope, call.lineno))
    elif parts[-1] == "skipTest":
        out.marks.append(Mark("skip-added", "skipTest()", scope, call.lineno))


def _cannot_fail(test: ast.expr) -> bool:
    """A true constant, a non-empty literal, or an expression compared with itself."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.Tuple | ast.List | ast.Set | ast.Dict):
        return bool(test.elts if not isinstance(test, ast.Dict) else test.keys)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        same = ast.dump(test.left) == ast.dump(test.comparators[0])
        return same and isinstance(test.ops[0], ast.Eq | ast.Is | ast.LtE | ast.GtE)
    return False


def _trivial_call(method: str, args: list[ast.expr]) -> bool:
    """``assertTrue(True)``, ``assertEqual(x, x)`` and their kin."""
    if method in ("assertTrue", "assert_") and args:
        return _cannot_fail(args[0])
    if (
        method in ("assertEqual", "assertEquals", "assertIs", "assertAlmostEqual")
        and len(args) >= 2
    ):
        return ast.dump(args[0]) == ast.dump(args[1])
    return False


def _name(node: ast.AST) -> str:
    """The dotted name of a Name/Attribute chain (``pytest.mark.skip``), or ``""``;
    a call in the chain is looked through (``pytest.mark.skipif(...)``)."""
    if isinstance(node, ast.Call):
        return _name(node.func)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _name(node.value)
        return f"{inner}.{node.attr}" if inner else node.attr
    return ""


def suppressions(text: str) -> list[Mark]:
    """Every suppression comment, scoped by the code on its line (so that a moved
    line is the same suppression)."""
    out: list[Mark] = []
    if not _MAY_SUPPRESS.search(text):
        return out  # no comment holds one: tokenizing would find nothing, slowly
    lines = text.splitlines()
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type != tokenize.COMMENT:
                continue
            for label, pattern in SUPPRESSIONS:
                if pattern.search(tok.string):
                    row = tok.start[0]
                    code = lines[row - 1][: tok.start[1]].strip() if row <= len(lines) else ""
                    out.append(Mark("suppression-added", label, code, row))
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass  # the tokens read so far stand; a broken file is reported by `facts`
    return out


def conftest_hooks(text: str) -> dict[str, tuple[int, str]] | None:
    """A conftest's pytest hooks and collection variables: name -> (line, its
    source dumped); None when the text does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    out: dict[str, tuple[int, str]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "pytest_"
        ):
            out[node.name] = (node.lineno, ast.dump(node))
        elif isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name) and t.id in _COLLECTION_VARIABLES:
                    value = node.value
                    out[t.id] = (node.lineno, ast.dump(value) if value is not None else "")
    return out


_COLLECTION_VARIABLES: Final = {
    "collect_ignore",
    "collect_ignore_glob",
    "pytest_plugins",
    "pytestmark",
}
