"""Allow / ask / deny rules over commands, paths and agent tool kinds.

Precedence is a table, not a chain of ifs: deny > ask > allow > the capability's
default. A rule list names subjects of three kinds:

- ``commands``: argv prefixes whose words are globs. ``git status`` matches
  ``git status --short``; ``pytest *`` matches ``pytest`` with any arguments;
  the first word also matches by basename, so ``rm *`` catches ``/bin/rm -rf x``.
- ``paths``: globs (see `governor.policies.paths`) for reads *and* writes; ``writes``:
  globs for writes only.
- ``tools``: ACP tool kinds (``execute``, ``edit``, ``delete``, ``move``,
  ``fetch``, ``read``, ``search``, ``think``, ``switch_mode``, ``other``).
"""

from __future__ import annotations

import enum
import fnmatch
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from governor.policies.paths import PathGlobs


class Verdict(enum.IntEnum):
    """Ordered by severity so that combining verdicts is ``max``."""

    ALLOW = 0
    ASK = 1
    DENY = 2

    def __str__(self) -> str:
        return _VERDICT_WORDS[self]


_VERDICT_WORDS: Final = {v: v.name.lower() for v in Verdict}
"""``allow``, ``ask``, ``deny``: what a record says (``.name`` is a slow property)."""


TOOL_KINDS: Final = (
    "read",
    "edit",
    "delete",
    "move",
    "search",
    "execute",
    "think",
    "fetch",
    "switch_mode",
    "other",
)

_GLOB_CHARS: Final = re.compile(r"[*?\[]")


@dataclass(frozen=True, slots=True)
class CommandPattern:
    """One ``commands`` entry, split into word globs."""

    text: str
    words: tuple[str, ...] = field(init=False, compare=False)
    _matchers: tuple[re.Pattern[str] | str, ...] = field(init=False, repr=False, compare=False)
    _open: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        words = tuple(self.text.split())
        open_tail = bool(words) and words[-1] == "*"
        if open_tail:
            words = words[:-1]
        object.__setattr__(self, "words", words)
        object.__setattr__(self, "_open", open_tail)
        object.__setattr__(
            self,
            "_matchers",
            tuple(re.compile(fnmatch.translate(w)) if _GLOB_CHARS.search(w) else w for w in words),
        )

    def matches(self, argv: Sequence[str]) -> bool:
        """Whether argv starts with words matching this pattern (prefix match)."""
        matchers = self._matchers
        if len(argv) < len(matchers) or not matchers:
            return not matchers and self._open and bool(argv)
        for i, m in enumerate(matchers):
            word = argv[i]
            if isinstance(m, str):
                if word == m:
                    continue
                if i == 0 and "/" in word and word.rsplit("/", 1)[1] == m:
                    continue
                return False
            if m.match(word) is None and not (
                i == 0 and "/" in word and m.match(word.rsplit("/", 1)[1])
            ):
                return False
        return True


@dataclass(frozen=True, slots=True)
class RuleList:
    """The subjects of one tier (allow, ask or deny)."""

    commands: tuple[CommandPattern, ...] = ()
    paths: PathGlobs = field(default_factory=lambda: PathGlobs(()))
    writes: PathGlobs = field(default_factory=lambda: PathGlobs(()))
    tools: frozenset[str] = frozenset()
    # Patterns indexed by their literal first word, so a decision looks at the
    # few patterns that can match instead of every one (the decision path is hot).
    _by_name: dict[str, tuple[CommandPattern, ...]] = field(init=False, repr=False, compare=False)
    _globbed: tuple[CommandPattern, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name: dict[str, list[CommandPattern]] = {}
        globbed: list[CommandPattern] = []
        for pattern in self.commands:
            first = pattern.words[0] if pattern.words else ""
            if not first or _GLOB_CHARS.search(first):
                globbed.append(pattern)
            else:
                by_name.setdefault(first, []).append(pattern)
        object.__setattr__(self, "_by_name", {k: tuple(v) for k, v in by_name.items()})
        object.__setattr__(self, "_globbed", tuple(globbed))

    def command(self, argv: Sequence[str]) -> str | None:
        """The first command pattern matching argv, as written, or None."""
        if not argv:
            return None
        name = argv[0]
        candidates = self._by_name.get(name, ())
        if "/" in name:
            candidates += self._by_name.get(name.rsplit("/", 1)[1], ())
        for pattern in candidates + self._globbed:
            if pattern.matches(argv):
                return pattern.text
        return None

    def __bool__(self) -> bool:
        return bool(self.commands or self.paths or self.writes or self.tools)


@dataclass(frozen=True, slots=True)
class Rules:
    """The three tiers. Their order in `TIERS` is the precedence."""

    deny: RuleList = field(default_factory=RuleList)
    ask: RuleList = field(default_factory=RuleList)
    allow: RuleList = field(default_factory=RuleList)
    # Built once: every decision walks them.
    _tiers: tuple[tuple[Verdict, RuleList], ...] = field(init=False, repr=False, compare=False)
    path_tiers: tuple[tuple[Verdict, RuleList], ...] = field(init=False, repr=False, compare=False)
    """The tiers with ``paths`` rules: the only ones a read can match."""
    write_tiers: tuple[tuple[Verdict, RuleList], ...] = field(init=False, repr=False, compare=False)
    """The tiers with ``paths`` or ``writes`` rules: the only ones a write can match."""

    def __post_init__(self) -> None:
        tiers = ((Verdict.DENY, self.deny), (Verdict.ASK, self.ask), (Verdict.ALLOW, self.allow))
        object.__setattr__(self, "_tiers", tiers)
        object.__setattr__(self, "path_tiers", tuple(t for t in tiers if t[1].paths))
        object.__setattr__(
            self, "write_tiers", tuple(t for t in tiers if t[1].paths or t[1].writes)
        )

    def tiers(self) -> tuple[tuple[Verdict, RuleList], ...]:
        """(verdict, rules) from the strongest to the weakest."""
        return self._tiers


def rule_list(
    commands: Sequence[str] = (),
    paths: Sequence[str] = (),
    writes: Sequence[str] = (),
    tools: Sequence[str] = (),
) -> RuleList:
    """A compiled tier from plain strings."""
    return RuleList(
        commands=tuple(CommandPattern(c) for c in commands),
        paths=PathGlobs(tuple(paths)),
        writes=PathGlobs(tuple(writes)),
        tools=frozenset(tools),
    )
