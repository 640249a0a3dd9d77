"""The before-side of the tamper audit, kept at the attempt's start, and the
audit of the workspace at its end.

Where the before-text comes from: the workspace itself, read before the agent
starts, not git's ``HEAD``. A loop writes its acceptance tests just before the
attempt and need not commit them; at edit-workspace the agent may commit, so
``HEAD`` at the end is the agent's to make; and a workspace need not be a
repository. What is kept is bounded:

- test files and runner configuration (`governor.tamper.looks_like_test`):
  their text, each up to `MAX_FILE_BYTES`, all together up to `MAX_KEPT_BYTES`;
  at the end each is read again and compared by content, whatever its size and
  mtime say;
- other source files in an audited language: only their suppressions (a list
  per file, none parsed for a file that holds none of the words one needs);
  at the end only those the workspace diff names as changed are read again.

A file past a bound is counted in ``skipped``, never silently dropped: the
outcome says the audit did not cover it. Files are opened without following
links and read only when regular (the workspace is hostile: a link or a FIFO
planted as a test must not make the governor read elsewhere or block).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from governor.tamper import (
    SUPPRESSION_WORDS,
    added_suppressions,
    audit_file,
    language,
    looks_like_test,
    suppressions,
)
from governor.tamper.facts import Finding, Mark

MAX_FILE_BYTES: Final = 2**20
MAX_KEPT_BYTES: Final = 32 * 2**20
MAX_FINDINGS: Final = 1_000
"""Findings past this many are counted, not listed (an agent that deletes
100,000 tests must not make the outcome that large)."""


@dataclass(slots=True)
class Baseline:
    """The audited files as they were at the start: absolute path -> text for
    tests and configuration, -> suppressions for other source files."""

    roots: tuple[str, ...]
    texts: dict[str, str] = field(default_factory=dict)
    marks: dict[str, list[Mark]] = field(default_factory=dict)
    kept_bytes: int = 0
    skipped: int = 0


@dataclass(slots=True)
class Audit:
    """The findings (at most `MAX_FINDINGS`), how many more there were, and how
    many files the audit could not cover."""

    findings: list[Finding] = field(default_factory=list)
    more: int = 0
    skipped: int = 0


def keep(paths: Iterable[str], roots: Sequence[str]) -> Baseline:
    """Read the audited files among ``paths`` (absolute, under ``roots``)."""
    base = Baseline(tuple(roots))
    for path in sorted(paths):
        rel = _relative(path, base.roots)
        test = looks_like_test(rel)
        if not test and language(rel) is None:
            continue
        data = read(path)
        if data is None:
            base.skipped += 1
            continue
        if test:
            if base.kept_bytes + len(data) > MAX_KEPT_BYTES:
                base.skipped += 1
                continue
            base.kept_bytes += len(data)
            base.texts[path] = data.decode("utf-8", "replace")
        elif any(word in data for word in SUPPRESSION_WORDS):
            base.marks[path] = suppressions(rel, data.decode("utf-8", "replace"))
        else:
            base.marks[path] = []
    return base


def audit(base: Baseline, now: Iterable[str], changed: Iterable[str]) -> Audit:
    """The findings between ``base`` and the workspace: ``now`` is every file
    there at the end, ``changed`` those the workspace diff names."""
    out = Audit(skipped=base.skipped)
    found: list[Finding] = []
    present = set(now)
    for path, before in base.texts.items():
        data = read(path) if path in present else None
        if path in present and data is None:
            out.skipped += 1
            continue
        after = None if data is None else data.decode("utf-8", "replace")
        found += _placed(path, audit_file(_relative(path, base.roots), before, after))
    for path in sorted(set(changed) & present):
        if path in base.texts:
            continue
        rel = _relative(path, base.roots)
        if path in base.marks:
            data = read(path)
            text = None if data is None else data.decode("utf-8", "replace")
            found += _placed(path, added_suppressions(rel, base.marks[path], text))
        elif looks_like_test(rel) or language(rel) is not None:  # created
            data = read(path)
            if data is None:
                out.skipped += 1
                continue
            found += _placed(path, audit_file(rel, None, data.decode("utf-8", "replace")))
    out.findings = found[:MAX_FINDINGS]
    out.more = max(0, len(found) - MAX_FINDINGS)
    return out


def read(path: str, limit: int = MAX_FILE_BYTES) -> bytes | None:
    """A regular file's bytes, not through a link; None when it is not one, is
    larger than ``limit`` or cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_size > limit:
            return None
        chunks = []
        size = 0
        while chunk := os.read(fd, 65536):
            size += len(chunk)
            if size > limit:
                return None
            chunks.append(chunk)
        return b"".join(chunks)
    except OSError:
        return None
    finally:
        os.close(fd)


def _relative(path: str, roots: Sequence[str]) -> str:
    """The path inside its root (what names a test file), or as given."""
    for root in roots:
        if path.startswith(root.rstrip("/") + "/"):
            return path[len(root.rstrip("/")) + 1 :]
    return path.lstrip("/")


def _placed(path: str, found: list[Finding]) -> list[Finding]:
    """Findings named by the absolute path (the audit log's and the outcome's)."""
    return [replace(f, path=path) for f in found]
