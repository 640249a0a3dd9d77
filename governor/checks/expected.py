"""Where a Python test's expected value comes from: the literals of a test's
own body that flow into the expected side of an equality it asserts, and
nowhere else first (`changeable`). `governor.checks.canaries` copies a test
with one of them changed (a copy that must fail when its twin passed).

Why by flow and not by the statement's shape: a copier that knows only
``assertEqual(f(x), 17)`` written as a statement of the test's own body
copies nothing of a file whose tests assert through a helper
(``self.check(10, 7, 17)``), in a loop over a table, in a ``subTest``,
against ``10 + 7`` or against ``want = 17``; such a file's canaries are then
the public templates only, which a lie recognises by their text and spares
(``tests/taskset/test_gaming_outside3.py``). Followed by flow, each of these
is the same fact: a literal of the test's body whose value reaches the
expected side of an equality.

Rules of this file (pure: an ``ast`` in, facts out; no file, no I/O):

- **The test's body is walked in the order it runs**: a loop over a table
  written in the test (a list or tuple of rows) is unrolled row by row, a
  helper the test calls as a statement (``self.name(...)`` of its own class,
  or a function of the module) is walked in place with its parameters bound
  to the call's arguments, a ``with self.subTest(...)`` body is walked as
  the body it is. Names bound to what is built from literals alone
  (``want = 17``, ``10 + 7``, a row's element) keep where they came from.
- **A literal is changeable** when the first thing that uses it, in that
  order, is the expected side of an equality (``self.assertEqual`` and its
  kin, ``assert X == Y``) whose other side is computed without it and
  calls something (what the code under test returns), and nothing that may
  end the test early comes before (a ``return``, ``raise``, ``try``,
  ``break``, ``continue``, a ``with`` other than ``subTest``, a loop or branch
  that holds one of those). Then a copy runs the same as its twin up to that
  equality, and there asks for another value (the changed literal's
  expected value is computed again and must differ), so an equality that
  means anything cannot hold in both.
- **Anything else that uses it first**, or anything not understood (a
  comprehension, a lambda, a call that is not a helper, an attribute or
  subscript store, a loop over what is not a table), **uses it**: it is not
  changed. Unknown is never changeable.
"""

from __future__ import annotations

import ast
import copy
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final

EQUAL_METHODS: Final = frozenset(
    {
        "assertEqual", "assertEquals", "assertListEqual", "assertTupleEqual", "assertDictEqual",
        "assertSequenceEqual", "assertMultiLineEqual",
    }
)  # fmt: skip
"""``unittest`` assertions of equality whose expected value can be changed
(not ``assertAlmostEqual``: a ``delta`` may swallow the change)."""

MAX_DEPTH: Final = 3
"""Helpers walked into, one inside another."""
MAX_EVENTS: Final = 2000
"""What one test's walk records before it stops (a table of many rows): a
literal is judged by what happens up to its first use, so what was recorded
before the stop is still judged."""
_MAX_SIZE: Final = 10_000
"""A value computed from literals longer than this (items, characters) is not computed."""
_BIG: Final = 10**100
"""Nor an integer operation on a larger one."""


@dataclass(frozen=True, slots=True)
class Value:
    """What an expression is worth to the walk: the test's literals it is built
    from (by node id), and, when it is built from literals alone, how to
    compute it (the expression and the names it is computed in)."""

    sources: frozenset[int]
    node: ast.expr | None = None
    env: dict[str, Value] | None = field(default=None, compare=False)

    @property
    def constant(self) -> bool:
        return self.node is not None


UNKNOWN: Final = Value(frozenset())


@dataclass(frozen=True, slots=True)
class _Use:
    sources: frozenset[int]


@dataclass(frozen=True, slots=True)
class _Stop:
    pass


@dataclass(frozen=True, slots=True)
class _Equal:
    expected: Value
    actual: frozenset[int]
    family: str
    question: str
    """What the computed side asks (`_question`)."""


_Event = _Use | _Stop | _Equal


class _TooMuch(Exception):
    pass


class _NotComputed(Exception):
    pass


_ENDS_EARLY: Final = (
    ast.Return, ast.Raise, ast.Try, ast.TryStar, ast.Break, ast.Continue, ast.Yield, ast.Await,
)  # fmt: skip


def _ends_early(node: ast.AST) -> bool:
    return any(isinstance(n, _ENDS_EARLY) for n in ast.walk(node))


