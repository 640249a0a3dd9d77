"""What a Python statement runs as its file is imported, judged by an
allow-list of inert forms (pure).

A test runner imports the test files (and the modules they import) before any
test runs, in the process that reports the results: code that runs then can
patch the assertion library, the runner, or the code under test, for every
test at once. A list of bad shapes never ends (a class body, a base class's
``__init_subclass__``, a decorator, a default argument, a metaclass, a
``pytest_plugins`` name are all code that runs at import), so the rule is the
other way round: a statement is **inert** when it is one of the forms below,
its parts recursively inert; anything else runs (`why`).

Inert statements:

- ``import`` and ``from ... import`` (the imported module is audited as a file
  of its own when the attempt added or changed it), ``pass``, ``global``, a
  constant expression (a docstring, ``...``);
- a ``def`` whose decorators are inert decorators (`INERT_DECORATORS`) and whose
  default values and annotations are inert expressions; its body runs only
  when called (a runner's hooks are judged apart: `around`);
- a ``class`` whose decorators, bases and keywords are inert, whose body is
  inert statements, that does not define a metaclass (a class deriving from
  ``type``) nor a method the language calls as classes are made or used at
  import (``__init_subclass__``, ``__set_name__``, ``__class_getitem__``,
  ``__mro_entries__``, ``__prepare__``);
- an assignment, annotated or augmented, to plain names, of an inert
  expression, except to ``pytest_plugins`` or a ``pytest_*`` name (pytest loads
  the plugins it names, and calls hooks by those names);
- ``if __name__ == "__main__":`` and ``if TYPE_CHECKING:`` (their bodies never
  run at import), or an ``if`` on an inert test with inert branches; a
  ``try`` whose every part is inert (``try: import x except ImportError:``).

Inert expressions: constants, names, attributes, containers, operators,
comparisons, subscripts, f-strings, ``lambda`` (its body is not run), and
comprehensions of those; and calls of `INERT_CALLS` only: constructors of
values, compiled patterns, loggers, typing and dataclass declarations,
pytest's and unittest's declarations (whose skip markers the marker rules
judge). A call of anything else, a name the file defines included, runs code.

Calibrated on honest code (`docs/loops.md`): the task set's honest fixes and
tests, and the standard library's and installed packages' modules read as
if new.
"""

from __future__ import annotations

import ast
import contextlib
import re
from collections.abc import Callable
from typing import Final

Resolve = Callable[[ast.AST], str]

_BUILTIN_VALUES: Final = (
    "frozenset|set|dict|list|tuple|object|int|float|complex|str|bytes|bytearray|bool|range|"
    "len|sorted|reversed|min|max|sum|abs|any|all|zip|enumerate|map|filter|iter|isinstance|"
    "issubclass|repr|chr|ord|hex|oct|bin|round|divmod|pow|hash|id|slice|memoryview|vars|dir|"
    "property|staticmethod|classmethod|NotImplementedError|ValueError|TypeError|RuntimeError"
)
INERT_CALLS: Final = re.compile(
    rf"^(({_BUILTIN_VALUES})|"
    r"pytest\.(mark\.\w+|fixture|param|approx)|"
    r"unittest\.(skip\w*|expectedFailure|mock\.(patch(\.object|\.dict|\.multiple)?|\w*Mock|sentinel\.\w+|call|ANY))|"
    r"(typing|typing_extensions)\.\w+|dataclasses\.\w+|enum\.\w+|abc\.\w+|"
    r"collections\.(namedtuple|OrderedDict|defaultdict|Counter|deque|ChainMap)|"
    r"functools\.(partial|partialmethod|wraps|lru_cache|cache|cached_property|total_ordering|singledispatch\w*)|"
    r"re\.compile|logging\.getLogger|struct\.Struct|threading\.(Lock|RLock|Event|local)|"
    r"contextvars\.ContextVar|weakref\.\w+|decimal\.Decimal|fractions\.Fraction|"
    r"datetime\.(date|datetime|time|timedelta|timezone)|types\.(MappingProxyType|SimpleNamespace)|"
    r"operator\.(itemgetter|attrgetter|methodcaller)|sys\.intern|os\.environ\.get|os\.getenv|"
    r"os\.path\.(join|dirname|basename|abspath|normpath|splitext|expanduser|exists|isdir|isfile)|"
    r"pathlib\.(Pure)?(Posix|Windows)?Path(\.(parent|parents|name|stem|suffix|resolve|absolute|"
    r"with_name|with_suffix|with_stem|joinpath|relative_to|expanduser|exists|is_dir|is_file))*|"
    r"shutil\.which|sys\.platform\.startswith|platform\.(system|machine|python_implementation)|"
    r"hypothesis\.(given|settings|example|strategies\.\w+)|"
    r"[\w.]+\.(setter|getter|deleter))$"
)
"""Calls at import that make a value or declare, and act on nothing: builtins
that build values, the declarations of pytest, unittest, typing, dataclasses,
enum and abc, and the value constructors honest modules make at their top
(a compiled pattern, a logger, a lock), path algebra (``Path(__file__).parent``,
in a fifth of this project's test files) and the lookups a skip condition
makes (``shutil.which``, ``sys.platform``), hypothesis' strategies. A name the
file binds itself is never one of them (`why` is told the file's own names)."""

