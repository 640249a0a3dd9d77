"""What a split returns: the simple commands of a line, and what could not be read.

Immutable values only (results are cached); nothing here parses or decides.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SimpleCommand:
    """One command the line would run, as a person would name it.

    `argv` holds each word after quote removal (`'r''m'` is `rm`). A word whose
    value is only known at run time (`$X`, `$(...)`, backticks, `${...}`,
    arithmetic, a leading `~`, brace expansion) keeps its expansions as source
    text (`"$HOME/x"` is `$HOME/x`) and its index is in `dynamic`; glob
    characters are plain text. `assignments` names the `NAME=value` words before
    the command. `reads` and `writes` are the files its redirects open, as
    written, without `/dev/null`, `/dev/std*`, `/dev/tty`, `/dev/fd/N` or
    descriptor duplications (`2>&1`). `via` is the chain of wrappers that run
    it: `()` at top level, `("sudo", "bash -c")` for `sudo bash -c 'CMD'`.
    """

    argv: tuple[str, ...]
    dynamic: tuple[int, ...] = ()
    assignments: tuple[str, ...] = ()
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    via: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Split:
    """Every simple command of a line, and why the line cannot be judged if it cannot."""

    commands: tuple[SimpleCommand, ...]
    unknown: tuple[str, ...]

    @property
    def understood(self) -> bool:
        """True when every construct on the line was read; only then may it be allowed."""
        return not self.unknown
