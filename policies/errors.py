"""Configuration errors that name the culprit: the file, the key, the accepted values."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


class ConfigError(ValueError):
    """A policy, ceiling or preset file that cannot be used as written.

    ``str(error)`` is one line: ``FILE: KEY: what is wrong (accepted: ...)``.
    The parts stay available for programs that want them.
    """

    def __init__(self, source: str, key: str, problem: str) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        where = f"{source}: {key}" if key else source
        super().__init__(f"{where}: {problem}")


def closest(word: str, choices: Iterable[str]) -> str | None:
    """The accepted spelling nearest to a typo, if any is near enough to suggest."""
    found = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return found[0] if found else None


def unknown_key(source: str, table: str, key: str, accepted: Iterable[str]) -> ConfigError:
    """The error for a key no table of ours accepts, with a suggestion for a typo."""
    accepted = sorted(accepted)
    name = f"{table}.{key}" if table else key
    hint = closest(key, accepted)
    suggestion = f"; did you mean `{hint}`?" if hint else ""
    return ConfigError(source, name, f"unknown key{suggestion} (accepted: {', '.join(accepted)})")
