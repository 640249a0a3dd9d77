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
from collections import OrderedDict
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
        counter.take(r)
    return counter.tally()


_REFUSED, _WAITING, _PERSON = 1, 2, 4


OPEN_GROUPS: Final = 256
"""Requests whose records are still gathered: the last ones seen. The gate writes
a request's records one after another, so a request that has dropped out of the
last 256 is complete: it is counted and forgotten, and a long attempt's tally
takes no more memory than a short one's."""


class Tallier:
    """`tally`, one record at a time: the audit log counts as it writes, so the
    end of an attempt does not walk (or parse) tens of thousands of records."""

    __slots__ = ("_alone", "_closed", "_groups", "_reported", "_unasked")

    def __init__(self) -> None:
        # request -> _REFUSED | _WAITING | _PERSON flags, for the `OPEN_GROUPS` last
        self._groups: OrderedDict[Any, int] = OrderedDict()
        self._closed = [0, 0, 0, 0]  # asked, refused, waiting, waited of the forgotten
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
        if kind not in ASKED_KINDS:
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
        groups = self._groups
        if key in groups:
            groups[key] |= flags
            groups.move_to_end(key)
            return
        groups[key] = flags
        if len(groups) > OPEN_GROUPS:
            _count(self._closed, groups.popitem(last=False)[1])

    def take(self, record: Mapping[str, Any]) -> None:
        """Count one record read back as `tally` counts it: a ``repeated`` record
        as the refused requests it stands for."""
        if record.get("kind") == "repeated":
            requests = record.get("requests") if record.get("of") in ASKED_KINDS else 0
            self.add_refused(requests if isinstance(requests, int) and requests > 0 else 0)
            return
        self.add(record.get("kind"), record.get("verdict"), record.get("by"), record.get("request"))

    def add_refused(self, requests: int) -> None:
        """Count ``requests`` refused requests whose records were counted, not
        written (a ``repeated`` record: `governor.audit.thinning`)."""
        closed = self._closed  # asked, refused, not allowed; none waited on a person
        closed[0] += requests
        closed[1] += requests
        closed[2] += requests

    def tally(self) -> Tally:
        """The counts so far."""
        counts = list(self._closed)
        for flags in self._groups.values():
            _count(counts, flags)
        asked, refused, waiting, waited = counts
        return Tally(
            asked=asked,
            allowed=asked - waiting,
            waited=waited,
            refused=refused,
            reported=self._reported,
            unasked=self._unasked,
        )


def _count(counts: list[int], flags: int) -> None:
    """Add one request's flags to (asked, refused, waiting, waited)."""
    counts[0] += 1
    counts[1] += flags & _REFUSED
    counts[2] += bool(flags & (_REFUSED | _WAITING))
    counts[3] += bool(flags & _PERSON)


ASKED_KINDS: Final = frozenset(
    {"permission", "read", "write", "terminal", "elicitation", "network"}
)
"""The record kinds that stand for something the agent asked."""
