"""Frozen paths (``[sandbox] frozen``): what the sandboxes pin, and the digest
that proves the frozen files did not change.

A loop writes its acceptance tests before the attempt and runs them after it;
it can trust the result only if the tests it ran are the tests it wrote. So
the paths the frozen globs name are pinned read-only in every sandbox (the
agent's and the commands': `pins`, given to `governor.sandbox.Profile.read_only`),
every governed write to them is refused (`governor.policies.decide`), and their
content digest (`digest`) is in the attempt-start and attempt-end records.

A folder the globs name whole (``tests/acceptance/**`` names
``tests/acceptance``) is pinned as one, so nothing can be added inside it
either; a file a narrower glob names is pinned alone. Only paths that exist
at the start can be pinned: a file created later under a narrower glob is
refused to governed writes and shows in the digest and the tamper audit.
The walk is bounded (`MAX_ENTRIES`, `MAX_PINS`): past a bound the attempt
does not start, rather than start with a freeze that holds only in part.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from governor.boundary.folders import Opening, walk
from governor.policies.paths import PathGlobs
from governor.policies.policy import Policy
from governor.sandbox import ProfileError

MAX_ENTRIES: Final = 200_000
"""Paths the walk for frozen ones looks at, over all roots."""
MAX_PINS: Final = 1_000
"""Frozen paths pinned (each is a bind in every sandbox)."""
MAX_DIGEST_BYTES: Final = 256 * 2**20
"""Bytes of frozen files the digest reads."""


class FrozenTooLarge(ProfileError):
    """The frozen globs name more than the bounds allow; the message says which
    (a `ProfileError`: a sandbox that cannot hold the freeze is not built)."""


@dataclass(frozen=True, slots=True)
class Digest:
    """The sha256 over the frozen files' sorted relative paths and contents, and
    how many files it covers."""

    sha256: str
    files: int

    def to_json(self) -> dict[str, object]:
        return {"sha256": self.sha256, "files": self.files}


def pins(policy: Policy) -> tuple[Path, ...]:
    """The existing paths the policy's frozen globs name, outermost only."""
    if not policy.frozen:
        return ()
    with Opening() as opening:
        out = [Path(p) for p, _ in _named(policy.frozen, policy.roots, opening)]
    if len(out) > MAX_PINS:
        raise FrozenTooLarge(
            f"the frozen globs name {len(out)} paths; at most {MAX_PINS} can be pinned "
            "(freeze their folder instead: `dir/**`)"
        )
    return tuple(out)


def digest(policy: Policy) -> Digest | None:
    """The digest of every regular file under the frozen paths (None: nothing is
    frozen). A link is hashed as its target's text, never followed."""
    if not policy.frozen:
        return None
    return digest_of(policy.frozen, policy.roots)


def digest_of(globs: PathGlobs, roots: tuple[str, ...], what: str = "frozen") -> Digest:
    """The digest of every regular file under the paths ``globs`` name in
    ``roots`` (the frozen files', the held-out files'); ``what`` names them in
    the error past `MAX_DIGEST_BYTES`."""
    with Opening() as opening:  # open while the files are read, too
        return _digest(sorted(_files(globs, roots, opening)), what)


