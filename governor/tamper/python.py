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
import copy
import hashlib
import io
import re
import tokenize
from typing import Final

from governor.tamper import import_time
from governor.tamper.facts import Code, Facts, Mark, Shape, Test, constant
from governor.tamper.import_time import Names

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
    """The tests, markers and suppressions of one Python file, and the rest of
    its code (`Facts.code`: what its tests use and what runs at import)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as e:
        line = getattr(e, "lineno", None)
        return Facts(
            error=f"not valid Python{f' (line {line})' if line else ''}: {e.msg if isinstance(e, SyntaxError) else e}"
        )
    out = Facts()
    names = Names(tree)
    lines = text.splitlines()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith(
            "test"
        ):
            _test(out, names, node.name, node, lines)
            continue
        if isinstance(node, ast.ClassDef) and _is_test_class(node, names):
            _marks_of_decorators(out, names, node.decorator_list, node.name)
            for item in node.body:
                if isinstance(
                    item, ast.FunctionDef | ast.AsyncFunctionDef
                ) and item.name.startswith("test"):
                    _test(out, names, f"{node.name}.{item.name}", item, lines)
                    continue
                if isinstance(item, ast.Assign) and _assigns(item, "pytestmark"):
                    _marks_in(out, names, item.value, node.name)
                for key in _keys(item):
                    out.code[f"{node.name}.{key}"] = _code(item, names, lines, member=True)
            out.code[f"class {node.name}"] = _code(_shell(node), names, lines)
            continue
        elif isinstance(node, ast.Assign) and _assigns(node, "pytestmark"):
            _marks_in(out, names, node.value, "the module")
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            _marks_in(out, names, node, "the module")  # pytest.skip(allow_module_level=True)
        if isinstance(node, ast.Import | ast.ImportFrom):
            out.code.update(_imports(node))
            continue
        for key in _keys(node):
            out.code[key] = _code(node, names, lines)
    out.marks.extend(suppressions(text))
    return out


def _imports(node: ast.Import | ast.ImportFrom) -> dict[str, Code]:
    """One `Code` per name an import binds, what it binds it to as its body:
    ``from calc import add`` becoming ``from calc import add, sub`` changes
    nothing ``add`` means; ``from fake import add`` does."""
    out = {}
    module = "." * getattr(node, "level", 0) + (getattr(node, "module", None) or "")
    for a in node.names:
        name = a.asname or a.name.split(".")[0]
        if a.name == "*":
            name = f"* from {module}"
        meant = f"{module}:{a.name}" if isinstance(node, ast.ImportFrom) else a.name
        out[name] = Code(node.lineno, Shape(meant, constant(meant)))
    return out


def _code(node: ast.stmt, names: Names, lines: list[str], *, member: bool = False) -> Code:
    """A statement as `Code`: its text, its tree made only when the text differs,
    and why it runs, asked only when it is new. A test class's member that runs
    only around the tests (its ``setUp``, nothing at import) is ``around``."""
    around = (
        member
        and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and _around(node, names, member=True) is not None
        and import_time.why(node, names.resolve, names.own, in_class=True) is None
    )
    return Code(
        node.lineno,
        Shape(_source(node, lines), lambda: _dump(node)),
        lambda: _runs(node, names, member=member),
        around=around,
    )


def _source(node: ast.stmt, lines: list[str]) -> str:
    """The lines a statement spans, its decorators' included (a class without a
    body: its header's)."""
    decorators = getattr(node, "decorator_list", [])
    start = min([node.lineno, *(d.lineno for d in decorators)])
    return "\n".join(lines[start - 1 : node.end_lineno or node.lineno])


def _assigns(node: ast.Assign, name: str) -> bool:
    return any(isinstance(t, ast.Name) and t.id == name for t in node.targets)


def _is_test_class(node: ast.ClassDef, names: Names) -> bool:
    if node.name.startswith("Test"):
        return True
    return any(names.resolve(base).endswith("TestCase") for base in node.bases)


