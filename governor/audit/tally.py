"""The tally: what an attempt's records say was asked, allowed, waited on,
refused, reported and done unasked (the seed `external.rs`'s counts).

One count per request: a permission request's several decisions (``cat a;
ls b``) are one ask; a file or command call is its own. Refused: any deny in
the group. Waited: a person decided (a grant is not a wait). Unasked and
reported records are counted apart. The audit log counts as it writes
(`Tallier`); `governor audit` counts what it reads back (`tally`): one rule,
so a log and its outcome agree.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final


@dataclass(frozen=True, slots=True)
class Tally:
    """What the agent asked, what was allowed, waited on, refused and reported."""

    asked: int = 0
    allowed: int = 0
    waited: int = 0
    refused: int = 0
    reported: int = 0
    unasked: int = 0


def tally(records: Iterable[Mapping[str, Any]]) -> Tally:
    """The tally of decision records, with the seed's semantics.

    One count per request: a permission request's several decisions (``cat a;
    ls b``) are one ask; a file or command call is its own. Refused: any deny in
    the group. Waited: a person decided (a grant is not a wait). Unasked records
    are counted apart.
    """
    counter = Tallier()
    for r in records:
        counter.add(r.get("kind"), r.get("verdict"), r.get("by"), r.get("request"))
    return counter.tally()


_REFUSED, _WAITING, _PERSON = 1, 2, 4


class Tallier:
    """`tally`, one record at a time: the audit log counts as it writes, so the
    end of an attempt does not walk (or parse) tens of thousands of records."""

    __slots__ = ("_alone", "_groups", "_reported", "_unasked")

    def __init__(self) -> None:
        self._groups: dict[Any, int] = {}  # request -> _REFUSED | _WAITING | _PERSON flags
        self._alone = 0  # records without a request id: each an ask of its own
        self._reported = 0
        self._unasked = 0

    def add(self, kind: Any, verdict: Any, by: Any, request: Any) -> None:
        """Count one record (its ``kind``, ``verdict``, ``by`` and ``request``)."""
        if kind == "unasked":
            self._unasked += 1
            return
        if verdict == "reported" or kind == "reported":
            self._reported += 1
            return
        if kind not in _ASKED_KINDS:
            return
        flags = 0
        if verdict == "deny":
            flags = _REFUSED
        elif verdict == "approval":
            flags = _WAITING | _PERSON
        if by == "person":
            flags |= _PERSON
        if request is None:
            self._alone += 1
            key: Any = ("#", self._alone)
        elif isinstance(request, (str, int, float)):
            # The value's type is part of the key, as in its JSON (1, 1.0, true
            # and "1" are different requests).
            key = (type(request), request) if type(request) is not int else request
        else:
            key = ("json", json.dumps(request, sort_keys=True))
        self._groups[key] = self._groups.get(key, 0) | flags

    def tally(self) -> Tally:
        """The counts so far."""
        refused = waiting = waited = 0
        for flags in self._groups.values():
            refused += flags & _REFUSED
            waiting += bool(flags & (_REFUSED | _WAITING))
            waited += bool(flags & _PERSON)
        return Tally(
            asked=len(self._groups),
            allowed=len(self._groups) - waiting,
            waited=waited,
            refused=refused,
            reported=self._reported,
            unasked=self._unasked,
        )


_ASKED_KINDS: Final = frozenset({"permission", "read", "write", "terminal", "elicitation"})
"""The record kinds that stand for something the agent asked."""
