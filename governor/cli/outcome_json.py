"""An outcome as ``governor run --json`` and ``--events`` write it.

Rules of this file: the shape is the outcome's values with ``tool_calls``, the
decision log, after ``run_id``; the records are streamed from the attempt's
audit log (`governor.audit.reading.decision_records`) one at a time, never
gathered into a list, so that printing an attempt of 100,000 decisions costs
no more memory than printing one of ten. The text is what ``json.dumps`` of
the whole document would give, byte for byte. ``exit_code`` follows
``status``: the code the command line returns for it (`governor.cli.EXITS`).

A streamed element is a value orjson parsed from JSON text (a record as read
from the log, `governor.audit.verify.parsed`), and is written by orjson where
its text is the stdlib's (`_element`): at indent 2 ``json.dumps`` goes through
its pure-Python encoder, which made ``--json`` a visible part of a long
attempt's time (figures in bench/README.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, TextIO

import orjson

from governor.audit.reading import decision_records
from governor.boundary import spelling
from governor.ending.outcome import Outcome


class Streamed:
    """A JSON array written element by element as its iterable gives them."""

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = items

    def __iter__(self) -> Iterator[Any]:
        return iter(self.items)


def listing(
    key: str, items: Iterable[Any], problems: Sequence[str] = (), **about: Any
) -> dict[str, Any]:
    """A list as a ``--json`` document: an object whose ``status`` a script reads
    first, as it does on every other document (``ok``; ``unverified`` when what
    was read may not be what was written: a log that does not verify, a line cut
    short, each said in ``problems``), what the list is ``about``, then the list
    under ``key``, streamed."""
    doc: dict[str, Any] = {"status": "unverified" if problems else "ok"}
    if problems:
        doc["problems"] = list(problems)
    doc.update(about)
    doc[key] = Streamed(items)
    return doc


def document(outcome: Outcome, exit_code: int) -> dict[str, Any]:
    """The outcome's JSON document with the exit code the command returns, its
    ``tool_calls`` streamed from its log."""
    records = Streamed(decision_records(outcome.log, outcome.run_id, outcome.decisions))
    doc: dict[str, Any] = {}
    for key, value in outcome.to_json().items():
        doc[key] = value
        if key == "status":
            doc["exit_code"] = exit_code
        elif key == "run_id":
            doc["tool_calls"] = records
    return doc


def write_json(value: Any, out: TextIO, *, indent: int | None = None) -> None:
    """Write `value` to `out` as ``json.dumps(value, indent=indent,
    ensure_ascii=False)`` would, a `Streamed` array as it comes (raises what
    its iterable raises, `governor.audit.reading.LogUnreadable` for a log)."""
    _write(value, out, indent, 0)


def _write(value: Any, out: TextIO, indent: int | None, level: int, parsed: bool = False) -> None:
    """`value` at nesting `level`; `parsed`: an element of a `Streamed` array, which
    holds no `Streamed` of its own (it was parsed from JSON text), so is not searched."""
    if not parsed and isinstance(value, Streamed):
        entries = ((None, item) for item in value)
        _container("[", "]", entries, out, indent, level, parsed=True)
        return
    if not parsed and type(value) is dict and _streams(value):
        _container("{", "}", value.items(), out, indent, level)
        return
    text = _element(value, indent) if parsed else None
    if text is None:
        text = spelling.dumps(value, indent=indent)
    if indent is not None and level:
        text = text.replace("\n", "\n" + " " * (indent * level))  # strings hold no raw newline
    out.write(text)


def _element(value: Any, indent: int | None) -> str | None:
    """A value orjson parsed, as ``json.dumps(value, indent=2, ensure_ascii=False)``
    writes it, by orjson, or None to leave it to the stdlib.

    What orjson parsed holds only JSON's types, string keys and no NaN (which it
    would write as null); an integer past 64 bits, which it refuses to write, is
    left to the stdlib. The two escape every character alike; they differ only in how
    they spell a float under 1e-4 (``1e-05``/``0.00001``, ``1e-07``/``1e-7``), so
    text with ``e-`` or ``0.0000`` anywhere, in a string too, goes the stdlib's way.
    """
    if indent != 2:
        return None
    try:
        text = orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except orjson.JSONEncodeError:  # an integer past 64 bits, parsed by someone else
        return None
    if b"e-" in text or b"0.0000" in text:
        return None
    return text.decode()


def _container(
    opening: str,
    closing: str,
    entries: Iterable[tuple[str | None, Any]],
    out: TextIO,
    indent: int | None,
    level: int,
    *,
    parsed: bool = False,
) -> None:
    """An array (keys None) or an object, laid out as `json.dumps` lays it out;
    `parsed`: its entries are values parsed from JSON (`_element`)."""
    inner = "" if indent is None else "\n" + " " * (indent * (level + 1))
    separator = ", " if indent is None else ","
    empty = True
    for key, item in entries:
        head = (opening if empty else separator) + inner  # one write an entry: 40,000 records
        empty = False
        if key is not None:
            head += spelling.dumps(key) + ": "
        out.write(head)
        _write(item, out, indent, level + 1, parsed)
    if empty:
        out.write(opening + closing)
        return
    if indent is not None:
        out.write("\n" + " " * (indent * level))
    out.write(closing)


def _streams(value: dict[str, Any]) -> bool:
    """Whether a `Streamed` array is somewhere inside the object."""
    return any(isinstance(v, Streamed) or (type(v) is dict and _streams(v)) for v in value.values())
