"""The harness set of a job with checks (`governor.policies.harness`): the closure of
what its checks run (`closure`), the paths pinned read-only in every sandbox,
and the findings for what changed in it.

Why both a pin and a finding: a pin holds a file that exists when the attempt
starts (a ``pytest.ini`` cannot be edited, a ``tests/__init__.py`` cannot be
replaced), but a file created later (a ``pytest.py`` at the root, a new
``tests/__init__.py``) cannot be pinned before it exists; the workspace diff
finds it, and every created, changed or deleted path of the set is a finding
(``harness-changed``), in either mode.

The walk for pins is bounded like the frozen one (`governor.confine.frozen`): past
`MAX_PINS` paths the attempt does not start, rather than start with a harness
that holds only in part; the message says how to narrow it.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from governor.confine import frozen
from governor.confine.frozen import FrozenTooLarge
from governor.policies.harness import (
    MAKES,
    MODULE_PATHS,
    MODULE_SUFFIXES,
    PACKAGE_RUNNERS,
    SKIPPED_FOLDERS,
    make_recipes,
    member,
    package_scripts,
    path_assignments,
    path_entries,
    reach,
)
from governor.policies.paths import normalize, within
from governor.policies.policy import Policy
from governor.tamper.facts import Finding

MAX_ENTRIES: Final = 200_000
"""Paths the walk for the harness set's pins looks at, over all roots."""
MAX_PINS: Final = 1_000
"""Harness paths pinned (each is a bind in every sandbox)."""


MAX_FOLLOWED: Final = 64
"""Shell lines, makefiles and scripts the closure reads (a bound: a recipe
that names itself, a script that runs a thousand others)."""
MAX_SCRIPT_BYTES: Final = 256 * 1024
"""The largest script the closure reads for the programs it runs."""


def with_named(policy: Policy, environ: Mapping[str, str] | None = None) -> Policy:
    """The bound ``policy`` with the harness set's closure: what its checks can
    execute that is not the code under test, followed transitively
    (`closure`), in ``harness_named``, and the folders of the roots on the
    checks' module path in ``harness_paths``. ``environ`` holds the job's
    variables the checks get (``PYTHONPATH`` and ``NODE_PATH`` when the
    policy's ``env`` names them; default ``os.environ``)."""
    if not policy.checks:
        return policy
    env = os.environ if environ is None else environ
    named, paths = closure(policy, {n: env[n] for n in policy.env if n in env})
    return replace(policy, harness_named=named, harness_paths=paths)


