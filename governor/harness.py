"""The harness set of a job with checks (`policies.harness`): the programs its
checks name, the paths pinned read-only in every sandbox, and the findings
for what changed in it.

Why both a pin and a finding: a pin holds a file that exists when the attempt
starts (a ``pytest.ini`` cannot be edited, a ``tests/__init__.py`` cannot be
replaced), but a file created later (a ``pytest.py`` at the root, a new
``tests/__init__.py``) cannot be pinned before it exists; the workspace diff
finds it, and every created, changed or deleted path of the set is a finding
(``harness-changed``), in either mode.

The walk for pins is bounded like the frozen one (`governor.frozen`): past
`MAX_PINS` paths the attempt does not start, rather than start with a harness
that holds only in part; the message says how to narrow it.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from governor.frozen import FrozenTooLarge
from governor.tamper.facts import Finding
from policies.harness import SKIPPED_FOLDERS, member, named_programs
from policies.paths import normalize, within
from policies.policy import Policy

MAX_ENTRIES: Final = 200_000
"""Paths the walk for the harness set's pins looks at, over all roots."""
MAX_PINS: Final = 1_000
"""Harness paths pinned (each is a bind in every sandbox)."""


def with_named(policy: Policy) -> Policy:
    """The bound ``policy`` with ``harness_named``: the paths in its roots its
    checks run as programs (a word with a ``/``: ``./ci/test.sh``,
    ``.venv/bin/python``), each a virtualenv whole when it lies in one. A bare
    name (``pytest``, ``python3``) is found on the checks' ``PATH``, which
    never leads into a root (`governor.checks.check_path`)."""
    if not policy.checks:
        return policy
    ws = policy.workspace
    found: list[str] = []
    for command in policy.checks:
        for word in named_programs(command):
            if "/" not in word:
                continue
            path = normalize(word if word.startswith("/") else posixpath.join(ws, word))
            root = within(path, policy.roots)
            if root is None or not os.path.lexists(path):
                continue
            found.append(_venv_of(path, root) or path)
    return replace(policy, harness_named=tuple(dict.fromkeys(found)))


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


def findings(policy: Policy, changed: Iterable[tuple[str, str]], files: Iterable[str]) -> list[Finding]:
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


def described(policy: Policy) -> dict[str, Any] | None:
    """What the outcome says of the harness set: its mode, how the job widened
    or narrowed it, the programs the checks run from the roots; None without checks."""
    if not policy.checks:
        return None
    out: dict[str, Any] = {"mode": policy.harness}
    if policy.harness_add:
        out["added"] = list(policy.harness_add)
    if policy.harness_except:
        out["excepted"] = list(policy.harness_except)
    if policy.harness_named:
        out["named"] = list(policy.harness_named)
    return out
