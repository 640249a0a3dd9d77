"""Configuration errors that name the culprit: the file, the key, the accepted
values; and `clipped`, the one cut of a text quoted in a reason or a message."""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Iterable
from typing import Final


def clipped(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, its last an ellipsis when cut (a
    reason or a message quotes what it judged, never all of it)."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ConfigError(ValueError):
    """A policy, ceiling or preset file that cannot be used as written.

    ``str(error)`` is one line: ``FILE: line N: KEY: what is wrong (accepted: ...)``,
    the line where the TOML parser gives one (a syntax error; a parsed file
    keeps no lines), the key where one is to blame. The parts stay available
    for programs that want them.
    """

    def __init__(self, source: str, key: str, problem: str, *, line: int | None = None) -> None:
        self.source = source
        self.key = key
        self.problem = problem
        self.line = line
        where = [source, *([f"line {line}"] if line is not None else []), *([key] if key else [])]
        super().__init__(f"{': '.join(where)}: {problem}")


class ConfigErrors(ConfigError):
    """Several problems of one file, each a `ConfigError` (``errors``), so that
    an operator fixes the file in one round; ``str`` is one line per problem."""

    def __init__(self, errors: Iterable[ConfigError]) -> None:
        self.errors = list(errors)
        first = self.errors[0]
        super().__init__(first.source, first.key, first.problem, line=first.line)
        self.args = ("\n".join(str(e) for e in self.errors),)

    def __str__(self) -> str:
        return "\n".join(str(e) for e in self.errors)


_AT: Final = re.compile(r"\s*\(at line (\d+), column (\d+)\)\Z")
_KEY: Final = re.compile(r"\s*([A-Za-z0-9_-]+(?:\s*\.\s*[A-Za-z0-9_-]+)*)\s*=")
_TABLE: Final = re.compile(r"\s*\[+\s*([A-Za-z0-9_.-]+)")


def toml_error(source: str, text: str, error: tomllib.TOMLDecodeError) -> ConfigError:
    """A TOML syntax error naming the line the parser stopped at and the key
    written there (in its table), so a long file is not searched by eye."""
    message = str(error)
    found = _AT.search(message)
    if found is None:  # "at end of document": something opened is never closed
        return _unclosed(source, text, message)
    line, column = int(found.group(1)), found.group(2)
    problem = f"not valid TOML: {message[: found.start()]} (column {column})"
    return ConfigError(source, _key_at(text.splitlines()[:line]), problem, line=line)


def _key_at(lines: list[str]) -> str:
    """The key (in its table) or table header written on the last of `lines`."""
    table = ""
    for earlier in lines[:-1]:
        if header := _TABLE.match(earlier):
            table = header.group(1)
    if lines and (written := _KEY.match(lines[-1])):
        name = re.sub(r"\s+", "", written.group(1))
        return f"{table}.{name}" if table else name
    if lines and (header := _TABLE.match(lines[-1])):
        return header.group(1)
    return ""


def _unclosed(source: str, text: str, message: str) -> ConfigError:
    """The parser reached the end of the file inside something never closed (an
    array, an inline table, a string) and names no line: name the last key
    written, where the unclosed value most likely starts."""
    what = message.removesuffix("(at end of document)").strip()
    lines = text.splitlines()
    line = max((n for n, written in enumerate(lines, 1) if _KEY.match(written)), default=0)
    if not line:
        return ConfigError(source, "", f"not valid TOML: {what} at the end of the file")
    problem = f"not valid TOML: {what} at the end of the file (is the value begun here closed?)"
    return ConfigError(source, _key_at(lines[:line]), problem, line=line)


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
