"""Path globs relative to a root, compiled once and matched in microseconds.

Glob syntax (gitignore-like, but anchored at the root unless it says otherwise):
``*`` and ``?`` stay within one path segment, ``[..]`` is a character class,
``**/`` matches any number of directories (including none), and a trailing
``/**`` matches the directory itself and everything below it. A pattern that
starts with ``/`` is absolute; every other pattern is relative to a root.

Matching is lexical: callers hand us paths that are already absolute and, where
the file system is involved, already resolved (symlinks followed) -- resolving
is I/O and does not belong in this package.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from typing import Final

_SEGMENT_SPECIAL: Final = re.compile(r"\*\*|[*?\[]")


def translate(pattern: str) -> str:
    """The regular expression (without anchors) for one glob pattern."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("/**", i) and i + 3 == n:
            out.append("(?:/.*)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        else:
            c = pattern[i]
            if c == "*":
                out.append("[^/]*")
            elif c == "?":
                out.append("[^/]")
            elif c == "[":
                end = pattern.find("]", i + 2)
                if end == -1:
                    out.append(re.escape(c))
                else:
                    body = pattern[i + 1 : end]
                    if body.startswith("!"):
                        body = "^" + body[1:]
                    out.append(f"[{body.replace(chr(92), chr(92) * 2)}]")
                    i = end
            else:
                out.append(re.escape(c))
            i += 1
    return "".join(out)


def is_literal(pattern: str) -> bool:
    """Whether a pattern has no glob characters (it then names one path)."""
    return _SEGMENT_SPECIAL.search(pattern) is None


def _source(pattern: str) -> str:
    """The regex source for one pattern: absolute ones keep their leading slash."""
    if pattern.startswith("./"):
        pattern = pattern[2:]
    return translate(pattern)


@dataclass(frozen=True, slots=True)
class PathGlobs:
    """A set of globs, compiled into one relative and one absolute regex."""

    patterns: tuple[str, ...]
    _relative: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _absolute: re.Pattern[str] | None = field(init=False, repr=False, compare=False)
    _sources: tuple[tuple[str, bool, str], ...] = field(init=False, repr=False, compare=False)
    _each: tuple[tuple[str, bool, re.Pattern[str]], ...] | None = field(
        init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        sources = tuple((p, p.startswith("/"), _source(p)) for p in self.patterns)
        object.__setattr__(self, "_sources", sources)
        # Each pattern's own regex only names the rule of a match (`first`):
        # compiled then, not for every policy read (hundreds of protected globs).
        object.__setattr__(self, "_each", None)
        object.__setattr__(self, "_relative", _union([s for _, a, s in sources if not a]))
        object.__setattr__(self, "_absolute", _union([s for _, a, s in sources if a]))

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def matches(self, path: str, roots: tuple[str, ...]) -> bool:
        """Whether an absolute, normalized path matches any glob."""
        if self._absolute is not None and self._absolute.match(path):
            return True
        if self._relative is not None:
            for rel in relative_forms(path, roots):
                if self._relative.match(rel):
                    return True
        return False

    def first(self, path: str, roots: tuple[str, ...]) -> str | None:
        """The first pattern the path matches (for the decision's rule), or None."""
        if not self._sources or not self.matches(path, roots):
            return None
        each = self._each
        if each is None:
            each = tuple((p, a, re.compile(src + r"\Z")) for p, a, src in self._sources)
            object.__setattr__(self, "_each", each)
        rels = relative_forms(path, roots)
        for pattern, absolute, rx in each:
            if absolute:
                if rx.match(path):
                    return pattern
            elif any(rx.match(rel) for rel in rels):
                return pattern
        return None  # pragma: no cover - matches() said one pattern does


def _union(sources: list[str]) -> re.Pattern[str] | None:
    if not sources:
        return None
    body = "|".join(f"(?:{src})" for src in sources)
    return re.compile(f"(?:{body})\\Z")


def relative_forms(path: str, roots: tuple[str, ...]) -> list[str]:
    """The path relative to each root it lies in (``.`` for a root itself)."""
    out: list[str] = []
    for root in roots:
        if path == root:
            out.append(".")
        elif is_under(path, root):
            out.append(path[len(root) :].lstrip("/"))
    return out


def within(path: str, roots: tuple[str, ...]) -> str | None:
    """The root that contains an absolute normalized path, or None."""
    for root in roots:
        if is_under(path, root):
            return root
    return None


def is_under(path: str, root: str, *, strictly: bool = False) -> bool:
    """Whether ``path`` is ``root`` or lies below it (``strictly``: below it only).

    By whole path components: ``/a/bc`` is not under ``/a/b``, which a string
    prefix would say, and is how a root ``/home/al`` would take in
    ``/home/alice``. Lexical: nothing is resolved (a caller that means the file
    system resolves both first, as the audit log's check does), but a ``.`` or
    ``..`` segment is folded, so ``/a/b/../c`` is not under ``/a/b``. A
    trailing slash changes nothing; ``/`` holds every absolute path and no
    relative one; an empty root holds nothing. Relative paths compare as
    written (``~/tools/go`` is under ``~/tools``).
    """
    if not path or not root:
        return False
    if "/." in path or "//" in path or path[0] == ".":
        path = _folded(path)
    if "/." in root or "//" in root or root[0] == ".":
        root = _folded(root)
    path, root = path.rstrip("/"), root.rstrip("/")  # "/" is "" from here on
    if path == root:
        return not strictly
    return path.startswith(root + "/")


def _folded(path: str) -> str:
    """``path`` with its ``.`` and ``..`` segments and ``//`` folded, when it has any
    (``/.git`` is a name, and returned as it is)."""
    dotted = (
        "/./" in path
        or "/../" in path
        or path.endswith(("/.", "/.."))
        or path.startswith(("./", "../"))
        or path in (".", "..")
    )
    if not dotted and "//" not in path:
        return path
    folded = posixpath.normpath(path)
    return "/" + folded.lstrip("/") if path.startswith("/") else folded


def normalize(path: str, cwd: str | None = None) -> str:
    """An absolute, lexically normalized path (``..`` folded, no symlinks resolved).

    A relative path is taken against ``cwd``; without one it stays relative, and
    the caller must treat it as unknown.
    """
    if not path.startswith("/"):
        if cwd is None:
            return path
        path = posixpath.join(cwd, path)
    elif "//" not in path and "/." not in path and not path.endswith("/"):
        return path  # already normal: no empty, "." or ".." segment, no trailing slash
    normal = posixpath.normpath(path)
    # POSIX keeps a leading "//"; we never mean anything special by it.
    return "/" + normal.lstrip("/")
