"""Reading a log back and checking its hash chain.

Rules of this file:

- **The line's own bytes are hashed.** A record's ``hash`` is checked against
  the line as written (`_seals`), so the check does not depend on how a JSON
  library formats a value, and any change to the bytes shows.
- **The first problem is named.** `verify` walks the lines once and stops at
  the first line that was edited, deleted, inserted or reordered; where two
  lines are involved it names both.
- **A crash is not tampering.** A line cut by a crash (the last line, or one
  followed by a new attempt-start after a restart) is counted as incomplete;
  an attempt with no end record is reported unfinished, not as an error.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from governor.audit.record_shape import malformed
from governor.audit.signing import Signed, signed_part
from governor.boundary.spelling import loads

_HASH_TAIL: Final = re.compile(rb',"hash":"([0-9a-f]{64})"\}\Z')


@dataclass(frozen=True, slots=True)
class Problem:
    """The first thing wrong with a log: the 1-based line and what."""

    line: int
    what: str


@dataclass(frozen=True, slots=True)
class ChainEnd:
    """Where one attempt's chain ends in a log: its last record's hash, ``seq`` and
    line, whether that record is the attempt's end, and the signature it
    carries (`governor.audit.signing.signed_part`; None: unsigned)."""

    attempt: str
    hash: str
    seq: int
    line: int
    ended: bool
    signed: Signed | None = None


@dataclass(frozen=True, slots=True)
class Verification:
    """A log's check: the first problem (if any), attempts with no end record, and
    lines a crash cut short (not tampering); where each attempt's chain ends,
    and where the hashes asked about (`verify`'s ``wanted``) were found."""

    problem: Problem | None
    unfinished: tuple[str, ...]
    attempts: int
    records: int
    incomplete: tuple[int, ...] = ()
    ends: tuple[ChainEnd, ...] = ()
    found: Mapping[str, ChainEnd] = field(default_factory=dict)


def parsed(raw: bytes) -> dict[str, Any] | None:
    """A line's record, or None when it is not a JSON object. orjson refuses what
    the writer never writes and a reader could choke on: nesting past 254
    levels, ``NaN``, integers past 64 bits, bytes that are not UTF-8; a lone
    surrogate's escape (a file name's byte that is not UTF-8, as the writer
    spells it: `governor.boundary.spelling`) is read back."""
    try:
        value = loads(raw)
    except orjson.JSONDecodeError:
        return None
    return value if type(value) is dict else None


def read_lines(path: Path) -> Iterator[tuple[int, dict[str, Any] | None, str]]:
    """(line number, record or None when not JSON, raw text) for each line, one
    line in memory at a time."""
    with path.open("rb") as f:
        for n, raw in enumerate(f, 1):
            raw = raw.removesuffix(b"\n")
            yield n, parsed(raw), raw.decode("utf-8", errors="replace")


def _seals(line: str, claimed: object) -> bool:
    """Whether a line ends with the hash of what comes before it, as the writer
    seals it: ``{...,"hash":"<sha256 of {...}>"}``. The line's own bytes are
    hashed, so any change to them shows, however the JSON was formatted."""
    raw = line.encode()
    tail = _HASH_TAIL.search(raw)
    if tail is None or claimed != tail.group(1).decode():
        return False
    return hashlib.sha256(raw[: tail.start()] + b"}").hexdigest() == claimed


INCOMPLETE: Final = "the last line is incomplete (the governor stopped while writing it)"
UNFINISHED: Final = "the governor stopped before this attempt finished"


def _starts_attempt(record: dict[str, Any] | None) -> bool:
    return (
        record is not None
        and record.get("kind") == "attempt-start"
        and record.get("prev") is None
        and "hash" in record
    )


def verify(
    lines: Iterable[tuple[int, dict[str, Any] | None, str]], wanted: Collection[str] = ()
) -> Verification:
    """Check every record's hash and its link to the previous record of its attempt.

    The problem names the first line where the chain breaks; where two lines are
    involved (a record edited and re-hashed breaks the link of the next one; a
    forged record duplicates the number of the genuine one), it names both.
    The records whose hash is in ``wanted`` (anchors) are noted where found.
    """
    last: dict[str, tuple[str, int, int]] = {}  # attempt -> (hash, seq, line)
    ended: dict[str, bool] = {}
    signed: dict[str, Signed | None] = {}
    found_at: dict[str, ChainEnd] = {}
    incomplete: list[int] = []
    count = 0

    def found(n: int, what: str) -> Verification:
        return Verification(Problem(n, what), (), len(ended), count, tuple(incomplete))

    pending: tuple[int, dict[str, Any] | None, str] | None = None
    ahead = iter(lines)
    while True:
        current = pending if pending is not None else next(ahead, None)
        if current is None:
            break
        pending = next(ahead, None)
        n, record, text = current
        count += 1
        if record is None:
            cut = text.strip("\x00 \t\r")
            # A crash cuts only the last line written (zeros may follow it on
            # disk); after a restart, a new attempt's chain follows it.
            if (not cut or cut.startswith('{"')) and (
                pending is None or (cut and _starts_attempt(pending[1]))
            ):
                incomplete.append(n)
                continue
            if not cut:
                return found(n, f"line {n} is empty (a record was removed from it)")
            return found(n, f"line {n} is not a JSON record (edited or corrupted)")
        attempt = record.get("attempt")
        if not isinstance(attempt, str) or "hash" not in record:
            return found(n, f"line {n} is not an audit record (inserted?)")
        if not _seals(text, record["hash"]):
            return found(n, f"line {n} was edited: it does not match its hash")
        wrong = malformed(record)
        if wrong is not None:
            return found(n, f"line {n} is not a record the governor writes: {wrong}")
        seq = record.get("seq")
        seq = seq if isinstance(seq, int) else -1
        before = last.get(attempt)
        if before is None:
            if record.get("kind") != "attempt-start" or record.get("prev") is not None:
                missing = f" (its records before {seq} are missing)" if seq > 1 else ""
                return found(
                    n,
                    f"line {n}: the chain of attempt {attempt} does not start here{missing}: "
                    "a record before it was deleted, or this one was inserted or moved",
                )
        elif record.get("prev") != before[0] or seq != before[1] + 1:
            _, prev_seq, prev_line = before
            if seq > prev_seq + 1:
                what = (
                    f"record {prev_seq + 1} of attempt {attempt} is missing before it "
                    "(deleted, or moved later)"
                )
            elif seq == prev_seq:
                what = (
                    f"record {seq} of attempt {attempt} is also on line {prev_line} "
                    "(one of the two was inserted)"
                )
            elif seq < prev_seq:
                what = (
                    f"record {seq} of attempt {attempt} comes after record {prev_seq} "
                    f"(line {prev_line}): reordered or duplicated"
                )
            else:
                what = (
                    f"it does not link to record {prev_seq} of attempt {attempt} "
                    f"(line {prev_line}): that record was edited and re-hashed, or this one "
                    "was replaced"
                )
            return found(n, f"line {n}: {what}")
        last[attempt] = (record["hash"], seq, n)
        is_end = ended[attempt] = record.get("kind") == "attempt-end"
        signed[attempt] = signed_part(text.encode()) if is_end and "signature" in record else None
        if record["hash"] in wanted:
            found_at[record["hash"]] = ChainEnd(attempt, record["hash"], seq, n, is_end)
    unfinished = tuple(a for a, done in ended.items() if not done)
    ends = tuple(
        ChainEnd(a, digest, seq, n, ended[a], signed[a]) for a, (digest, seq, n) in last.items()
    )
    return Verification(None, unfinished, len(ended), count, tuple(incomplete), ends, found_at)
