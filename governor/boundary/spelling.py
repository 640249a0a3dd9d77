"""One spelling of a file's name in every text the governor writes: the
audit records, the outcome (``governor run --json``, a batch's
``outcomes.jsonl`` and ``--json``), the event stream, an MCP line.

Linux lets a name hold any byte but ``/`` and NUL; Python reads a byte that
is not UTF-8 as a lone surrogate (``b"\\xfe"`` -> ``"\\udcfe"``,
``surrogateescape``), which no UTF-8 writer can encode. The writers did three
different things with it: stdout wrote the raw byte (the outcome was no longer
UTF-8 JSON, and a strict reader failed), the audit log put U+FFFD in its place
(``d\\xfe/`` and ``d\\xfd/`` became one name, a file that does not exist), and
the batch's outcome line crashed the whole batch once. Here, every JSON text
spells a lone surrogate as its JSON escape, ``\\udcfe``: the text stays UTF-8
(ASCII, even, for that character), the name is its own (no UTF-8 name holds a
lone surrogate, so the escape means that byte and nothing else), and a reader
that parses it gets the very string back, ``os.fsencode`` the very bytes.
`governor.boundary.display.terminal` shows one the same way on a terminal (``\\udcfe``,
a literal backslash doubled).

orjson, the fast parser the audit readers use, refuses a lone surrogate's
escape: `loads` falls back to the standard library for that case alone.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import orjson

_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def escaped(text: str) -> str:
    """JSON text (`json.dumps` with ``ensure_ascii=False``) with each lone
    surrogate written as its escape (``\\udcfe``): encodable as UTF-8, and
    parsed back to the same string. For JSON text, where such a character
    can only be inside a string; an HTML page (`governor.audit.report`)
    shows the same characters as text."""
    if _LONE_SURROGATE.search(text) is None:
        return text
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def dumps(value: Any, **options: Any) -> str:
    """`json.dumps` (``ensure_ascii=False``, ``options`` as given) in the one
    spelling: a lone surrogate as its escape."""
    return escaped(json.dumps(value, ensure_ascii=False, **options))


def loads(raw: bytes | str) -> Any:
    """A JSON value, parsed by orjson, or by the standard library when orjson
    refuses only a lone surrogate's escape (what `escaped` writes); ``NaN`` and
    ``Infinity`` refused there too, as orjson refuses them."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as e:
        if "surrogate" not in str(e):
            raise
    try:
        return json.loads(raw, parse_constant=_no_constant)
    except ValueError as e:
        raise orjson.JSONDecodeError(str(e), raw if isinstance(raw, str) else "", 0) from None


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