def _methods(
    module: ast.Module, cls: ast.ClassDef, seen: frozenset[str] = frozenset()
) -> dict[str, ast.FunctionDef]:
    """The plain methods ``self.name(...)`` reaches in ``cls``: its own, and
    those of its bases that are classes of the same module (a base of
    helpers), nearer first."""
    classes = {n.name: n for n in module.body if isinstance(n, ast.ClassDef)}
    found: dict[str, ast.FunctionDef] = {}
    for base in reversed(cls.bases):
        if isinstance(base, ast.Name) and base.id in classes and base.id not in seen:
            found.update(_methods(module, classes[base.id], seen | {cls.name}))
    found.update(
        {n.name: n for n in cls.body if isinstance(n, ast.FunctionDef) and not n.decorator_list}
    )
    return found


class _Walk:
    """One test's walk: the events in the order they happen."""

    def __init__(self, module: ast.Module, cls: ast.ClassDef | None) -> None:
        self.events: list[_Event] = []
        self.functions = {
            n.name: n
            for n in module.body
            if isinstance(n, ast.FunctionDef) and not n.decorator_list
        }
        self.methods = {} if cls is None else _methods(module, cls)
        self.depth = 0

    def emit(self, event: _Event) -> None:
        self.events.append(event)
        if len(self.events) > MAX_EVENTS:
            raise _TooMuch

    def use(self, value: Value) -> None:
        if value.sources:
            self.emit(_Use(value.sources))

    # expressions: what they are worth, the uses they make as they are evaluated

    def everything(self, node: ast.AST, env: dict[str, Value]) -> frozenset[int]:
        """The literals and names' sources anywhere in ``node`` (what an
        expression not understood may use)."""
        found: set[int] = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Constant):
                found.add(id(n))
            elif isinstance(n, ast.Name) and n.id in env:
                found |= env[n.id].sources
        return frozenset(found)

    def expr(self, node: ast.expr, env: dict[str, Value]) -> Value:
        if isinstance(node, ast.Constant):
            return Value(frozenset({id(node)}), node, {})
        if isinstance(node, ast.Name):
            return env.get(node.id, UNKNOWN)
        if isinstance(node, ast.Tuple | ast.List | ast.Set):
            parts = [self.expr(e, env) for e in node.elts]
            if any(isinstance(e, ast.Starred) for e in node.elts):
                return self.opaque(node, env, parts)
            return self.combine(node, env, parts)
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                return self.opaque(node, env, [])
            parts = [self.expr(k, env) for k in node.keys if k is not None]
            parts += [self.expr(v, env) for v in node.values]
            return self.combine(node, env, parts)
        if isinstance(node, ast.BinOp) and isinstance(node.op, _BINARY):
            return self.combine(node, env, [self.expr(node.left, env), self.expr(node.right, env)])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd | ast.Not):
            return self.combine(node, env, [self.expr(node.operand, env)])
        if isinstance(node, ast.Call):
            parts = [self.expr(a, env) for a in node.args]
            parts += [self.expr(k.value, env) for k in node.keywords]
            if not isinstance(node.func, ast.Name | ast.Attribute):
                parts.append(self.expr(node.func, env))
            elif isinstance(node.func, ast.Attribute):
                parts.append(self.expr(node.func.value, env))
            sources = frozenset().union(*(p.sources for p in parts))
            self.use(Value(sources))  # what a call is handed, it may keep or answer by
            return Value(sources)
        if isinstance(node, ast.Attribute):
            inner = self.expr(node.value, env)
            self.use(inner)
            return Value(inner.sources)
        return self.opaque(node, env, [])

    def opaque(self, node: ast.AST, env: dict[str, Value], parts: Sequence[Value]) -> Value:
        """Not understood: every literal and name in it is used."""
        sources = self.everything(node, env).union(*(p.sources for p in parts))
        self.use(Value(sources))
        return Value(sources)

    def combine(self, node: ast.expr, env: dict[str, Value], parts: Sequence[Value]) -> Value:
        sources = frozenset().union(*(p.sources for p in parts))
        if all(p.constant for p in parts):
            return Value(sources, node, dict(env))  # as the names are now, not as rebound later
        return Value(sources)

    # statements, in the order they run

    def body(self, stmts: Sequence[ast.stmt], env: dict[str, Value], helper: bool = False) -> None:
        for n, stmt in enumerate(stmts):
            if helper and n == len(stmts) - 1 and isinstance(stmt, ast.Return):
                if stmt.value is not None:  # a helper's last line: its value is not used
                    self.use(self.expr(stmt.value, env))
                continue
            self.stmt(stmt, env)

    def stmt(self, stmt: ast.stmt, env: dict[str, Value]) -> None:
        if isinstance(stmt, ast.Expr):
            if not self.equality(stmt.value, env) and not self.helper(stmt.value, env):
                self.expr(stmt.value, env)
        elif isinstance(stmt, ast.Assert):
            if not self.equality(stmt, env):
                self.use(self.opaque(stmt, env, []))
        elif isinstance(stmt, ast.Assign):
            value = self.expr(stmt.value, env)
            for target in stmt.targets:
                self.bind(target, stmt.value, value, env)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.bind(stmt.target, stmt.value, self.expr(stmt.value, env), env)
        elif isinstance(stmt, ast.Pass | ast.Import | ast.ImportFrom):
            pass  # nothing of the test's is used
        elif isinstance(stmt, ast.For) and not stmt.orelse and self.table(stmt, env):
            pass  # walked, row by row
        elif (
            isinstance(stmt, ast.With)
            and len(stmt.items) == 1
            and stmt.items[0].optional_vars is None
            and _is_subtest(stmt.items[0].context_expr)
        ):
            self.expr(stmt.items[0].context_expr, env)
            self.body(stmt.body, env)
        else:
            self.unknown(stmt, env)

    def unknown(self, stmt: ast.stmt, env: dict[str, Value]) -> None:
        """A statement not understood: it uses all it names, the names it binds
        are unknown after it, and it may end the test if it can or holds a
        ``with`` (a context may swallow what its body raises)."""
        self.use(Value(self.everything(stmt, env)))
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
                env[n.id] = UNKNOWN
        if _ends_early(stmt) or any(
            isinstance(n, ast.With | ast.AsyncWith) for n in ast.walk(stmt)
        ):
            self.emit(_Stop())

    def bind(self, target: ast.expr, node: ast.expr, value: Value, env: dict[str, Value]) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
            return
        rows = _elements(node, env)
        if isinstance(target, ast.Tuple | ast.List) and rows is not None:
            elts, at = rows
            if len(elts) == len(target.elts) and not any(
                isinstance(t, ast.Starred) for t in target.elts
            ):
                for t, e in zip(target.elts, elts, strict=True):
                    self.bind(t, e, self.expr(e, at), env)
                return
        self.use(value)  # kept where the walk cannot follow it
        for n in ast.walk(target):
            if isinstance(n, ast.Name):
                env[n.id] = UNKNOWN

    def table(self, loop: ast.For, env: dict[str, Value]) -> bool:
        """A ``for`` over a table written in the test: each row in turn."""
        rows = _elements(loop.iter, env)
        if rows is None or not rows[0]:
            return False
        self.expr(loop.iter, env)
        elts, at = rows
        for row in elts:
            self.bind(loop.target, row, self.expr(row, at), env)
            self.body(loop.body, env)
        return True

    def helper(self, call: ast.expr, env: dict[str, Value]) -> bool:
        """A helper the test calls as a statement, walked in its place."""
        if not isinstance(call, ast.Call) or self.depth >= MAX_DEPTH:
            return False
        func = call.func
        method = (
            isinstance(func, ast.Attribute)
            and isinstance(func.value, ast.Name)
            and func.value.id == "self"
        )
        if method:
            assert isinstance(func, ast.Attribute)
            found = self.methods.get(func.attr)
        elif isinstance(func, ast.Name) and func.id not in env:
            found = self.functions.get(func.id)
        else:
            return False
        if found is None or found.name.startswith("test"):
            return False
        args = found.args
        if args.vararg or args.kwarg or args.posonlyargs or args.kwonlyargs:
            return False
        if any(isinstance(a, ast.Starred) for a in call.args) or any(
            k.arg is None for k in call.keywords
        ):
            return False
        params = [a.arg for a in args.args][1 if method else 0 :]
        if len(call.args) > len(params):
            return False
        given: dict[str, Value] = {}
        for name, arg in zip(params, call.args, strict=False):
            given[name] = self.expr(arg, env)
        for k in call.keywords:
            if k.arg not in params or k.arg in given:
                return False
            given[k.arg] = self.expr(k.value, env)
        defaults = dict(zip(params[len(params) - len(args.defaults) :], args.defaults, strict=True))
        inner: dict[str, Value] = {}
        for name in params:
            if name in given:
                inner[name] = given[name]
            elif name in defaults:
                inner[name] = Value(frozenset())  # a default is none of the test's literals
            else:
                return False
        self.depth += 1
        try:
            self.body(found.body, inner, helper=True)
        finally:
            self.depth -= 1
        return True

    def equality(self, node: ast.AST, env: dict[str, Value]) -> bool:
        """An equality asserted: its sides' worth, the expected side being the
        one built from literals alone (the other computed)."""
        if isinstance(node, ast.Assert):
            test = node.test
            if not (
                isinstance(test, ast.Compare)
                and len(test.ops) == 1
                and isinstance(test.ops[0], ast.Eq)
            ):
                return False
            pair, family = (test.left, test.comparators[0]), "assert =="
        elif isinstance(node, ast.Call):
            func = node.func
            if not (
                isinstance(func, ast.Attribute)
                and isinstance(func.value, ast.Name)
                and func.value.id == "self"
                and func.attr in EQUAL_METHODS
                and len(node.args) >= 2
                and not node.keywords
                and not any(isinstance(a, ast.Starred) for a in node.args)
            ):
                return False
            pair, family = (node.args[0], node.args[1]), func.attr
        else:
            return False
        first, second = self.expr(pair[0], env), self.expr(pair[1], env)
        if first.constant == second.constant:
            self.use(first)
            self.use(second)
        else:
            expected, actual = (first, second) if first.constant else (second, first)
            asked = pair[1] if first.constant else pair[0]
            self.emit(_Equal(expected, actual.sources, family, _question(asked, env)))
        if isinstance(node, ast.Call):
            for extra in node.args[2:]:
                self.use(self.expr(extra, env))
        return True


