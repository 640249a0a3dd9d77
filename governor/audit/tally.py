"""The tally: what an attempt's records say was asked, allowed, waited on,
refused, failed, reported and done unasked (the seed `external.rs`'s counts).

The words, each defined once (`WORDS` holds the same text):

- **asked**: the requests the agent made to the governor -- permission
  requests, file reads and writes, terminal commands, connections through the
  proxy, forms for a person -- one per request however many parts it was
  decided in (a permission for ``cat a; ls b`` is one).
- **allowed**: the asked requests allowed in full, whoever allowed them (the
  capability, a rule, a person, a grant).
- **refused**: the asked requests of which any part was refused by a rule,
  the capability, the ceiling, a protected path, a person, or nobody there to
  answer (``repeated`` records count the refusals they stand for).
- **failed**: the asked requests no rule refused that could not be carried
  out: a name that does not resolve, a host that refused the connection or did
  not answer, a request answered ``cancelled`` because the turn was cancelled
  or over, a request refused because the attempt had failed closed. Their records carry ``failed`` (the word for what happened:
  `FAILURES`); a record of an older log without it reads as before (a DNS
  failure there is refused). A failure is the machine's or the moment's, not
  the policy's: ``--fail-on refused`` does not count it, and a page groups
  repeated failures apart from refusals.
- **waited**: the asked requests put to a person: answered by one (allow once,
  allow always, refuse, a form filled in or declined) or left waiting for one
  when the attempt paused. A request a person's earlier "always" (a grant)
  covers is allowed without a wait; an ask refused because nobody was there
  (unattended) is refused without one.
- **reported**: what the agent says it did that needed no asking: a tool call
  it reports completed that never came through the governor and changes
  nothing (a read, a search), and a change it made itself under a permission it
  was allowed (``changed``). Not asked.
- **unasked**: what was changed without asking: a tool call the agent reports
  completed that changes something (edit, delete, move, execute) and never came
  through the governor, and each change in the roots that no governed write,
  command or allowed permission explains (the workspace's snapshot before and
  after). Not asked.

So ``asked = allowed + refused + failed + pending``, where pending is the request still
waiting for a person when the attempt paused (needs_approval); ``waited <=
asked``; reported and unasked are counted apart from asked. After a person
answers ``o`` (allow once) to one ask and ``a`` (allow always) to another,
both are waited and allowed, and the requests the "always" then covers are
allowed and not waited.

A record's ``verdict`` is its word here: ``allow``, ``deny``, ``approval``
(pending), ``reported``, ``unasked`` (`verdict_of` reads older logs, whose
unasked records said ``reported``, and gives a ``deny`` with ``failed`` as
``failed``). The audit log counts as it writes
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
    failed: int = 0
    reported: int = 0
    unasked: int = 0


def tally(records: Iterable[Mapping[str, Any]]) -> Tally:
    """The tally of an attempt's records, as the module docstring defines it."""
    counter = Tallier()
    for r in records:
        counter.take(r)
    return counter.tally()


