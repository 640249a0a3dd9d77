"""A configuration value checked against what it must be: one family, one wording.

Every file an operator or a job writes -- a policy, a ceiling (TOML), the
agents' presets (TOML), a batch's jobs (JSON lines) -- has its values checked
here, and a wrong one says the same thing wherever it is written:
``expected WHAT, got WHAT-IT-IS`` (`expected`), WHAT-IT-IS the value's kind in
TOML's words (`type_name`: ``an array``, ``a table``) when the kind is wrong,
or the value itself (`shown`) when the kind is right and the value is not.
A checker is ``check(source, key, value) -> value`` and raises a
`governor.policies.errors.ConfigError` naming the file and the key; a reader
that names its culprits its own way (a preset's ``[id]``, a jobs file's line)
passes its own ``source`` or takes the error's ``problem``.

Why one module: `policies/ceiling.py` held these for `policy.py` and `mcp.py`
while it imported them back (a loop), and the presets and the jobs file had
families of their own ("a list", "must be"): three wordings of one mistake.

Rules of this file: pure, no I/O; imports `errors` only.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final, TypeVar

from governor.policies.errors import ConfigError, clipped, closest

T = TypeVar("T")

Check = Callable[[str, str, Any], T]
"""A value's check: ``check(source, key, value)``, the value (converted) or a
`ConfigError` naming ``source`` and ``key``."""

ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
"""An environment variable's name, wherever a file names one (a preset's
``env``/``set_env``, a registry entry's ``env``, a profile's variables)."""

KEY_SUFFIXES: Final = ("_API_KEY", "_AUTH_TOKEN", "_OAUTH_TOKEN", "_ACCESS_TOKEN", "_TOKEN", "_KEY")
"""A preset's variable is a credential when its name ends so (``OPENAI_API_KEY``,
``ANTHROPIC_AUTH_TOKEN``, ``GH_TOKEN``): kept here, with the name's pattern, so
that reading a presets file (`governor presets`, a quick answer) imports no
part of the proxy (`governor.sandbox.net.credentials` uses it too)."""


def is_credential(name: str) -> bool:
    """Whether a preset's variable ``name`` holds a credential."""
    return name.upper().endswith(KEY_SUFFIXES)


SHOWN_CHARS: Final = 80
"""Characters of a value quoted in an error (`shown`)."""

_TYPE_NAMES: Final[Mapping[type, str]] = {
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    str: "a string",
    list: "an array",
    dict: "a table",
    type(None): "null",
}


def type_name(value: Any) -> str:
    """A value's kind in TOML's words (JSON's ``null`` too), for an error."""
    return _TYPE_NAMES.get(type(value), type(value).__name__)


def shown(value: Any) -> str:
    """A value of the right kind but not accepted, quoted (clipped) for an error."""
    return clipped(repr(value), SHOWN_CHARS)


def expected(source: str, key: str, what: str, got: str) -> ConfigError:
    """The error of a wrong value: ``SOURCE: KEY: expected WHAT, got GOT``."""
    return ConfigError(source, key, f"expected {what}, got {got}")


def boolean(source: str, key: str, value: Any) -> bool:
    """``true`` or ``false``."""
    if not isinstance(value, bool):
        raise expected(source, key, "true or false", type_name(value))
    return value


def string(source: str, key: str, value: Any) -> str:
    """Any string, empty included."""
    if not isinstance(value, str):
        raise expected(source, key, "a string", type_name(value))
    return value


def text(source: str, key: str, value: Any) -> str:
    """A string with more than blanks in it."""
    if not isinstance(value, str) or not value.strip():
        got = type_name(value) if not isinstance(value, str) else "an empty string"
        raise expected(source, key, "a non-empty string", got)
    return value


def string_list(source: str, key: str, value: Any) -> tuple[str, ...]:
    """An array of strings (empty ones and an empty array allowed)."""
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise expected(source, key, "an array of strings", _array_got(value))
    return tuple(value)


def text_list(source: str, key: str, value: Any) -> tuple[str, ...]:
    """An array of non-empty strings (an empty array allowed)."""
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise expected(source, key, "an array of non-empty strings", _array_got(value))
    return tuple(value)


def argv(source: str, key: str, value: Any) -> tuple[str, ...]:
    """A program and its arguments: a non-empty array of non-empty strings."""
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        what = "a non-empty array of non-empty strings (the program, then its arguments)"
        raise expected(source, key, what, _array_got(value))
    return tuple(value)


def table(source: str, key: str, value: Any) -> Mapping[str, Any]:
    """A table (a JSON object)."""
    if not isinstance(value, dict):
        raise expected(source, key, "a table", type_name(value))
    return value


def one_of(*choices: str) -> Check[str]:
    """A check that the value is one of ``choices``, suggesting the nearest for a typo."""

    def check(source: str, key: str, value: Any) -> str:
        if isinstance(value, str) and value in choices:
            return value
        hint = closest(value, choices) if isinstance(value, str) else None
        got = shown(value) if isinstance(value, str) else type_name(value)
        said = got + (f" (did you mean {hint}?)" if hint else "")
        raise expected(source, key, f"one of {', '.join(choices)}", said)

    return check


def _array_got(value: Any) -> str:
    """What an array that is wrong holds: its kind when it is none, else the first
    element that is wrong (or that it is empty)."""
    if not isinstance(value, list):
        return type_name(value)
    if not value:
        return "an empty array"
    for element in value:
        if not isinstance(element, str):
            return f"an array holding {type_name(element)}"
        if not element:
            return "an array holding an empty string"
    return "an array"