def _question(node: ast.expr, env: dict[str, Value]) -> str:
    """The question an equality's computed side asks, as a tree's dump: each
    name of it bound to a value built from literals written as that value (a
    helper's ``add(a, b)`` called with 10 and 7 asks what ``add(10, 7)``
    does), other names as they are (two tests that ask one question by names
    the walk cannot follow are told apart no better than their text)."""

    class _Values(ast.NodeTransformer):
        def visit_Name(self, name: ast.Name) -> ast.expr:
            value = env.get(name.id)
            if value is not None and value.constant:
                try:
                    return ast.Constant(compute(value, {}))  # type: ignore[arg-type]
                except (_NotComputed, RecursionError):
                    pass
            return name

    try:
        return ast.dump(_Values().visit(copy.deepcopy(node)))
    except RecursionError:
        return ast.dump(node)


_BINARY: Final = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod)


def _is_subtest(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and isinstance(node.func.value, ast.Name)
        and node.func.value.id == "self"
        and node.func.attr == "subTest"
    )


def _elements(
    node: ast.expr, env: dict[str, Value]
) -> tuple[list[ast.expr], dict[str, Value]] | None:
    """The rows of a table (a list or tuple written out, or a name bound to
    one built from literals), and the names they are computed in."""
    if isinstance(node, ast.Tuple | ast.List) and not any(
        isinstance(e, ast.Starred) for e in node.elts
    ):
        return list(node.elts), env
    if isinstance(node, ast.Name) and node.id in env:
        value = env[node.id]
        if value.node is not None and value.env is not None:
            return _elements(value.node, value.env)
    return None


