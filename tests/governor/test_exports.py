"""The library's lazy tables name what exists: each package that imports its
names on first use (``governor``, ``governor.batch``, ``governor.sandbox``) keeps three
lists of one set of names -- ``__all__``, the ``_LAZY`` table (name -> module)
and the ``TYPE_CHECKING`` imports a type checker reads -- and a module moved or
a name renamed breaks only the first ``from governor import X`` a user runs,
never an import of ours. This holds the three to each other and to the modules
they name, as trio's export test holds its re-exports."""

from __future__ import annotations

import ast
import importlib
import types
from pathlib import Path

import pytest

LAZY_PACKAGES = ("governor", "governor.batch", "governor.sandbox")


def typing_imports(source: str) -> dict[str, str]:
    """name -> module of every ``from M import name`` under ``if TYPE_CHECKING:``."""
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for stmt in node.body:
                if isinstance(stmt, ast.ImportFrom) and stmt.module:
                    found.update({a.asname or a.name: stmt.module for a in stmt.names})
    return found


def table_problems(package: types.ModuleType, source: str) -> list[str]:
    """What is wrong with `package`'s lazy table: a name whose module is gone or
    lacks it, a name the package does not hand out as its module's own, and any
    difference between ``__all__``, ``_LAZY`` and the ``TYPE_CHECKING`` imports."""
    lazy: dict[str, str] = package._LAZY
    problems = []
    for name, module_name in sorted(lazy.items()):
        try:
            module = importlib.import_module(module_name)
        except ImportError as e:
            problems.append(f"{package.__name__}.{name}: {module_name} does not import ({e})")
            continue
        if (Path(getattr(package, "__file__", None) or "-").parent / name / "__init__.py").exists():
            problems.append(f"{package.__name__}.{name}: hidden by the subpackage {name} once it is imported")
        elif not hasattr(module, name):
            problems.append(f"{package.__name__}.{name}: {module_name} has no {name}")
        elif getattr(package, name) is not getattr(module, name):
            problems.append(f"{package.__name__}.{name} is not {module_name}.{name}")
    plain = {n for n in package.__all__ if n.startswith("__")}  # __version__, set eagerly
    if set(package.__all__) - plain != set(lazy):
        problems.append(
            f"{package.__name__}.__all__ and _LAZY differ: "
            f"{sorted(set(package.__all__) ^ set(lazy) - plain)}"
        )
    typed = typing_imports(source)
    if typed != lazy:
        differ = sorted(n for n in set(typed) | set(lazy) if typed.get(n) != lazy.get(n))
        problems.append(f"{package.__name__}: TYPE_CHECKING imports and _LAZY differ on {differ}")
    for name in plain:
        if not hasattr(package, name):
            problems.append(f"{package.__name__}.__all__ names {name}, which it does not have")
    return problems


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_each_lazy_table_names_what_exists_and_agrees_with_all_and_the_type_checker(name: str) -> None:
    package = importlib.import_module(name)
    source = Path(package.__file__ or "").read_text()
    assert package._LAZY  # the table is there at all
    assert not table_problems(package, source)


@pytest.mark.parametrize("name", LAZY_PACKAGES)
def test_a_name_not_in_a_lazy_table_is_an_attribute_error_naming_it(name: str) -> None:
    package = importlib.import_module(name)
    with pytest.raises(AttributeError, match="no_such_name"):
        package.no_such_name  # noqa: B018


def test_the_check_finds_a_moved_module_a_missing_name_and_lists_that_differ() -> None:
    package = types.ModuleType("fake")
    table = {
        "AttemptSpec": "governor.gone",  # a module moved away
        "Outcome": "governor.ending.outcome",
        "Nothing": "governor.ending.outcome",  # not there
    }

    def lazy(name: str) -> object:
        if name not in table:
            raise AttributeError(name)
        return getattr(importlib.import_module(table[name]), name)

    for attribute, value in (("_LAZY", table), ("__all__", ["AttemptSpec", "Outcome", "Extra"]),
                             ("__getattr__", lazy)):  # fmt: skip
        setattr(package, attribute, value)
    source = "if TYPE_CHECKING:\n    from governor.ending.outcome import Outcome\n"
    problems = table_problems(package, source)
    assert problems[0].startswith("fake.AttemptSpec: governor.gone does not import")
    assert "fake.Nothing: governor.ending.outcome has no Nothing" in problems
    assert any("__all__ and _LAZY differ: ['Extra', 'Nothing']" in p for p in problems)
    assert any("TYPE_CHECKING imports and _LAZY differ on ['AttemptSpec', 'Nothing']" in p for p in problems)