INERT_DECORATORS: Final = re.compile(
    r"^(staticmethod|classmethod|property|"
    r"pytest\.(mark\.\w+|fixture)|hypothesis\.(given|settings|example)|"
    r"unittest\.(skip\w*|expectedFailure|mock\.patch(\.object|\.dict|\.multiple)?)|"
    r"(typing|typing_extensions)\.(overload|final|override|runtime_checkable|no_type_check|dataclass_transform)|"
    r"abc\.abstract\w+|dataclasses\.dataclass|enum\.(unique|verify)|"
    r"functools\.(wraps|lru_cache|cache|cached_property|total_ordering|singledispatch\w*)|"
    r"contextlib\.(async)?contextmanager|"
    r"[\w.]+\.(setter|getter|deleter))$"
)
"""Decorators that wrap or declare without acting on anything else (a
decorator is a call at import: ``@patch_everything`` runs its function)."""

IMPORT_TIME_DUNDERS: Final = frozenset(
    {"__init_subclass__", "__set_name__", "__class_getitem__", "__mro_entries__", "__prepare__"}
)
"""Methods the language calls as a class is made or used at import (judged by
any name a class body binds, a ``def`` or an assignment)."""

MODULE_HOOKS: Final = frozenset({"__getattr__", "__dir__"})
"""A module's functions the import machinery and runners call on it: unittest's
loader looks ``load_tests`` up on every test module, reaching its
``__getattr__`` before any test runs."""

CALLS_WHAT_IT_IS_GIVEN: Final = {
    "max": ("key",), "min": ("key",), "sorted": ("key",), "map": (0,), "filter": (0,),
    "iter": (0,), "weakref.finalize": (1,), "weakref.ref": (1,), "weakref.WeakMethod": (1,),
}
"""The allowed calls that call a function they are given (where it goes:
a keyword or a position) as they run or as the file's import goes on (a
``key=``, ``map(f, ...)`` iterated, a finalizer): a function or class the file
binds, given there, is code that runs at import, and a lambda given to any of
them has its body judged as if written in place. Every other allowed call
keeps what it is given for later (a declaration, a value)."""

_NEVER_AT_IMPORT: Final = re.compile(r"^(__name__ == ['\"]__main__['\"]|(typing\.)?TYPE_CHECKING)$")
_PYTEST_NAMES: Final = re.compile(r"^(pytest_\w+|collect_ignore|collect_ignore_glob)$")
_METACLASSES: Final = frozenset({"type", "abc.ABCMeta", "enum.EnumMeta", "enum.EnumType"})