def compute(value: Value, changed: dict[int, object]) -> object:
    """``value``'s worth with the literals of ``changed`` (by node id) changed;
    `_NotComputed` for what is not computed here (too large, an error)."""
    if value.node is None:
        raise _NotComputed
    return _compute(value.node, value.env or {}, changed)


def _compute(node: ast.expr, env: dict[str, Value], changed: dict[int, object]) -> object:
    if isinstance(node, ast.Constant):
        return changed.get(id(node), node.value)
    if isinstance(node, ast.Name):
        if node.id not in env:
            raise _NotComputed
        return compute(env[node.id], changed)
    if isinstance(node, ast.Tuple):
        return tuple(_compute(e, env, changed) for e in node.elts)
    if isinstance(node, ast.List):
        return [_compute(e, env, changed) for e in node.elts]
    if isinstance(node, ast.Set):
        return {_sized(_compute(e, env, changed)) for e in node.elts}
    if isinstance(node, ast.Dict):
        return {
            _sized(_compute(k, env, changed)): _compute(v, env, changed)
            for k, v in zip(node.keys, node.values, strict=True)
            if k is not None
        }
    if isinstance(node, ast.UnaryOp):
        operand = _compute(node.operand, env, changed)
        if isinstance(node.op, ast.Not):
            return not operand
        if not isinstance(operand, int | float):
            raise _NotComputed
        return -operand if isinstance(node.op, ast.USub) else +operand
    if isinstance(node, ast.BinOp):
        left, right = _compute(node.left, env, changed), _compute(node.right, env, changed)
        return _sized(_binary(node.op, left, right))
    raise _NotComputed


