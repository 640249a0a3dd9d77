"""The shape of a record as the governor writes it, checked when a log is read back.

A log is a file anyone who can write it can craft: a `kind` that is an object,
a `time` of ``1e300``, a `subject` that is a list. The readers (the table, the
views, the page, replay) use these fields as the writer wrote them, so a
record of another shape is refused here, with the field and what it holds,
before any reader can trip over it: one check instead of a guard at every use.
The hash chain cannot vouch for the shape: a crafted line can carry its own
correct hash.

Rules of this file: it is pure; `malformed` names the first field that is not
what the writer writes, or returns None; only the fields some reader relies
on are checked (the rest are shown as JSON, whatever they hold).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any, Final

_TEXT: Final = (
    "attempt", "kind", "verdict", "by", "rule", "reason", "status", "of", "option",
    "preset", "agent", "workspace", "hash", "trace_id", "prompt", "summary",
    "diff", "tail",
)  # fmt: skip
"""Fields that are strings when present."""
_MAPPINGS: Final = ("subject", "explained_by", "tally", "usage")
_LISTS: Final = ("argv", "roots", "protected", "agent_hosts", "notices")
_COUNTS: Final = ("seq", "requests", "count", "decision")
_NUMBERS: Final = ("time", "duration_s")

JOB_ID: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
"""A batch job's id: letters, digits, ``.``, ``_``, ``-``, starting with a letter
or a digit. It names the job's folder in a batch's output and its page in a
report, so it holds no ``/`` and is never ``.`` or ``..``: one check, used where
a jobs file is parsed (`governor.batch.jobs`) and wherever ``outcomes.jsonl``
is read back (`outcome_malformed`), so a crafted line cannot lead a reader
outside the folder."""

TIME_LIMIT: Final = 1e11
"""Seconds since the epoch past which a time is none a clock wrote (the year
5138): a time the reader could not print as a date."""


def _what(value: Any) -> str:
    """A value's JSON type in a few words, never the value (it may be huge, or a secret)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def malformed(record: Mapping[str, Any]) -> str | None:
    """What is wrong with a record's shape (the first field not as the writer
    writes it), or None when every field a reader relies on is."""
    for key in _TEXT:
        value = record.get(key)
        if value is not None and not isinstance(value, str):
            return f"its {key!r} is {_what(value)}, not a string"
    if record.get("prev") is not None and not isinstance(record["prev"], str):
        return f"its 'prev' is {_what(record['prev'])}, not a hash"
    for key in _MAPPINGS:
        value = record.get(key)
        if value is not None and not isinstance(value, dict):
            return f"its {key!r} is {_what(value)}, not an object"
    for key in _LISTS:
        value = record.get(key)
        if value is not None and not isinstance(value, list):
            return f"its {key!r} is {_what(value)}, not a list"
    for key in _COUNTS:
        value = record.get(key)
        if value is not None and (type(value) is not int or not 0 <= value < 2**63):
            return f"its {key!r} is {_what(value)}, not a count"
    for key in _NUMBERS:
        value = record.get(key)
        if value is None:
            continue
        if type(value) not in (int, float) or not math.isfinite(value):
            return f"its {key!r} is {_what(value)}, not a number of seconds"
        if not 0 <= value < TIME_LIMIT:
            return f"its {key!r} is {value:.3g} seconds: no clock wrote that"
    code = record.get("exit_code")
    if code is not None and (type(code) is not int or not -(2**31) <= code < 2**32):
        return f"its 'exit_code' is {_what(code)}, not an exit code"
    if record.get("kind") == "wire":  # a line rejected at the wire: the views print these
        subject = record.get("subject") or {}
        length, method = subject.get("length"), subject.get("method")
        if type(length) is not int or not 0 <= length < 2**63:
            return f"its subject's 'length' is {_what(length)}, not a count"
        if method is not None and not isinstance(method, str):
            return f"its subject's 'method' is {_what(method)}, not a string"
    tally = record.get("tally")
    if isinstance(tally, dict):
        for key, value in tally.items():
            if type(value) is not int or not 0 <= value < 2**63:
                return f"its tally's {key[:40]!r} is {_what(value)}, not a count"
    return None


def outcome_malformed(line: Mapping[str, Any]) -> str | None:
    """What is wrong with a batch's outcome line (``outcomes.jsonl``) as the
    readers use it, or None: its job (a `JOB_ID`: it names a folder), its status
    and reason, its duration, its tally."""
    job = line.get("job")
    if not isinstance(job, str) or not JOB_ID.fullmatch(job):
        what = "a string" if isinstance(job, str) else _what(job)
        return (
            f"its 'job' is {what} that is not a job id (1 to 128 letters, digits, '.', "
            "'_' or '-', starting with a letter or a digit): it would name a folder "
            "outside the output"
        )
    for key in ("status", "reason", "log", "changes"):
        value = line.get(key)
        if value is not None and not isinstance(value, str):
            return f"its {key!r} is {_what(value)}, not a string"
    duration = line.get("duration_s")
    if duration is not None and (
        type(duration) not in (int, float) or not 0 <= duration < TIME_LIMIT
    ):
        return f"its 'duration_s' is {_what(duration)}, not a number of seconds"
    acp = line.get("acp")
    if acp is None:
        return None
    if not isinstance(acp, dict):
        return f"its 'acp' is {_what(acp)}, not an object"
    tally = acp.get("tally")
    if tally is None:
        return None
    if not isinstance(tally, dict):
        return f"its tally is {_what(tally)}, not an object"
    for key, value in tally.items():
        if type(value) is not int or not 0 <= value < 2**63:
            return f"its tally's {key[:40]!r} is {_what(value)}, not a count"
    return None
