"""The harness set: the files in a root that decide what a job's checks run,
named by their path alone (pure).

A check is the loop's command, but a test runner reads the workspace to know
what to do: its configuration (``pytest.ini``, ``pyproject.toml``,
``package.json`` scripts, a ``Makefile``), the ``conftest.py`` and test
folders' ``__init__.py`` it imports before any test, a root module named like
the runner or the standard library (``pytest.py``, ``unittest/__init__.py``,
``json.py``), bytecode or a native module Python loads instead of a source
file, an installed distribution's entry points (``*.dist-info``, where
pytest's plugins are found) and ``.pth`` files. An agent that changes any of
them changes the check, not the code. When a job has checks, these are its
**harness set** (`reason`): pinned read-only like its frozen paths
(``[checks] harness = "frozen"``, the default) and any change to them a
finding (always: a file created later cannot be pinned).

Not looked into: ``.git``, ``node_modules``, ``__pycache__`` (the checks never
trust the attempt's bytecode caches: `governor.checks.check_runs`) and a virtualenv
(a folder holding ``pyvenv.cfg``), unless a check runs a program from it: then
the virtualenv is in the set whole (`named_programs`).

What a check runs beyond these names is a closure, not a list: the programs
and scripts its shell line names, the makefile recipes and ``package.json``
scripts it reaches, the folders its ``PATH``/``PYTHONPATH``/``NODE_PATH``
put in a root, the ``__init__.py`` above its acceptance tests. The caller who
owns the file system follows it (`governor.confine.harness.closure`, with the parsers
here: `named_programs`, `make_recipes`, `package_scripts`,
`path_assignments`) and binds it into the policy (``harness_named``,
``harness_paths``), which `member` reads.

A job widens the set with ``[checks] harness_add`` (globs) and narrows it with
``harness_except`` (globs a path of the default set may match to leave it);
the outcome says so.
"""

from __future__ import annotations

import posixpath
import shlex
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from governor.policies.paths import is_under, within

if TYPE_CHECKING:
    from governor.policies.policy import Policy

RUNNER_CONFIG: Final = frozenset(
    {
        # pytest, in the order it looks for them, and the files it takes options from
        "pytest.toml",
        ".pytest.toml",
        "pytest.ini",
        ".pytest.ini",
        "pyproject.toml",
        "tox.ini",
        "setup.cfg",
        "conftest.py",
        # npm runs package.json's scripts, with .npmrc's script-shell and node-options
        "package.json",
        ".npmrc",
        # make reads the first of these it finds
        "GNUmakefile",
        "makefile",
        "Makefile",
        # imported by every interpreter that finds them on its path
        "sitecustomize.py",
        "usercustomize.py",
    }
)
"""Names a supported runner (pytest, unittest, ``node --test``, npm, make)
reads as its configuration, wherever they are (pytest takes the nearest
ancestor's of its arguments)."""

TEST_FOLDERS: Final = frozenset({"tests", "test", "testing", "__tests__", "spec"})

RUNNER_MODULES: Final = frozenset(
    {"pytest", "_pytest", "pluggy", "py", "iniconfig", "unittest", "nose", "nose2"}
)
SHADOWED: Final = (frozenset(sys.stdlib_module_names) - {"test"}) | RUNNER_MODULES
"""Module names a root module must not take: the runners' and the standard
library's (whose ``test`` package is no project's shadow of it: ``tests``
folders are looked at for their ``__init__.py`` instead)."""

NODE_RUNNERS: Final = frozenset(
    {"mocha", "jest", "vitest", "ava", "tap", "tape", "uvu", "jasmine", "c8", "nyc", "tsx"}
)
"""Packages a node check runs or loads by name, which a ``NODE_PATH`` folder
could hold in its place (node's own modules cannot be shadowed by it)."""
_NODE_SUFFIXES: Final = (".js", ".cjs", ".mjs", ".json", ".node")

SKIPPED_FOLDERS: Final = frozenset({".git", "node_modules", "__pycache__"})

_NATIVE: Final = (".so", ".pyd")