def _digest(entries: list[tuple[str, str]], what: str) -> Digest:
    h = hashlib.sha256()
    files = 0
    read = 0
    for rel, path in entries:
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if os.path.islink(path):
            data = b"link:" + os.readlink(path).encode("utf-8", "surrogateescape")
        elif os.path.isfile(path):
            read += st.st_size
            if read > MAX_DIGEST_BYTES:
                raise FrozenTooLarge(
                    f"the {what} files hold more than {MAX_DIGEST_BYTES // 2**20} MiB"
                )
            with open(path, "rb") as f:
                data = f.read()
        else:
            continue
        name = rel.encode("utf-8", "surrogateescape")
        h.update(len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big") + data)
        files += 1
    return Digest(h.hexdigest(), files)


def _named(
    globs: PathGlobs, roots: tuple[str, ...], opening: Opening
) -> Iterator[tuple[str, str]]:
    """(absolute path, its path relative to its root) of each path a glob of
    ``globs`` names, not descending into what it names; ``.git`` is not walked.
    A folder the governor may not read is opened, as by every walk of the
    roots (`governor.boundary.folders`)."""
    seen = 0
    for root in roots:
        for dirpath, dirnames, filenames in walk(root, opening):
            seen += len(dirnames) + len(filenames)
            if seen > MAX_ENTRIES:
                raise FrozenTooLarge(
                    f"the roots hold more than {MAX_ENTRIES} paths to look for frozen ones in"
                )
            keep = []
            for name in sorted(dirnames):
                path = os.path.join(dirpath, name)
                if name == ".git":
                    continue
                if globs.matches(path, (root,)):
                    yield path, os.path.relpath(path, root)
                else:
                    keep.append(name)
            dirnames[:] = keep
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                if globs.matches(path, (root,)):
                    yield path, os.path.relpath(path, root)


def named(globs: PathGlobs, roots: tuple[str, ...]) -> list[tuple[str, str]]:
    """(absolute path, relative path) of each existing path ``globs`` name in
    ``roots``, outermost only (`FrozenTooLarge` past `MAX_ENTRIES`)."""
    with Opening() as opening:
        return list(_named(globs, roots, opening))


def _files(
    globs: PathGlobs, roots: tuple[str, ...], opening: Opening
) -> Iterator[tuple[str, str]]:
    """(relative path, absolute path) of each file under the paths ``globs`` name."""
    for path, rel in _named(globs, roots, opening):
        if os.path.isdir(path) and not os.path.islink(path):
            for dirpath, _, filenames in walk(path, opening):
                for name in filenames:
                    full = os.path.join(dirpath, name)
                    yield os.path.join(rel, os.path.relpath(full, path)), full
        else:
            yield rel, path


def files_under(globs: PathGlobs, roots: tuple[str, ...]) -> list[tuple[str, str]]:
    """(relative path, absolute path) of each file under the paths ``globs`` name now."""
    with Opening() as opening:
        return list(_files(globs, roots, opening))


def files(policy: Policy) -> list[tuple[str, str]]:
    """(relative path, absolute path) of each file under the frozen paths now."""
    if not policy.frozen:
        return []
    with Opening() as opening:
        return list(_files(policy.frozen, policy.roots, opening))


def recorded(policy: Policy) -> dict[str, Any] | None:
    """The digest as the attempt-start and attempt-end records hold it (None:
    nothing is frozen); `FrozenTooLarge` past the bounds."""
    found = digest(policy)
    return None if found is None else found.to_json()


def at_end(
    policy: Policy, at_start: dict[str, Any] | None
) -> tuple[dict[str, Any] | None, list[str]]:
    """The digest at the attempt's end, and the notices it gives: the freeze did
    not hold (the digest differs from the start's), or it could not be taken."""
    try:
        now = recorded(policy)
    except FrozenTooLarge as e:
        return None, [f"the frozen files' digest at the end could not be taken: {e}"]
    if now != at_start:
        return now, [
            "the frozen files changed during the attempt (their digest at the end "
            "differs from the start's)"
        ]
    return now, []


def unmatched(policy: Policy) -> list[str]:
    """A problem for each frozen or held-out glob of the bound ``policy`` that
    names no existing path in its roots: a freeze of nothing, or tests held out
    that are not there, would otherwise hold silently (``tests/acceptance/**``
    against ``tests/Acceptance/``: globs are case-sensitive, and a path that
    matches but for case is named). `FrozenTooLarge` past `MAX_ENTRIES`."""
    wanted = [
        (key, glob, PathGlobs((glob,)), PathGlobs((glob.lower(),)))
        for key, globs in (("frozen", policy.frozen_globs), ("held_out", policy.held_out_globs))
        for glob in globs
    ]
    if not wanted:
        return []
    with Opening() as opening:
        return _unmatched(policy, wanted, opening)


def _unmatched(
    policy: Policy, wanted: list[tuple[str, str, PathGlobs, PathGlobs]], opening: Opening
) -> list[str]:
    found: set[tuple[str, str]] = set()
    near: dict[tuple[str, str], str] = {}
    seen = 0
    for root in policy.roots:
        lowered = (root.lower(),)
        for dirpath, dirnames, filenames in walk(root, opening):
            seen += len(dirnames) + len(filenames)
            if seen > MAX_ENTRIES:
                raise FrozenTooLarge(
                    f"the roots hold more than {MAX_ENTRIES} paths to look for frozen ones in"
                )
            dirnames[:] = sorted(d for d in dirnames if d != ".git")
            for name in (*dirnames, *sorted(filenames)):
                path = os.path.join(dirpath, name)
                for key, glob, exact, folded in wanted:
                    if (key, glob) in found:
                        continue
                    if exact.matches(path, (root,)):
                        found.add((key, glob))
                    elif (key, glob) not in near and folded.matches(path.lower(), lowered):
                        near[(key, glob)] = os.path.relpath(path, root)
            if len(found) == len(wanted):
                return []  # every glob matched: the rest of the walk cannot change that
    problems = []
    for key, glob, _, _ in wanted:
        if (key, glob) in found:
            continue
        hint = near.get((key, glob))
        problems.append(
            f"[sandbox] {key} {glob!r} matches nothing in {', '.join(policy.roots)}: "
            + (
                f"globs are case-sensitive and {hint!r} differs only in case"
                if hint is not None
                else "a freeze or a hold-out of nothing would pass unnoticed; fix the glob "
                "or write the tests before the attempt"
            )
        )
    return problems