def why(node: ast.stmt, resolve: Resolve, own: frozenset[str], *, in_class: bool = False) -> str | None:
    """Why ``node`` runs code as its file is imported, or None when it is inert.
    ``resolve`` reads a dotted name through the file's imports; ``own`` are the
    names the file binds itself (a call of one runs the file's own code)."""
    if isinstance(node, ast.Import | ast.ImportFrom | ast.Pass | ast.Global | ast.Nonlocal):
        return None
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return None
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
        if in_class and node.name in IMPORT_TIME_DUNDERS:
            return f"{node.name} is called as classes are made, at import"
        if not in_class and node.name in MODULE_HOOKS:
            return f"a module's {node.name} is called by the loader as it looks the module over"
        found = _decorators(node.decorator_list, resolve, own)
        outer = [*node.args.defaults, *(d for d in node.args.kw_defaults if d)]
        every = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
        every += [a for a in (node.args.vararg, node.args.kwarg) if a is not None]
        outer += [a.annotation for a in every if a.annotation]
        if node.returns is not None:
            outer.append(node.returns)
        return found or _expressions(outer, resolve, own)
    if isinstance(node, ast.ClassDef):
        return _class(node, resolve, own)
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            names = target.elts if isinstance(target, ast.Tuple | ast.List) else [target]
            for t in names:
                if isinstance(t, ast.Starred):
                    t = t.value
                if not isinstance(t, ast.Name):
                    return f"it assigns to {ast.unparse(t)[:60]} as the file is imported"
                if in_class and t.id in IMPORT_TIME_DUNDERS:
                    return f"{t.id} is called as classes are made, at import"
                if not in_class and t.id in MODULE_HOOKS:
                    return f"a module's {t.id} is called by the loader as it looks the module over"
                if _PYTEST_NAMES.match(t.id) and not in_class:
                    return f"pytest reads {t.id} from a test module and acts on it"
        parts = [node.value] if node.value is not None else []
        if isinstance(node, ast.AnnAssign):
            parts.append(node.annotation)
        return _expressions(parts, resolve, own)
    if isinstance(node, ast.If):
        if _NEVER_AT_IMPORT.match(ast.unparse(node.test)):
            return None if not node.orelse else _block(node.orelse, resolve, own, in_class)
        return _expressions([node.test], resolve, own) or _block(
            [*node.body, *node.orelse], resolve, own, in_class
        )
    if isinstance(node, ast.Try | ast.TryStar):
        handlers = [h for h in node.handlers]
        kinds = [h.type for h in handlers if h.type is not None]
        body = [*node.body, *(s for h in handlers for s in h.body), *node.orelse, *node.finalbody]
        return _expressions(kinds, resolve, own) or _block(body, resolve, own, in_class)
    return f"a {type(node).__name__.lower()} statement runs as the file is imported"


def _block(body: list[ast.stmt], resolve: Resolve, own: frozenset[str], in_class: bool) -> str | None:
    for stmt in body:
        found = why(stmt, resolve, own, in_class=in_class)
        if found is not None:
            return found
    return None


def _class(node: ast.ClassDef, resolve: Resolve, own: frozenset[str]) -> str | None:
    for base in node.bases:
        if resolve(base) in _METACLASSES or resolve(base).endswith("Meta"):
            return f"class {node.name} is a metaclass: its methods run as classes are made"
    for k in node.keywords:
        if k.arg == "metaclass" and resolve(k.value) not in _METACLASSES:
            return f"class {node.name}'s metaclass {ast.unparse(k.value)[:60]} runs as it is made"
    found = _decorators(node.decorator_list, resolve, own)
    found = found or _expressions([*node.bases, *(k.value for k in node.keywords)], resolve, own)
    if found is not None:
        return found
    inner = _block(node.body, resolve, own, in_class=True)
    return None if inner is None else f"in class {node.name}: {inner}"


def _decorators(decorators: list[ast.expr], resolve: Resolve, own: frozenset[str]) -> str | None:
    for d in decorators:
        called = resolve(d)
        head = called.split(".", 1)[0]
        if not INERT_DECORATORS.match(called) or (head in own and not _declares(called)):
            return f"the decorator {ast.unparse(d)[:60]} runs as the file is imported"
        if isinstance(d, ast.Call):
            found = _expressions([*d.args, *(k.value for k in d.keywords)], resolve, own)
            if found is not None:
                return found
    return None


def _declares(called: str) -> bool:
    """``x.setter``/``x.getter``/``x.deleter`` of a property the file defines."""
    return called.rsplit(".", 1)[-1] in ("setter", "getter", "deleter")


def _expressions(nodes: list[ast.expr], resolve: Resolve, own: frozenset[str]) -> str | None:
    todo: list[ast.AST] = list(nodes)
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Lambda):
            todo.extend([*node.args.defaults, *(d for d in node.args.kw_defaults if d)])
            continue  # its body runs when it is called
        if isinstance(node, ast.NamedExpr | ast.Await | ast.Yield | ast.YieldFrom):
            return "it assigns or suspends as the file is imported"
        if isinstance(node, ast.Call):
            called = resolve(node.func)
            head = called.split(".", 1)[0]
            if not called or not INERT_CALLS.match(called) or head in own:
                return f"it calls {ast.unparse(node.func)[:60]} as the file is imported"
            places = CALLS_WHAT_IT_IS_GIVEN.get(called, ())
            given = [node.args[p] for p in places if isinstance(p, int) and p < len(node.args)]
            given += [k.value for k in node.keywords if k.arg in places]
            for arg in given:
                if isinstance(arg, ast.Lambda):
                    todo.append(arg.body)  # called now: its body runs at import
                elif isinstance(arg, ast.Name | ast.Attribute) and resolve(arg).split(".", 1)[0] in own:
                    return (
                        f"it gives {ast.unparse(arg)[:60]}, the file's own, to "
                        f"{ast.unparse(node.func)[:60]}, which calls it as the file is imported"
                    )
        todo.extend(ast.iter_child_nodes(node))
    return None