_REFUSED, _WAITING, _PERSON, _FAILED = 1, 2, 4, 8


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
        self._closed = [0, 0, 0, 0, 0]  # asked, refused, waiting, waited, failed of the forgotten
        self._alone = 0  # records without a request id: each an ask of its own
        self._reported = 0
        self._unasked = 0

    def add(self, kind: Any, verdict: Any, by: Any, request: Any, failed: Any = None) -> None:
        """Count one record (its ``kind``, ``verdict``, ``by``, ``request`` and
        ``failed``)."""
        if kind == "unasked" or verdict == "unasked":
            self._unasked += 1
            return
        if verdict == "reported" or kind == "reported":
            self._reported += 1
            return
        if kind not in ASKED_KINDS:
            return
        flags = 0
        if verdict == "deny":
            flags = _FAILED if failed else _REFUSED
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
            requests = requests if isinstance(requests, int) and requests > 0 else 0
            if record.get("failed"):
                self.add_failed(requests)
            else:
                self.add_refused(requests)
            return
        self.add(
            record.get("kind"), record.get("verdict"), record.get("by"), record.get("request"),
            record.get("failed"),
        )  # fmt: skip

    def add_refused(self, requests: int) -> None:
        """Count ``requests`` refused requests whose records were counted, not
        written (a ``repeated`` record: `governor.audit.repeated_refusals`)."""
        closed = self._closed  # asked, refused, not allowed; none waited on a person
        closed[0] += requests
        closed[1] += requests
        closed[2] += requests

    def add_failed(self, requests: int) -> None:
        """Count ``requests`` failed requests whose records were counted, not
        written (a ``repeated`` record of failures)."""
        closed = self._closed  # asked, failed, not allowed
        closed[0] += requests
        closed[2] += requests
        closed[4] += requests

    def tally(self) -> Tally:
        """The counts so far."""
        counts = list(self._closed)
        for flags in self._groups.values():
            _count(counts, flags)
        asked, refused, waiting, waited, failed = counts
        return Tally(
            asked=asked,
            allowed=asked - waiting,
            waited=waited,
            refused=refused,
            failed=failed,
            reported=self._reported,
            unasked=self._unasked,
        )


def _count(counts: list[int], flags: int) -> None:
    """Add one request's flags to (asked, refused, waiting, waited, failed): a
    request refused by a rule and also failed (one part each) is refused."""
    counts[0] += 1
    counts[1] += flags & _REFUSED
    counts[2] += bool(flags & (_REFUSED | _WAITING | _FAILED))
    counts[3] += bool(flags & _PERSON)
    counts[4] += bool(flags & _FAILED) and not flags & (_REFUSED | _WAITING)


ASKED_KINDS: Final = frozenset(
    {"permission", "read", "write", "terminal", "elicitation", "network", "mcp"}
)
"""The record kinds that stand for something the agent asked."""


WORDS: Final = {
    "asked": "requests the agent made to the governor (permissions, file reads and writes, "
    "terminal commands, connections, forms), one per request however many parts it was "
    "decided in",
    "allowed": "asked requests allowed in full, whoever allowed them (the capability, a rule, "
    "a person, a grant)",
    "waited": "asked requests put to a person: answered by one (once, always, refuse, a form) "
    "or left waiting for one when the attempt paused; a grant's cover and an unattended "
    "refusal are not waits",
    "refused": "asked requests of which any part was refused: by a rule, the capability, the "
    "ceiling, a protected path, a person, or nobody there to answer",
    "failed": "asked requests no rule refused that could not be carried out: a name that does "
    "not resolve, a host that refused the connection or did not answer, a request answered "
    "cancelled because the turn was over",
    "reported": "what the agent says it did that needed no asking: a completed tool call that "
    "changes nothing and never came through the governor, a change it made itself under a "
    "permission it was allowed; not asked",
    "unasked": "changes made without asking: a completed edit, delete, move or execute tool "
    "call that never came through the governor, a change in the roots nothing governed "
    "explains; not asked",
}
"""Each word of the tally, in the order the tally shows them (`Tally`'s fields)."""


FAILURES: Final = {
    "dns": "the name does not resolve",
    "refused": "the host refused the connection",
    "timeout": "the host did not answer in time",
    "unreachable": "no route to the host",
    "cancelled": "the turn was cancelled or over before the request was answered",
    "closed": "the attempt had failed closed (its log unwritable, its sandbox broken, its "
    "model API unreachable): everything after was refused",
}
"""The words of a record's ``failed`` field: what happened to a request no rule refused."""


def verdict_of(record: Mapping[str, Any]) -> Any:
    """A record's verdict as the tally counts it: an ``unasked`` record's is
    ``unasked`` (older logs wrote ``reported``), a refusal with ``failed`` (no
    rule refused it: it could not be done) is ``failed``."""
    if record.get("kind") == "unasked":
        return "unasked"
    if record.get("verdict") == "deny" and record.get("failed"):
        return "failed"
    return record.get("verdict")