def reason(rel: str, venvs: frozenset[str] = frozenset()) -> str | None:
    """Why the path ``rel`` (relative to its root, ``/``-separated) is in the
    default harness set, or None. ``venvs`` are the root-relative folders that
    hold a ``pyvenv.cfg``: nothing under them is (a check that runs one names
    it: `named_programs`)."""
    parts = rel.split("/")
    if any(p in SKIPPED_FOLDERS for p in parts):
        return None
    if any(rel == v or rel.startswith(v + "/") for v in venvs):
        return None
    name = parts[-1]
    dist = next((p for p in parts[:-1] if p.endswith(".dist-info")), None)
    if dist is not None:
        return f"an installed distribution's metadata ({dist}: entry points load as plugins)"
    if name in RUNNER_CONFIG:
        return f"runner configuration ({name})"
    if name == "entry_points.txt":
        return "entry points (entry_points.txt: pytest loads its plugins from them)"
    if name.endswith(".pth"):
        return "a .pth file (its lines run at interpreter start in a site folder)"
    if name == "__init__.py" and any(p in TEST_FOLDERS for p in parts[:-1]):
        return "a test folder's __init__.py (it runs before the tests it holds)"
    if name.endswith(".pyc"):
        return "bytecode outside __pycache__ (loaded where its source is missing)"
    if name.endswith(_NATIVE):
        return "a native module (loaded before a source module of its name)"
    why = shadowing(parts, node=False)
    return None if why is None else f"a root {why}"


def shadowing(parts: list[str], *, node: bool = True) -> str | None:
    """What the path ``parts`` (relative to a folder on a module path: a root, a
    ``PYTHONPATH`` or ``NODE_PATH`` entry) shadows, or None: a Python module or
    package named like the test runner or the standard library, a node package
    named like a node test runner (with ``node``: node looks for packages in
    ``NODE_PATH`` folders, never at a root)."""
    module = _root_module(parts)
    if module is not None and module in SHADOWED:
        what = "the test runner" if module in RUNNER_MODULES else "the standard library"
        return f"module shadowing {what} ({module})"
    head = parts[0].split(".", 1)[0] if parts else ""
    if node and head in NODE_RUNNERS and (len(parts) > 1 or parts[0].endswith(_NODE_SUFFIXES)):
        return f"package shadowing a node test runner ({head})"
    return None


def member(policy: Policy, path: str, venvs: frozenset[str] = frozenset()) -> str | None:
    """Why the absolute, normalized ``path`` is in the job's harness set, or
    None: a job without checks has none; ``harness_except`` takes a path out of
    the default set, ``harness_add`` and the closure of what the checks run
    (``harness_named``, ``harness_paths``: `governor.confine.harness.closure`) put it
    in. ``venvs`` as for `reason`."""
    if not policy.checks:
        return None
    roots = policy.roots
    root = within(path, roots)
    for named in policy.harness_named:
        if not is_under(path, named):
            continue
        if posixpath.basename(named) != "__init__.py":
            return f"run by a check ({named})"
        known = reason(posixpath.relpath(path, root)) if root not in (None, path) else None
        return known or (
            "a package __init__.py above an acceptance test (it runs before the tests it holds)"
        )
    for folder in policy.harness_paths:
        if path != folder and is_under(path, folder):
            why = shadowing(posixpath.relpath(path, folder).split("/"))
            if why is not None:
                return f"{why} on the checks' module path ({folder})"
    added = policy.harness_added.first(path, roots) if policy.harness_add else None
    if added is not None:
        return f"harness_add: {added}"
    if root is None or path == root:
        return None
    if policy.harness_except and policy.harness_excepted.matches(path, roots):
        return None
    return reason(posixpath.relpath(path, root), venvs)


def _root_module(parts: list[str]) -> str | None:
    """The module a root-level file defines, or the package a Python file in a
    root-level folder belongs to (its ``__init__``, its ``__main__``)."""
    if len(parts) == 1 and parts[0].endswith(".py"):
        return parts[0][:-3]
    if len(parts) >= 2 and parts[-1].endswith(".py"):
        return parts[0]
    return None


