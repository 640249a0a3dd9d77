"""What governor/, policies/ and sandbox/ import is declared in pyproject.toml:
a package that only comes along with another (oslash with jsonrpcserver) can
vanish with that package's next release; an optional extra's package is
imported lazily (in a function, or under ``except ImportError``), so that an
install without the extra still starts."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from collections.abc import Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# the bundled agents, run by path, import their siblings by their own names
BUNDLED = {path.stem for path in (ROOT / "governor" / "agents").glob("*.py")}
OURS = {"governor", "policies", "sandbox", "__future__", *BUNDLED}


def _name(requirement: str) -> str:
    match = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert match is not None, requirement
    return re.sub(r"[-_.]+", "-", match.group(0)).lower()


def _declared() -> tuple[set[str], set[str]]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    required = {_name(r) for r in project["dependencies"]}
    extras = {_name(r) for reqs in project["optional-dependencies"].values() for r in reqs}
    return required, extras - required


def _distributions(
    module: str, installed: Mapping[str, list[str]], extras: set[str]
) -> set[str]:
    """The distributions that may bring `module`: what is installed here says
    so; and an extra's module is also matched to the family of the extra's
    distributions named after it (``opentelemetry`` for ``opentelemetry-sdk``),
    since on a checkout set up with the dev extra only, as the README's test
    command leaves it, the module is missing or comes with another package
    (``opentelemetry-api``, which the mcp SDK brings)."""
    own = _name(module)
    found = {_name(d) for d in installed.get(module, [module])}
    return found | {extra for extra in extras if extra.startswith(own + "-")}


def _imports(tree: ast.AST) -> list[tuple[str, int, bool]]:
    """Every absolute import: its top-level name, line, and whether it is lazy."""
    found: list[tuple[str, int, bool]] = []

    def walk(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError")
                for h in child.handlers
            ):
                for stmt in child.body:
                    walk_one(stmt, True)
                for rest in (*child.handlers, *child.orelse, *child.finalbody):
                    walk_one(rest, lazy)
                continue
            walk_one(child, inner)

    def walk_one(node: ast.AST, lazy: bool) -> None:
        if isinstance(node, ast.Import):
            found.extend((a.name.split(".")[0], node.lineno, lazy) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module.split(".")[0], node.lineno, lazy))
        walk(node, lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef))

    walk(tree, False)
    return found


def test_every_package_imported_is_declared_and_an_extras_only_lazily() -> None:
    required, extras = _declared()
    distributions = importlib.metadata.packages_distributions()
    problems = []
    checked = 0
    for package in ("governor", "policies", "sandbox"):
        for path in sorted((ROOT / package).rglob("*.py")):
            for name, line, lazy in _imports(ast.parse(path.read_text(), str(path))):
                if name in sys.stdlib_module_names or name in OURS:
                    continue
                checked += 1
                names = _distributions(name, distributions, extras)
                where = f"{path.relative_to(ROOT)}:{line} imports {name}"
                if names & required:
                    continue
                if names & extras:
                    if not lazy:
                        problems.append(f"{where} (an extra's) at import time")
                    continue
                problems.append(f"{where}, which pyproject.toml does not declare")
    assert checked > 20  # the walk found the imports at all
    assert not problems, "\n".join(problems)


def test_the_check_finds_an_undeclared_import_and_an_eager_extra() -> None:
    tree = ast.parse(
        "import oslash\n"
        "try:\n    import ray\nexcept ImportError:\n    ray = None\n"
        "def f():\n    import ray\n"
        "import ray\n"
    )
    assert _imports(tree) == [("oslash", 1, False), ("ray", 3, True), ("ray", 7, True),
                              ("ray", 8, False)]  # fmt: skip


def test_a_module_of_an_extra_not_installed_is_matched_to_that_extra() -> None:
    extras = {"opentelemetry-sdk", "ray", "cryptography"}
    assert _distributions("opentelemetry", {}, extras) == {"opentelemetry", "opentelemetry-sdk"}
    assert _distributions("ray", {}, extras) == {"ray"}
    # a name that merely starts like one is not of that family
    assert _distributions("opentele", {}, extras) == {"opentele"}
    assert _distributions("yaml", {"yaml": ["PyYAML"]}, extras) == {"pyyaml"}