def _binary(op: ast.operator, left: object, right: object) -> object:
    numbers = isinstance(left, int | float) and isinstance(right, int | float)
    try:
        if isinstance(op, ast.Mult) and not numbers:
            count = right if isinstance(right, int) else left
            if not isinstance(count, int) or abs(count) > _MAX_SIZE:
                raise _NotComputed
        if isinstance(left, int) and isinstance(right, int) and max(abs(left), abs(right)) > _BIG:
            raise _NotComputed
        operation: Callable[[object, object], object] = _OPERATIONS[type(op)]
        return operation(left, right)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, KeyError):
        raise _NotComputed from None


_OPERATIONS: Final[dict[type, Callable[[object, object], object]]] = {
    ast.Add: lambda a, b: a + b,  # type: ignore[operator]
    ast.Sub: lambda a, b: a - b,  # type: ignore[operator]
    ast.Mult: lambda a, b: a * b,  # type: ignore[operator]
    ast.Div: lambda a, b: a / b,  # type: ignore[operator]
    ast.FloorDiv: lambda a, b: a // b,  # type: ignore[operator]
    ast.Mod: lambda a, b: a % b,  # type: ignore[operator]
}


def _sized(value: object) -> object:
    if isinstance(value, str | bytes | list | tuple | dict | set) and len(value) > _MAX_SIZE:
        raise _NotComputed
    if isinstance(value, float) and not math.isfinite(value):
        raise _NotComputed
    return value


@dataclass(frozen=True, slots=True)
class Changeable:
    """A literal of a test's body that may be changed for a copy that must fail,
    the value it is changed to, and the equality it reaches: its family, the
    question its computed side asks (`_question`; the equalities of one test
    are told apart by ``equality``, their order), the expected value as
    written (``answer``) and as the changed literal makes it (``changed``)."""

    constant: ast.Constant
    value: object
    family: str
    question: str = ""
    equality: int = 0
    answer: object = None
    changed: object = None
    expected: Value = UNKNOWN

    def answers(self, value: object) -> tuple[object] | None:
        """The expected value this literal changed to ``value`` makes, or None
        when it is not computed here (too large, an error)."""
        try:
            return (compute(self.expected, {id(self.constant): value}),)
        except (_NotComputed, RecursionError):
            return None


def changeable(
    module: ast.Module,
    cls: ast.ClassDef | None,
    test: ast.FunctionDef,
    mutated: Callable[[object], object | None],
) -> Iterator[Changeable]:
    """The literals of ``test``'s own body that reach the expected side of an
    equality first (see the module's header), each with its changed value
    (``mutated``), where the expected value it reaches changes with it."""
    if any(isinstance(n, ast.Yield | ast.YieldFrom | ast.Await) for n in ast.walk(test)):
        return
    walk = _Walk(module, cls)
    env: dict[str, Value] = {a.arg: UNKNOWN for a in test.args.args}
    try:
        walk.body(test.body, env)
    except _TooMuch:
        pass  # what ran first is known: a literal whose first use is in it is judged
    except RecursionError:
        return
    own = {id(n): n for stmt in test.body for n in ast.walk(stmt) if isinstance(n, ast.Constant)}
    first: dict[int, int] = {}
    stopped_at = next((i for i, e in enumerate(walk.events) if isinstance(e, _Stop)), None)
    for i, event in enumerate(walk.events):
        sources = (
            event.sources
            if isinstance(event, _Use)
            else event.expected.sources | event.actual
            if isinstance(event, _Equal)
            else frozenset()
        )
        for s in sources:
            first.setdefault(s, i)
    for source, i in first.items():
        event = walk.events[i]
        if source not in own or not isinstance(event, _Equal):
            continue
        if stopped_at is not None and stopped_at < i:
            continue
        if source in event.actual:
            continue  # the computed side must not hold it
        value = mutated(own[source].value)
        if value is None:
            continue
        try:
            was, now = compute(event.expected, {}), compute(event.expected, {source: value})
            if was == now or was != was:  # a NaN is equal to nothing
                continue
        except (_NotComputed, RecursionError):
            continue
        yield Changeable(
            own[source], value, event.family, event.question, i, was, now, event.expected
        )