def closure(policy: Policy, declared: Mapping[str, str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(named, paths)``: the paths in the roots the checks can run, and the
    folders in the roots on their module path. From each check's shell line:

    - each program or script it names with a path (``./ci/test.sh``,
      ``.venv/bin/python``: a virtualenv whole), and a bare word naming a
      workspace file (``sh test.sh``), past a shell's options (``sh -e
      x.sh``), a file ``.``/``source`` reads, a ``-c`` string, a module ``node
      -r`` preloads, a path after ``cd DIR`` from ``DIR`` (`reach`); a shell
      script among them (one a shell is given or sources, whatever its name)
      is read in turn for the programs its lines run;
    - ``make``: the makefile it reads and those it includes, and every recipe
      line's programs, in turn;
    - ``npm``/``npx``/``yarn``/``pnpm``: ``node_modules/.bin`` (whole, existing
      or not: they put it first on their scripts' ``PATH``), ``package.json``,
      and every script's programs, in turn;
    - a ``PATH`` a line assigns: each of its folders in a root, whole; a
      ``PYTHONPATH`` or ``NODE_PATH`` a line assigns or the job passes: each of
      its folders in a root, for the modules that shadow the runner there;
    - the ``__init__.py`` of every folder below a root holding an acceptance
      test (frozen, held out, or named by ``[checks] acceptance``), whatever
      the folder's name: it runs before the tests it holds.
    """
    ws = policy.workspace
    roots = policy.roots
    found: list[str] = []
    paths: list[str] = []
    queue: list[str] = list(policy.checks)
    read: set[str] = set()
    for name in MODULE_PATHS:
        if declared.get(name):
            paths.extend(path_entries(declared[name], ws))
    budget = MAX_FOLLOWED
    while queue and budget > 0:
        command = queue.pop(0)
        budget -= 1
        for variable, value in path_assignments(command):
            entries = path_entries(value, ws)
            (found if variable == "PATH" else paths).extend(
                e for e in entries if within(e, roots) is not None
            )
        reached = reach(command)
        queue.extend(reached.lines)  # a shell's -c string is a line of its own
        for word in reached.programs:
            base = posixpath.basename(word)
            if base in MAKES:
                queue.extend(_makefiles(ws, roots, found, read))
            elif base in PACKAGE_RUNNERS:
                found.append(posixpath.join(ws, "node_modules", ".bin"))
                queue.extend(_package_scripts(ws, found, read))
            path = normalize(word if word.startswith("/") else posixpath.join(ws, word))
            root = within(path, roots)
            if root is None or path == root or not os.path.lexists(path):
                continue
            if "/" not in word and not os.path.isfile(path):
                continue  # a bare program name is found on PATH, which leaves the roots out
            found.append(_venv_of(path, root) or path)
            if path not in read:
                read.add(path)
                queue.extend(_script_lines(path, shell=word in reached.shell_scripts))
    found.extend(_acceptance_inits(policy))
    inside = [p for p in dict.fromkeys(paths) if within(p, roots) not in (None, p)]
    return tuple(dict.fromkeys(found)), tuple(inside)


def _makefiles(ws: str, roots: tuple[str, ...], found: list[str], read: set[str]) -> list[str]:
    """The recipe lines of the makefile ``make`` reads in ``ws`` (the first of
    its three names) and of the files it includes; each file into ``found``."""
    lines: list[str] = []
    names = ("GNUmakefile", "makefile", "Makefile")  # make reads the first it finds
    todo = [next((n for n in names if os.path.isfile(posixpath.join(ws, n))), "")]
    while todo:
        name = todo.pop(0)
        if not name:
            continue
        path = normalize(posixpath.join(ws, name))
        if within(path, roots) is None or path in read or not os.path.isfile(path):
            continue
        read.add(path)
        found.append(path)
        recipes, includes = make_recipes(_text(path))
        lines.extend(recipes)
        todo.extend(includes)
    return lines


def _package_scripts(ws: str, found: list[str], read: set[str]) -> list[str]:
    """The scripts of ``ws``'s ``package.json`` (into ``found`` once)."""
    path = posixpath.join(ws, "package.json")
    if path in read or not os.path.isfile(path):
        return []
    read.add(path)
    found.append(path)
    return package_scripts(_text(path))


def _script_lines(path: str, *, shell: bool = False) -> list[str]:
    """The lines of a shell script (one a shell is given or sources,
    ``shell``, whatever its name; a ``#!`` naming a shell; a ``.sh`` name): the
    programs they run are run by the check too. Other programs (a Python
    script, a binary) are pinned whole, not read."""
    if not os.path.isfile(path) or os.path.getsize(path) > MAX_SCRIPT_BYTES:
        return []
    text = _text(path)
    first = text.split("\n", 1)[0]
    if not shell:
        shell = first.startswith("#!") and any(s in first for s in ("sh", "bash", "dash", "zsh"))
        if not (shell or path.endswith(".sh")) or "python" in first or "node" in first:
            return []
    lines = (line.strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _text(path: str) -> str:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_SCRIPT_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def _acceptance_inits(policy: Policy) -> list[str]:
    """The ``__init__.py`` (existing or not) of each folder below a root that
    holds an acceptance test or one of its parents."""
    files: list[str] = []
    try:
        files += [a for _, a in frozen.files(policy)]
        if policy.held_out_globs:
            files += [a for a, _ in frozen.named(policy.held_out, policy.roots)]
    except FrozenTooLarge:
        pass  # the pins' walk says so and refuses to start
    files += [
        normalize(posixpath.join(policy.workspace, test.split("::", 1)[0]))
        for test in policy.acceptance or ()
    ]
    out = []
    for path in files:
        root = within(path, policy.roots)
        if root is None:
            continue
        folder = posixpath.dirname(path) if not os.path.isdir(path) else path
        while folder != root and folder.startswith(root + "/"):
            out.append(posixpath.join(folder, "__init__.py"))
            folder = posixpath.dirname(folder)
    return list(dict.fromkeys(out))


def _venv_of(path: str, root: str) -> str | None:
    """The virtualenv (a folder holding ``pyvenv.cfg``) between ``root`` and ``path``."""
    current = posixpath.dirname(path)
    while current != root and current.startswith(root + "/"):
        if os.path.isfile(posixpath.join(current, "pyvenv.cfg")):
            return current
        current = posixpath.dirname(current)
    return None


def venvs(paths: Iterable[str], roots: tuple[str, ...]) -> frozenset[str]:
    """The root-relative folders among ``paths``' parents that hold a ``pyvenv.cfg``."""
    out = set()
    for path in paths:
        if posixpath.basename(path) == "pyvenv.cfg":
            root = within(path, roots)
            if root is not None and path != root:
                out.add(posixpath.relpath(posixpath.dirname(path), root))
    return frozenset(out)


def pins(policy: Policy) -> tuple[Path, ...]:
    """The existing paths of the harness set to pin read-only (outermost only:
    a named virtualenv or a ``*.dist-info`` folder as one); none without checks
    or with ``[checks] harness = "audited"``."""
    if not policy.checks or policy.harness != "frozen":
        return ()
    out = [Path(p) for p in _members(policy)]
    if len(out) > MAX_PINS:
        raise FrozenTooLarge(
            f"the checks' harness set names {len(out)} paths; at most {MAX_PINS} can be "
            'pinned (narrow it with [checks] harness_except, or set harness = "audited")'
        )
    return tuple(out)


def _members(policy: Policy) -> Iterator[str]:
    """Each existing path of the harness set, not descending into what it names whole."""
    seen = 0
    named = set(policy.harness_named)
    for path in policy.harness_named:  # the walk does not look into node_modules
        if os.path.lexists(path) and any(p in SKIPPED_FOLDERS for p in path.split("/")):
            yield path
    for root in policy.roots:
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            seen += len(dirnames) + len(filenames)
            if seen > MAX_ENTRIES:
                raise FrozenTooLarge(
                    f"the roots hold more than {MAX_ENTRIES} paths to look for the checks' "
                    "harness set in"
                )
            keep = []
            for name in sorted(dirnames):
                path = posixpath.join(dirpath, name)
                whole = path in named or name.endswith(".dist-info")
                if whole and member(policy, path + "/x") is not None:
                    yield path
                    continue
                if name in SKIPPED_FOLDERS or os.path.islink(path):
                    continue
                if path not in named and os.path.isfile(posixpath.join(path, "pyvenv.cfg")):
                    continue
                keep.append(name)
            dirnames[:] = keep
            for name in sorted(filenames):
                path = posixpath.join(dirpath, name)
                if member(policy, path) is not None:
                    yield path


def findings(
    policy: Policy, changed: Iterable[tuple[str, str]], files: Iterable[str]
) -> list[Finding]:
    """A ``harness-changed`` finding for each ``(path, how)`` of the workspace
    diff (``created``, ``changed``, ``deleted``) in the harness set; ``files``
    (every file before and after) tell which folders are virtualenvs."""
    if not policy.checks:
        return []
    envs = venvs(files, policy.roots)
    out = []
    for path, how in changed:
        why = member(policy, path, envs)
        if why is not None:
            out.append(Finding(path, None, "harness-changed", f"{how}: {why}"))
    return out


def read_findings(
    policy: Policy,
    changed: Iterable[tuple[str, str]],
    read: Iterable[str],
    found: Iterable[Finding] = (),
) -> list[Finding]:
    """A ``harness-changed`` finding for each ``(path, how)`` of the workspace
    diff that a check was seen to read (``read``: `governor.checks.observed`),
    outside ``.git``, that is no source module by its name (the code under
    test, `MODULE_SUFFIXES`) nor excepted by ``[checks] harness_except``, and
    not already among ``found``. Why: what a check reads decides what it
    reports; the parsed closure (`closure`) follows only the idioms it knows,
    while this set is what the check's processes opened, by any idiom."""
    if not policy.checks:
        return []
    seen = set(read)
    already = {f.path for f in found if f.rule == "harness-changed"}
    out = []
    for path, how in changed:
        if path not in seen or path in already or path.endswith(MODULE_SUFFIXES):
            continue
        root = within(path, policy.roots)
        if root is None or ".git" in posixpath.relpath(path, root).split("/"):
            continue
        if policy.harness_except and policy.harness_excepted.matches(path, policy.roots):
            continue
        why = "read by a check (observed), and not a source module of the code under test"
        out.append(Finding(path, None, "harness-changed", f"{how}: {why}"))
    return out


def described(policy: Policy) -> dict[str, Any] | None:
    """What the outcome says of the harness set: its mode, how the job widened
    or narrowed it, what the checks run from the roots (``named``), the package
    ``__init__.py`` above their acceptance tests (``packages``) and the folders
    on their module path (``module_path``); None without checks."""
    if not policy.checks:
        return None
    out: dict[str, Any] = {"mode": policy.harness}
    if policy.harness_add:
        out["added"] = list(policy.harness_add)
    if policy.harness_except:
        out["excepted"] = list(policy.harness_except)
    programs = [p for p in policy.harness_named if posixpath.basename(p) != "__init__.py"]
    packages = [p for p in policy.harness_named if posixpath.basename(p) == "__init__.py"]
    if programs:
        out["named"] = programs
    if packages:
        out["packages"] = packages
    if policy.harness_paths:
        out["module_path"] = list(policy.harness_paths)
    return out
