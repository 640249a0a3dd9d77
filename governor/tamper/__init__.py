"""The tamper audit of an attempt's diff: what weakens what the checks prove.

An agent asked to make a failing test pass can pass by deleting the test,
weakening its assertions, skipping it, changing what the runner collects, or
silencing the checker. This package finds those changes between a file's text
before and after an attempt, as `Finding`s (path, line, rule: `RULES`).

Rules of this package: everything but `governor.tamper.baseline` is pure,
functions of ``(path, before, after)`` text, so that tests drive them with
strings. Where a grammar exists the text is parsed, never grepped: `ast` and
`tokenize` for Python (`governor.tamper.python`), tree-sitter for
JavaScript, TypeScript, Rust and Go (`governor.tamper.syntax`), `configparser`,
`tomllib` and `json` for the runners' files (`governor.tamper.runner`). CI
workflows are compared line by line (no YAML parser is a dependency).

May import: nothing of ours but itself (pure rules over text).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Final

from governor.tamper import import_time, python, runner, syntax
from governor.tamper.facts import RULES, Facts, Finding, Mark, compare

__all__ = [
    "RULES",
    "Finding",
    "audit_file",
    "import_code_added",
    "language",
    "looks_like_test",
    "suppressions",
]

_EXTENSIONS: Final = {
    ".py": "python",
    ".js": "javascript",
    ".jsx": "javascript",
    ".mjs": "javascript",
    ".cjs": "javascript",
    ".ts": "typescript",
    ".mts": "typescript",
    ".cts": "typescript",
    ".tsx": "tsx",
    ".rs": "rust",
    ".go": "go",
}

_READERS: Final[Mapping[str, Callable[[str], Facts]]] = {
    "python": python.facts,
    "javascript": syntax.javascript,
    "typescript": lambda text: syntax.javascript(text, "typescript"),
    "tsx": lambda text: syntax.javascript(text, "tsx"),
    "rust": syntax.rust,
    "go": syntax.go,
}

_TEST_NAME: Final = re.compile(
    r"^(test_.*\.py|.*_test\.py|.*[._-](test|spec)\.(js|jsx|mjs|cjs|ts|mts|cts|tsx)|.*_test\.go)$"
)
_TEST_DIRS: Final = {"tests", "test", "__tests__", "spec", "testing"}

SUPPRESSION_WORDS: Final = (
    b"pragma",
    b"type:",
    b"noqa",
    b"pylint",
    b"pyright",
    b"mypy",
    b"@ts-",
    b"eslint-disable",
    b"ignore",
    b"allow",
    b"nolint",
)
"""Bytes at least one of which a file holding a suppression contains: a file
with none of them needs no parse to know it holds none."""


def language(path: str) -> str | None:
    """The language a file's name says it is in, among those the audit parses."""
    return _EXTENSIONS.get(posixpath.splitext(path)[1])


def looks_like_test(path: str) -> bool:
    """Whether a file is a test file or runner configuration by its path (its
    name, or a ``tests/``-like folder it is in), or a Rust file (whose unit
    tests live beside the code)."""
    if runner.kind(path) is not None:
        return True
    lang = language(path)
    if lang is None:
        return False
    if lang == "rust" or _TEST_NAME.match(posixpath.basename(path)):
        return True
    return any(part in _TEST_DIRS for part in path.split("/")[:-1])


def audit_file(path: str, before: str | None, after: str | None) -> list[Finding]:
    """Every finding between a file's text before and after an attempt (None:
    the file did not exist then)."""
    if before == after:
        return []
    out = runner.findings(path, before, after)
    lang = language(path)
    if lang is None or runner.kind(path) == "conftest":
        return out
    read = _READERS[lang]
    old = None if before is None else read(before)
    new = None if after is None else read(after)
    if not looks_like_test(path):  # a source file: its suppressions, its new code at import
        old = Facts(marks=old.marks) if old is not None else None
        new = Facts(marks=new.marks, error=new.error) if new is not None else None
        if new is not None and new.error is not None:
            return out  # a broken source file is the checks' to report
        if lang == "python" and before is None and after is not None:
            out += import_code_added(path, None, after)
    elif runner.kind(path) is not None:  # a runner's configuration: its keys, not its code
        for facts in (old, new):
            if facts is not None:
                facts.code.clear()
    return out + compare(path, old, new)


def import_code_added(path: str, before: str | None, after: str) -> list[Finding]:
    """The statements of a Python source module that run as it is imported and
    that it did not hold before (``before``: its text at the start; None: it
    is new): a check imports it (the module under test, a helper of the
    tests), and what runs then runs in the runner's process."""
    return [
        Finding(path, line, "import-code-added", f"at the module's top: {why}")
        for line, why in import_time.added(after, before)
    ]


def suppressions(path: str, text: str) -> list[Mark]:
    """The suppressions in one source file (what is kept of a file that is not a
    test: `governor.tamper.baseline`)."""
    lang = language(path)
    if lang is None:
        return []
    if lang == "python":
        return python.suppressions(text)
    facts = _READERS[lang](text)
    return [m for m in facts.marks if m.rule == "suppression-added"]


def added_suppressions(path: str, before: Iterable[Mark], after: str | None) -> list[Finding]:
    """The suppressions of ``after`` that ``before`` (a file's suppressions
    before the attempt) did not hold."""
    if after is None:
        return []
    return compare(path, Facts(marks=list(before)), Facts(marks=suppressions(path, after)))