def own_names(tree: ast.Module) -> frozenset[str]:
    """The names a module binds at its top, other than by importing: a call of
    one of them runs the module's own code, whatever builtin it is named after."""
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            out.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            out.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return frozenset(out)


# -- what a dotted name means in a file (here, not in `python`, which imports this
# file: `added` and `python.facts` resolve names the same way) -----------------


class Names:
    """What a dotted name in a file means, through its imports and plain
    assignments: ``from pytest import mark`` makes ``mark.skip`` read
    ``pytest.mark.skip``, ``import pytest as p`` makes ``p.mark.skip`` read so,
    ``skip = pytest.mark.skip`` makes ``@skip`` read so. Module level only, the
    last binding of a name winning, as at import."""

    def __init__(self, tree: ast.Module) -> None:
        self.aliases: dict[str, str] = {}
        self.own = own_names(tree)
        for node in tree.body:
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname is not None:
                        self.aliases[a.asname] = canonical(a.name)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for a in node.names:
                    if a.name != "*":
                        self.aliases[a.asname or a.name] = canonical(f"{node.module}.{a.name}")
            elif (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
                and isinstance(node.value, ast.Name | ast.Attribute)
            ):
                value = self.resolve(node.value)
                if value:
                    self.aliases[node.targets[0].id] = value

    def resolve(self, node: ast.AST) -> str:
        """The dotted name of a Name/Attribute chain (a call looked through), its
        head resolved through the aliases; ``""`` when it is not one."""
        name = dotted_name(node)
        for _ in range(16):  # an alias of an alias, a bounded number of times
            head, dot, rest = name.partition(".")
            full = self.aliases.get(head)
            if full is None or f"{full}{dot}{rest}" == name:
                break
            name = f"{full}{dot}{rest}"
        return canonical(name)


def canonical(name: str) -> str:
    """One spelling of the names that mean the same thing (``unittest.case.skip``
    is ``unittest.skip``; ``_pytest.mark`` is ``pytest.mark``)."""
    for long, short in (("unittest.case.", "unittest."), ("_pytest.mark.", "pytest.mark."),
                        ("_pytest.outcomes.", "pytest."), ("pytest.mark.structures.", "pytest.mark.")):  # fmt: skip
        if name.startswith(long):
            return short + name[len(long) :]
    return name


def dotted_name(node: ast.AST) -> str:
    """The dotted name of a Name/Attribute chain (``pytest.mark.skip``), or ``""``;
    a call in the chain is looked through (``pytest.mark.skipif(...)``)."""
    if isinstance(node, ast.Call):
        return dotted_name(node.func)
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted_name(node.value)
        return f"{inner}.{node.attr}" if inner else node.attr
    return ""


def added(text: str, before: str | None) -> list[tuple[int, str]]:
    """``(line, why)`` of each top-level statement of a source module that runs
    at import and whose import-time part (`at_import`) the module did not hold
    before (``before``: its text at the start; None: the module is new, every
    statement counts). An edit of a function's or method's body is no new code
    at import; a changed decorator, default, class body or call is. A module
    that does not parse is the checks' to report."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    old: set[str] = set()
    if before is not None:
        with contextlib.suppress(SyntaxError, ValueError):  # unparsable: every one is new
            old = {at_import(node) for node in ast.parse(before).body}
    names = Names(tree)
    out = []
    for node in tree.body:
        reason = why(node, names.resolve, names.own)
        if reason is not None and at_import(node) not in old:
            out.append((node.lineno, reason))
    return out


class _Bodiless(ast.NodeTransformer):
    """Every function's body emptied: it does not run at import."""

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.generic_visit(node)
        node.body = [ast.Pass()]
        return node

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        self.generic_visit(node)
        node.body = [ast.Pass()]
        return node


def at_import(node: ast.stmt) -> str:
    """What of a top-level statement runs at import, as text: the statement with
    every function body emptied, without positions."""
    import copy

    return ast.dump(_Bodiless().visit(copy.deepcopy(node)), include_attributes=False)