_INTERPRETERS: Final = ("sh", "bash", "dash", "zsh", "ksh", "python", "node", "perl", "ruby")
_SHELLS: Final = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh", "busybox"})
_SOURCE: Final = frozenset({".", "source"})
_SEPARATORS: Final = frozenset({"&&", "||", ";", "|", "&", "(", ")", ";;", "|&"})
_PREFIXES: Final = frozenset({"env", "exec", "command", "time", "nice", "timeout", "builtin"})
_SHELL_ARG_OPTIONS: Final = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
"""A shell's options that take the next word as their argument (an option's name, a file)."""
_NODE_PRELOADS: Final = frozenset(
    {"-r", "--require", "--import", "--loader", "--experimental-loader"}
)
"""``node``'s options whose argument is a module it runs before the script."""


@dataclass(frozen=True, slots=True)
class Reach:
    """What one shell line of a check runs (`reach`): the words naming a
    program or a script, those of them a shell reads as its own lines (a
    script given to a shell, a file ``.``/``source`` reads), and the command
    strings given to a shell's ``-c`` (lines in turn)."""

    programs: tuple[str, ...] = ()
    shell_scripts: frozenset[str] = frozenset()
    lines: tuple[str, ...] = ()


def named_programs(command: str) -> tuple[str, ...]:
    """The words of a check's shell line that name a program or a script it
    runs (`reach`)."""
    return reach(command).programs


def reach(command: str) -> Reach:
    """What a check's shell line runs: each simple command's program; the
    script an interpreter is given (``sh ci/test.sh``, ``python tools/run.py``;
    not after ``-m``, nor python's or node's ``-c``/``-e``); for a shell,
    past its options (``sh -e x.sh``, ``bash -o pipefail x.sh``: ``-e`` is
    errexit there, not node's ``--eval``) and with its ``-c`` string read as a
    line; the file ``.``/``source`` reads; a module ``node -r``/``--import``
    preloads; a relative path after ``cd DIR`` from ``DIR``. Its test files and
    folders are arguments, not programs. A line the shell splitter cannot read
    names nothing (it still runs, and is judged).

    What it cannot follow (a program a variable names, ``eval``, ``$(...)``,
    ``xargs sh``, a file a program opens by itself) is the residual of
    docs/loops.md: name such a file in ``[checks] harness_add``."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return Reach()
    out: list[str] = []
    shells: set[str] = set()
    lines: list[str] = []
    start = True
    kind = ""  # "", "shell", "source", "cd", "node" or "other": whose arguments follow
    takes_arg = False  # the word before was an option that takes this one
    command_string = False  # a shell's -c was seen: its first operand is a line
    cwd = ""

    def at(word: str) -> str:
        return posixpath.normpath(posixpath.join(cwd, word)) if cwd and word[:1] != "/" else word

    for word in words:
        if word in _SEPARATORS:
            start, kind, takes_arg, command_string = True, "", False, False
            continue
        if start:
            if "=" in word and not word.startswith("=") and word.split("=", 1)[0].isidentifier():
                continue  # an assignment before the program
            if word in _PREFIXES:
                continue
            start = False
            base = posixpath.basename(word)
            if word in _SOURCE:
                kind = "source"
                continue
            if word == "cd":
                kind = "cd"
                continue
            out.append(at(word) if "/" in word else word)
            if base in _SHELLS or any(base.startswith(s) for s in ("bash", "dash", "zsh")):
                kind = "shell"
            elif base.startswith("node"):
                kind = "node"
            elif any(base == i or base.startswith(i) for i in _INTERPRETERS):
                kind = "other"
            else:
                kind = ""
            continue
        if not kind:
            continue
        if kind == "cd":
            if not word.startswith("-") and "$" not in word and "`" not in word:
                cwd = posixpath.join(cwd, word) if not word.startswith("/") else word
            kind = ""
            continue
        if kind == "source":
            out.append(at(word))
            shells.add(at(word))
            kind = ""
            continue
        if takes_arg:
            takes_arg = False
            if kind == "node":
                out.append(at(word))
            continue
        if kind == "shell":
            if word == "--":
                continue
            if word in _SHELL_ARG_OPTIONS:
                takes_arg = True
                continue
            if word[:1] in ("-", "+") and len(word) > 1:
                command_string = command_string or ("c" in word[1:] and word[:1] == "-")
                continue
            if command_string:
                lines.append(word)
            else:
                out.append(at(word))
                shells.add(at(word))
            kind = ""
            continue
        if (kind == "node" and word in _NODE_PRELOADS) or (
            kind == "other" and word in ("-W", "-X")
        ):
            takes_arg = True  # a preload is run; python's -W/-X take a setting
            continue
        if kind == "node" and word.startswith(tuple(p + "=" for p in _NODE_PRELOADS)):
            out.append(at(word.split("=", 1)[1]))
            continue
        if word in ("-m", "-c", "-e", "--eval", "-p", "--print", "--test", "--"):
            kind = ""
            continue
        if word.startswith("-"):
            continue
        out.append(at(word))
        kind = ""
    return Reach(tuple(out), frozenset(shells), tuple(lines))


MAKES: Final = frozenset({"make", "gmake"})
PACKAGE_RUNNERS: Final = frozenset({"npm", "npx", "yarn", "pnpm", "corepack"})
"""Programs that run ``package.json`` scripts with the workspace's
``node_modules/.bin`` first on their ``PATH``."""
MODULE_SUFFIXES: Final = (".py", ".pyi", ".js", ".cjs", ".mjs", ".jsx", ".ts", ".cts", ".mts", ".tsx")
"""A source module's names: a file a check read that the attempt changed is
code under test by such a name (whoever read it), harness otherwise
(`governor.confine.harness.read_findings`)."""

MODULE_PATHS: Final = ("PYTHONPATH", "NODE_PATH")


def make_recipes(text: str) -> tuple[list[str], list[str]]:
    """A makefile's recipe lines as shell lines (``@``/``-``/``+`` prefixes off,
    continuations joined, ``$(MAKE)`` read as ``make``) and the files it
    ``include``s: what ``make`` can run.
    Every rule's recipe, not only the targets a check names: a target reaches
    others through its prerequisites, and which it reaches is make's to decide."""
    recipes: list[str] = []
    includes: list[str] = []
    lines = text.replace("\\\n", " ").splitlines()
    for line in lines:
        if line.startswith("\t"):
            recipe = line[1:].lstrip(" \t@-+").replace("$(MAKE)", "make").replace("${MAKE}", "make")
            if recipe and not recipe.startswith("#"):
                recipes.append(recipe)
            continue
        words = line.split()
        if words and words[0] in ("include", "-include", "sinclude"):
            includes.extend(w for w in words[1:] if "$" not in w)
    return recipes, includes