def _dump(node: ast.AST) -> str:
    """The tree without positions, a leading docstring left out: what the code does."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body:
        first = node.body[0]
        if (
            isinstance(first, ast.Expr)
            and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)
            and len(node.body) > 1
        ):
            node = copy.copy(node)
            node.body = node.body[1:]
    return ast.dump(node, include_attributes=False)


def _shell(node: ast.ClassDef) -> ast.ClassDef:
    """A class without its body: its decorators, bases and keywords (its end
    the line before its body's first statement)."""
    shell = copy.copy(node)
    shell.body = []
    shell.end_lineno = max(node.lineno, node.body[0].lineno - 1) if node.body else node.end_lineno
    return shell


def _keys(node: ast.stmt) -> list[str]:
    """What a statement binds (the names a test can use), or its tree when it
    binds nothing (an expression, an ``if`` at module level)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [node.name]
    if isinstance(node, ast.Import | ast.ImportFrom):
        return [a.asname or a.name.split(".")[0] for a in node.names if a.name != "*"] or [
            f"import * from {getattr(node, 'module', '')}"
        ]
    targets: list[ast.expr] = []
    if isinstance(node, ast.Assign):
        targets = node.targets
    elif isinstance(node, ast.AnnAssign | ast.AugAssign):
        targets = [node.target]
    bound = [ast.unparse(t) for t in targets]
    if bound:
        return [", ".join(bound) + " ="]
    return [
        f"statement {ast.unparse(node)[:60]!r} ({hashlib.sha256(_dump(node).encode()).hexdigest()[:12]})"
    ]


_MODULE_HOOKS: Final = re.compile(
    r"^(setup|teardown|setup_module|teardown_module|setup_function|teardown_function|"
    r"setUpModule|tearDownModule|load_tests|pytest_\w+)$"
)
"""Module-level functions a runner calls around a file's tests (or to choose them)."""
_MEMBER_HOOKS: Final = re.compile(
    r"^(setup|teardown|setUp|tearDown|asyncSetUp|asyncTearDown|setup_\w*|teardown_\w*|"
    r"setUpClass|tearDownClass|run|debug|__\w+__|assert\w*|fail\w*|skipTest|subTest|"
    r"addCleanup|doCleanups|id|shortDescription)$"
)
"""Methods a runner calls around a class's tests, or that replace what a test
calls on ``self`` (a ``def assertEqual`` that does nothing)."""


def _runs(node: ast.stmt, names: Names, *, member: bool = False) -> str | None:
    """Why ``node`` runs code when its file is imported (`import_time.why`: an
    allow-list of inert forms) or around its tests (a runner's hook, an
    autouse fixture); None when it only defines."""
    at_import = import_time.why(node, names.resolve, names.own, in_class=member)
    if at_import is not None:
        return at_import
    return _around(node, names, member=member)


def _around(node: ast.stmt, names: Names, *, member: bool) -> str | None:
    """Why ``node`` runs around the tests: a hook the runner calls by its name, or
    an autouse fixture; None otherwise."""
    if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        return None
    if (_MEMBER_HOOKS if member else _MODULE_HOOKS).match(node.name):
        return f"{node.name} is called by the runner around the tests"
    for d in node.decorator_list:
        called = names.resolve(d)
        if called.startswith("pytest.fixture") and any(
            k.arg == "autouse" and not (isinstance(k.value, ast.Constant) and not k.value.value)
            for k in (d.keywords if isinstance(d, ast.Call) else [])
        ):
            return "an autouse fixture runs around every test"
    return None


def _test(
    out: Facts,
    names: Names,
    name: str,
    node: ast.FunctionDef | ast.AsyncFunctionDef,
    lines: list[str],
) -> None:
    test = Test(node.lineno, body=Shape(_source(node, lines), lambda: _dump(node)))
    outer = import_time.why(node, names.resolve, names.own, in_class="." in name)
    if outer is not None:  # its decorators or defaults run at import, whatever its body asserts
        parts = [*node.decorator_list, node.args, *([node.returns] if node.returns else [])]
        signature = "\n".join(ast.dump(p) for p in parts)
        out.code[f"{name} (decorators, defaults)"] = Code(
            node.lineno, Shape(signature, constant(signature)), lambda: outer
        )
    _marks_of_decorators(out, names, node.decorator_list, name)
    for sub in (sub for stmt in node.body for sub in ast.walk(stmt)):
        if isinstance(sub, ast.Assert):
            test.asserts += 1
            if _cannot_fail(sub.test):
                test.trivial.append(sub.lineno)
        elif isinstance(sub, ast.Call):
            called = names.resolve(sub.func)
            last = called.rsplit(".", 1)[-1]
            if last.startswith(("assert", "fail")) or (
                called.startswith("pytest.") and last in _RAISES
            ):
                test.asserts += 1
                if _trivial_call(last, sub.args):
                    test.trivial.append(sub.lineno)
            _skip_call(out, names, sub, name)
        elif (
            isinstance(sub, ast.Raise)
            and sub.exc is not None
            and names.resolve(sub.exc).endswith("SkipTest")
        ):
            out.marks.append(Mark("skip-added", "raise SkipTest", name, sub.lineno))
    out.tests[name] = test


def _marks_of_decorators(out: Facts, names: Names, decorators: list[ast.expr], scope: str) -> None:
    for d in decorators:
        _marks_in(out, names, d, scope)


def _marks_in(out: Facts, names: Names, node: ast.AST, scope: str) -> None:
    """Skip markers anywhere inside ``node`` (a decorator, a ``pytestmark``
    list, a module-level statement)."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Attribute | ast.Name):
            label = _mark_label(names.resolve(sub))
            if label is not None:
                out.marks.append(Mark("skip-added", label, scope, sub.lineno))
        elif isinstance(sub, ast.Call):
            _skip_call(out, names, sub, scope)


def _mark_label(name: str) -> str | None:
    parts = name.split(".")
    if len(parts) >= 3 and parts[-2] == "mark" and parts[-1] in _SKIP_MARKS:
        return f"pytest.mark.{parts[-1]}"
    if len(parts) == 2 and parts[0] == "unittest" and parts[1] in _UNITTEST_SKIPS:
        return name
    return None


def _skip_call(out: Facts, names: Names, call: ast.Call, scope: str) -> None:
    called = names.resolve(call.func)
    parts = called.split(".")
    if len(parts) == 2 and parts[0] == "pytest" and parts[1] in _SKIP_CALLS:
        out.marks.append(Mark("skip-added", f"{called}()", scope, call.lineno))
    elif parts[-1] == "skipTest":
        out.marks.append(Mark("skip-added", "skipTest()", scope, call.lineno))


def _cannot_fail(test: ast.expr) -> bool:
    """A true constant, a non-empty literal, an expression compared with itself,
    one of constants only (``5 == 2 + 3``: nothing under test in it), or one
    ``or``-ed with a true constant."""
    if isinstance(test, ast.Constant):
        return bool(test.value)
    if isinstance(test, ast.Tuple | ast.List | ast.Set | ast.Dict):
        return bool(test.elts if not isinstance(test, ast.Dict) else test.keys)
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
        return any(_cannot_fail(v) for v in test.values)
    if not any(
        isinstance(n, ast.Name | ast.Call | ast.Attribute | ast.Subscript) for n in ast.walk(test)
    ):
        return True  # never evaluated: the file is the agent's (``2**10**10**10``)
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
                    out.append(Mark("suppression-added", label, code, row, _near(lines, row)))
    except (tokenize.TokenError, SyntaxError, ValueError):
        pass  # the tokens read so far stand; a broken file is reported by `facts`
    return out


def _near(lines: list[str], row: int) -> tuple[str, str]:
    """The stripped lines above and below line ``row`` (1-based)."""
    above = lines[row - 2].strip() if 2 <= row <= len(lines) + 1 else ""
    below = lines[row].strip() if row < len(lines) else ""
    return above, below


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
