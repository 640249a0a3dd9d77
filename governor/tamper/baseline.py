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
  at the end only those the workspace diff names as changed are read again;
- those source files' texts, compressed, up to `MAX_SOURCE_BYTES` (Python's:
  which statements at import are new) and `MAX_START_BYTES` (the others'):
  the start side of the diff the report shows of a change the agent made
  itself (`change_texts`), read in the same pass, so it costs a compression.

A file past a bound is counted in ``skipped``, never silently dropped: the
outcome says the audit did not cover it. Files are opened without following
links and read only when regular (the workspace is hostile: a link or a FIFO
planted as a test must not make the governor read elsewhere or block).
"""

from __future__ import annotations

import base64
import json
import os
import stat
import subprocess
import sys
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from governor.audit.effects import DIFF_INPUT_BYTES
from governor.tamper import (
    SUPPRESSION_WORDS,
    added_suppressions,
    audit_file,
    import_code_added,
    language,
    looks_like_test,
    startup,
    suppressions,
)
from governor.tamper.facts import Finding, Mark

MAX_FILE_BYTES: Final = 2**20
MAX_KEPT_BYTES: Final = 32 * 2**20
MAX_SOURCE_BYTES: Final = 32 * 2**20
"""Compressed bytes of Python source texts kept (some 150 MiB of source)."""
MAX_START_BYTES: Final = 16 * 2**20
"""Compressed bytes of the other source files' texts kept for diffs only: past
it a change's record says its start was not kept (no audit rests on them)."""
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
    sources: dict[str, bytes] = field(default_factory=dict)
    """The Python source files' texts, compressed (up to `MAX_SOURCE_BYTES`
    together): which of their statements at import are new at the end."""
    source_bytes: int = 0
    kept_bytes: int = 0
    skipped: int = 0
    encodings: dict[str, str] = field(default_factory=dict)
    """The Python files among them not in UTF-8: path -> the encoding their
    cookie declares."""
    present: frozenset[str] = frozenset()
    """Every file there at the start (a file not in it was created)."""
    starts: dict[str, bytes] = field(default_factory=dict)
    """The other source files' texts, compressed (up to `MAX_START_BYTES`
    together): only the start side of a change's diff (`change_texts`)."""
    start_bytes: int = 0


@dataclass(slots=True)
class Audit:
    """The findings (at most `MAX_FINDINGS`), how many more there were, and how
    many files the audit could not cover."""

    findings: list[Finding] = field(default_factory=list)
    more: int = 0
    skipped: int = 0


def keep(paths: Iterable[str], roots: Sequence[str]) -> Baseline:
    """Read the audited files among ``paths`` (absolute, under ``roots``)."""
    paths = sorted(paths)
    base = Baseline(tuple(roots), present=frozenset(paths))
    for path in paths:
        rel = _relative(path, base.roots)
        test = looks_like_test(rel)
        if not test and language(rel) is None:
            continue
        data = read(path)
        if data is None:
            base.skipped += 1
            continue
        text, encoding = startup.decode(rel, data)
        if encoding not in startup.UTF8:
            base.encodings[path] = encoding
        if test:
            if base.kept_bytes + len(data) > MAX_KEPT_BYTES:
                base.skipped += 1
                continue
            base.kept_bytes += len(data)
            base.texts[path] = text
        elif any(word in data for word in SUPPRESSION_WORDS):
            base.marks[path] = suppressions(rel, text)
        else:
            base.marks[path] = []
        if test:
            continue
        packed = zlib.compress(text.encode("utf-8", "surrogatepass"), 1)
        if language(rel) == "python":
            if base.source_bytes + len(packed) > MAX_SOURCE_BYTES:
                base.skipped += 1  # its new code at import cannot be told: said, not hidden
                continue
            base.source_bytes += len(packed)
            base.sources[path] = packed
        elif base.start_bytes + len(packed) <= MAX_START_BYTES:
            base.start_bytes += len(packed)
            base.starts[path] = packed
    return base


def change_texts(base: Baseline, path: str, how: str) -> tuple[str | None, str] | None:
    """A changed file's text at the start (None: it was created) and now ("":
    it was deleted), for the diff of a change the agent made itself; None when
    either side is unknown: a start not kept (not a source or test file, past a
    bound) or a file now that is no regular one, too large, or not text."""
    if how == "created":
        before = None
    else:
        before = base.texts.get(path)
        # (getattr: a state paused by a governor before `starts` has none)
        packed = base.sources.get(path) or getattr(base, "starts", {}).get(path)
        if before is None and packed is not None:
            before = zlib.decompress(packed).decode("utf-8", "surrogatepass")
        if before is None:
            return None
    if how == "deleted":
        return before, ""
    data = read(path, DIFF_INPUT_BYTES)
    if data is None or b"\0" in data:
        return None
    return before, data.decode("utf-8", "replace")


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
        after = None if data is None else _text(base, path, data, found)
        found += _placed(path, audit_file(_relative(path, base.roots), before, after))
    caches: list[tuple[str, str]] = []
    for path in sorted(set(changed) & present):
        if path in base.texts:
            continue
        rel = _relative(path, base.roots)
        created = path not in base.present
        found += _started(base, path, rel, created, caches)
        if path in base.marks:
            data = read(path)
            text = None if data is None else _text(base, path, data, found)
            found += _placed(path, added_suppressions(rel, base.marks[path], text))
            if text is not None and path in base.sources:  # Python's only
                was = zlib.decompress(base.sources[path]).decode("utf-8", "surrogatepass")
                found += _placed(path, import_code_added(rel, was, text))
        elif looks_like_test(rel) or language(rel) is not None:  # created
            data = read(path)
            if data is None:
                out.skipped += 1
                continue
            found += _placed(path, audit_file(rel, None, _text(base, path, data, found)))
    found += _pytest_caches(caches, base.roots)
    out.findings = found[:MAX_FINDINGS]
    out.more = max(0, len(found) - MAX_FINDINGS)
    return out


def _text(base: Baseline, path: str, data: bytes, found: list[Finding]) -> str:
    """A file's text at the end, decoded as its runtime decodes it; a coding
    cookie it did not have at the start is a finding."""
    text, encoding = startup.decode(_relative(path, base.roots), data)
    was = base.encodings.get(path, "utf-8" if path in base.present else None)
    finding = startup.coding(path, was, encoding)
    if finding is not None:
        found.append(finding)
    return text


def _started(
    base: Baseline, path: str, rel: str, created: bool, caches: list[tuple[str, str]]
) -> list[Finding]:
    """Findings for a start-up file or bytecode the attempt created or changed;
    pytest's caches are put in ``caches`` (bytecode, its source), to be checked
    together."""
    source_rel = startup.bytecode_source(rel)
    if source_rel is not None:
        source = path[: len(path) - len(rel)] + source_rel
        data = read(path)
        if data is None:
            return [Finding(path, None, "bytecode-added", "bytecode the audit could not read")]
        code, stamp = read(source), _stamp(source)
        if startup.pytest_version(rel) is not None:
            if not startup.stale(data, code, stamp, pytest=True):
                caches.append((path, source))
            return []
        finding = startup.bytecode(path, data, source, code, stamp)
        return [] if finding is None else [finding]
    if rel.endswith((".pth", "sitecustomize.py", "usercustomize.py", "conftest.py")):
        data = read(path)
        text = None if data is None else startup.decode(rel, data)[0]
        finding = startup.started(path, created, text)
        return [] if finding is None else [finding]
    return []


PYTEST_CHECK_SECONDS: Final = 60
_PYTEST_CHECK: Final = """
import ast, base64, importlib.util, json, marshal, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (2**31, 2**31))  # a crafted length fails, fast
asked = json.load(sys.stdin)
sys.path[:0] = asked["path"]
try:
    import _pytest
    from _pytest.assertion.rewrite import rewrite_asserts
except ImportError:
    print(json.dumps({}))
    raise SystemExit
out = {}
for cache, source, version, data, text in asked["caches"]:
    if version != _pytest.__version__:
        out[cache] = f"rewritten by pytest {version}; this audit has pytest {_pytest.__version__}"
        continue
    if data is None or text is None:
        out[cache] = "there is no source beside it" if data is not None else "unreadable"
        continue
    data, text = base64.b64decode(data), base64.b64decode(text)
    if data[:4] != importlib.util.MAGIC_NUMBER:
        out[cache] = "it was written for another Python"
        continue
    tree = ast.parse(text, filename=source)
    rewrite_asserts(tree, text, source, None)
    if marshal.loads(data[16:]) == compile(tree, source, "exec", dont_inherit=True):
        out[cache] = None
    else:
        out[cache] = "it is not what pytest makes of its source: it runs in place of the test"
print(json.dumps(out))
"""
"""Run in a child: ``marshal.loads`` is not safe on bytes the agent wrote (a
crafted one can crash the process that loads it), so the governor's own
process never loads them."""


def _pytest_caches(caches: list[tuple[str, str]], roots: Sequence[str] = ()) -> list[Finding]:
    """pytest's assertion-rewrite caches the attempt wrote, each compared as code
    with what pytest makes of its source, in one child process; a cache it
    cannot check is a finding."""
    if not caches:
        return []
    asked = {
        "path": [p for p in sys.path if os.path.isabs(p) and not _inside(p, roots)],
        "caches": [
            (c, s, startup.pytest_version(c), _b64(read(c)), _b64(read(s))) for c, s in caches
        ],
    }
    said: dict[str, str | None] = {}
    try:
        done = subprocess.run(
            [sys.executable, "-I", "-S", "-c", _PYTEST_CHECK],
            input=json.dumps(asked),
            capture_output=True,
            text=True,
            timeout=PYTEST_CHECK_SECONDS,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
        )
        said = json.loads(done.stdout) if done.returncode == 0 else {}
    except (OSError, subprocess.SubprocessError, ValueError):
        said = {}
    out = []
    for cache, _ in caches:
        why = said.get(cache, "this audit could not check it (no pytest here, or the check failed)")
        if why is not None:
            name = os.path.basename(cache)
            out.append(Finding(cache, None, "bytecode-added", f"{name}: {why}"))
    return out


def _stamp(path: str) -> startup.Stamp | None:
    """A source's mtime and size as the loader compares them with a ``.pyc``'s
    header (it follows links, as the import does)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return int(st.st_mtime), st.st_size


def _inside(path: str, roots: Sequence[str]) -> bool:
    """Whether ``path`` is a root or under one: never on the child's import path
    (a ``_pytest`` the agent planted there would judge its own cache)."""
    return any(path == r.rstrip("/") or path.startswith(r.rstrip("/") + "/") for r in roots)


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


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