def package_scripts(text: str) -> list[str]:
    """The shell lines of a ``package.json``'s ``scripts`` (every one: a script
    runs others by name, ``pre``/``post`` scripts run around it); none when it
    does not parse."""
    import json

    try:
        scripts = json.loads(text).get("scripts")
    except (ValueError, AttributeError):
        return []
    if not isinstance(scripts, dict):
        return []
    return [v for v in scripts.values() if isinstance(v, str)]


def path_assignments(command: str) -> list[tuple[str, str]]:
    """``(name, value)`` of each ``PATH``, ``PYTHONPATH`` or ``NODE_PATH``
    assignment in a shell line (before a program, after ``env`` or
    ``export``): the folders the line puts on a search path."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        words = list(lexer)
    except ValueError:
        return []
    out = []
    for word in words:
        name, eq, value = word.partition("=")
        if eq and name in ("PATH", *MODULE_PATHS):
            out.append((name, value))
    return out


def path_entries(value: str, cwd: str) -> list[str]:
    """The absolute, normalized folders of a search path's ``value`` (relative
    ones, the empty one too, from ``cwd``); an entry naming a variable
    (``$PATH``) is left out: it is not the workspace's."""
    out = []
    for entry in value.split(":"):
        if "$" in entry or "`" in entry:
            continue
        out.append(posixpath.normpath(posixpath.join(cwd, entry)) if entry else cwd)
    return out
