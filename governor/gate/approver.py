"""Who answers an ``ask``: nobody (refuse), nobody yet (pause), or a callback.

The approver is consulted only for ``ask`` verdicts; allow and deny never reach
it. Its answer is one of `APPROVALS`:

- ``once``: allow this one request (recorded as decided by a person);
- ``always``: allow this and every identical request for the rest of the
  attempt (this one recorded as decided by a person, the later ones as
  covered by a grant);
- ``refuse``: deny it (by a person when one is there -- a person or a
  callback -- else ``unattended``);
- ``pause``: deny it *and* end the attempt as ``needs_approval`` with the
  request recorded, so that a person can decide later and run again.

`Approvals` is the gate's second step: it holds the attempt's approver, the
grants a person gave, and the turn's cancellation (after ``session/cancel``,
every pending and later ask is answered cancelled, whatever the approver does).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

import trio

from governor.policies import by as who
from governor.policies.decide import Decision
from governor.policies.rules import Verdict

Approval = Literal["once", "always", "refuse", "pause"]
APPROVALS: Final = ("once", "always", "refuse", "pause")


@dataclass(frozen=True, slots=True)
class Ask:
    """What a person would be shown: the kind of request, its subject and why it asks."""

    kind: str
    """permission, read, write or terminal."""
    subject: str
    """The command, the path, or the tool call's title."""
    reason: str
    rule: str
    detail: dict[str, Any] = field(default_factory=dict)
    """More to show: the tool kind, raw input, a diff of a write."""
    key: str = ""
    """The request whole (`request_key`): what a person's decision on a paused
    request is matched on when the attempt goes on."""


VOLATILE: Final = ("tool_call",)
"""Subject fields an agent asking the same thing again may change: its tool
call's id (a new session makes new ids)."""


def request_key(kind: str, subject: Mapping[str, Any], detail: Mapping[str, Any]) -> str:
    """A digest of one request whole: its kind, its subject (but its tool call's
    id) and what more it brings (a write's content, a permission's raw input).
    Two requests with one key ask the same thing; what is only shown (a title, a
    path) is not enough, or a decision on one request would grant another."""
    whole = {
        "kind": kind,
        "subject": {k: v for k, v in subject.items() if k not in VOLATILE},
        "detail": dict(detail),
    }
    text = json.dumps(whole, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def whole_shown(shown: str, detail: Mapping[str, Any]) -> str:
    """What a person deciding a paused request later is shown of it: what the
    gate shows (the command, the path), with what else its key holds that
    changes what runs (a command's environment, already masked, and its output
    limit): a person never approves a line whose other half they did not see."""
    more = [f"env {' '.join(map(str, detail['env']))}"] if detail.get("env") else []
    if detail.get("output_byte_limit") is not None:
        more.append(f"output limit {detail['output_byte_limit']} bytes")
    return f"{shown} ({'; '.join(more)})" if more else shown


class Approver(Protocol):
    """Decides ``ask`` verdicts."""

    name: str

    async def __call__(self, ask: Ask) -> Approval: ...


class Unattended:
    """Nobody is watching: every ask is refused."""

    name = "unattended"

    async def __call__(self, ask: Ask) -> Approval:
        return "refuse"


class Pause:
    """Nobody is watching now: the first ask ends the attempt as needs_approval."""

    name = "pause"

    async def __call__(self, ask: Ask) -> Approval:
        return "pause"


class Callback:
    """A library user's function (sync or async) of an `Ask`, returning an answer
    or a bool (True = once, False = refuse)."""

    name = "callback"

    def __init__(self, fn: Callable[[Ask], Approval | bool | Awaitable[Approval | bool]]) -> None:
        self.fn = fn

    async def __call__(self, ask: Ask) -> Approval:
        value = self.fn(ask)
        if inspect.isawaitable(value):
            value = await value
        if value is True:
            return "once"
        if value is False or value is None:
            return "refuse"
        if value not in APPROVALS:
            raise ValueError(
                f"an approver answered {value!r}; accepted: {', '.join(APPROVALS)} or a bool"
            )
        return value


class Granted:
    """A person's decision on a paused request, for the attempt's resumed part
    (`governor approve`, `governor resume`): the same request, when the agent
    asks it again (the same kind and subject), answered as the person decided
    (``once``: its first time; ``always``: every time; ``refuse``); any other
    ask goes to ``then`` (pause: the attempt pauses again on it).

    Only an ``ask`` reaches an approver: what the policy or the ceiling refuses
    is refused before, so a decision never widens the job."""

    name = "approval"

    def __init__(self, kind: str, key: str, answer: Approval, then: Approver) -> None:
        self.kind, self.key, self.answer, self.then = kind, key, answer, then
        self.used = 0

    async def __call__(self, ask: Ask) -> Approval:
        if ask.kind != self.kind or not self.key or ask.key != self.key:
            return await self.then(ask)
        self.used += 1
        if self.answer == "once" and self.used > 1:
            return await self.then(ask)
        return self.answer


APPROVER_WORDS: Final[dict[str, Callable[[], Approver]]] = {"unattended": Unattended, "pause": Pause}
"""The approvers a library caller may name by word, as ``--approvals`` does."""


def approver_problem(value: object) -> str | None:
    """Why `value` cannot be an attempt's approver (None when it can): a
    callable of an `Ask`, an `Approver`, or a word of `APPROVER_WORDS`."""
    if value is None or callable(value) or value in APPROVER_WORDS:
        return None
    words = " or ".join(f"{w!r}" for w in APPROVER_WORDS)
    if value == "person":
        return (
            "approver='person' is the command line's terminal prompt; from the library "
            "pass a function of an Ask (return 'once', 'always', 'refuse' or a bool), "
            f"or {words}"
        )
    return f"approver={value!r} is not an approver: pass a function of an Ask, or {words}"


def for_on_ask(on_ask: str) -> Approver:
    """The approver a policy's ``on_ask`` names when no other is given."""
    return Pause() if on_ask == "pause" else Unattended()


Settled = tuple[Verdict, str, str]
"""(verdict, by, reason): a decision once the approver, a grant or the state of
the attempt has had its say."""


class Approvals:
    """One attempt's approver, its grants, and the turn's cancellation."""

    def __init__(self, approver: Approver) -> None:
        self.approver = approver
        self.grants: set[tuple[str, str]] = set()
        self.carried: dict[tuple[str, str], int] = {}
        """What a person's yes to a permission also covers, once each: the command
        it runs and the files it names (key -> seq of that yes)."""
        self.cancelled = False
        self._cancel_event = trio.Event()

    @staticmethod
    def _key(
        kind: str, subject: dict[str, Any], shown: str, detail: Mapping[str, Any] | None = None
    ) -> tuple[str, str]:
        """What an "always" covers: what the governor knows a request does, never
        what the agent chose to show. A command is the same command however it
        comes back (granted in a permission request, it is the terminal/create
        after it); a permission of no command covers the same title of its kind
        of tool on the same paths, or, naming none, the same request whole (but
        its tool call's id): the title is the agent's word, never enough alone
        (keyed on it only, "Edit notes" allowed always would allow any tool call
        the agent titled so), and never left out either (a request that names
        nothing else would then be like every other such request)."""
        if kind == "terminal" or "command" in subject:
            # what else changes what a command does (its env's values, as a digest,
            # and its output limit) is part of it: an "always" on one environment
            # is none on another (a permission's always, naming no environment,
            # covers the terminal it runs once, by `carry`)
            more = {k: (detail or {}).get(k) for k in ("env_digest", "output_byte_limit")}
            if kind == "terminal" and any(v is not None for v in more.values()):
                return ("command", f"{shown}\x00{json.dumps(more, sort_keys=True)}")
            return ("command", shown)
        if kind != "permission":
            return (kind, shown)
        paths = subject.get("paths")
        if paths:
            same = {"tool_kind": subject.get("tool_kind"), "paths": sorted(map(str, paths)),
                    "title": subject.get("title")}  # fmt: skip
        else:
            same = {k: v for k, v in subject.items() if k not in VOLATILE}
        return (kind, json.dumps(same, sort_keys=True, default=str, ensure_ascii=False))

    def granted(
        self, kind: str, subject: dict[str, Any], shown: str, detail: Mapping[str, Any] | None = None
    ) -> bool:
        """Whether a person's "always" covers this request."""
        return self._key(kind, subject, shown, detail) in self.grants

    def carry(self, subject: dict[str, Any], seq: int | None) -> None:
        """A person allowed a permission (record ``seq``): the governed requests that
        carry out its tool call (its command's ``terminal/create``, its writes of
        the paths it named) are not asked again. What the last yes covers replaces
        what the one before covered: a yes is about one action."""
        if seq is None:
            return
        self.carried.clear()
        command = subject.get("command")
        if isinstance(command, str):
            self.carried[("command", command)] = seq
        for path in subject.get("paths") or ():
            if isinstance(path, str) and path.startswith("/"):
                self.carried[("write", os.path.normpath(path))] = seq

    def carried_by(self, kind: str, subject: dict[str, Any], shown: str) -> int | None:
        """The seq of the person's yes that covers this request (used up), or None."""
        if kind not in ("terminal", "write"):
            return None
        key = ("command", shown) if kind == "terminal" else ("write", shown)
        return self.carried.pop(key, None)

    async def settle(self, kind: str, subject: dict[str, Any], shown: str, decision: Decision,
                     detail: dict[str, Any]) -> Settled:  # fmt: skip
        """The final verdict of an ``ask``, once the approver has answered."""
        key = request_key(kind, subject, detail)
        answer = await self._answer(Ask(kind, shown, decision.reason, decision.rule, detail, key))
        if answer is None:
            return (
                Verdict.DENY,
                who.CANCELLED,
                f"the turn was cancelled while waiting for approval ({decision.reason})",
            )
        if answer == "once":
            return Verdict.ALLOW, who.PERSON, f"allowed once by a person ({decision.reason})"
        if answer == "always":
            self.grants.add(self._key(kind, subject, shown, detail))
            return (
                Verdict.ALLOW,
                who.PERSON,
                f"allowed by a person for the rest of this attempt ({decision.reason})",
            )
        if answer == "pause":
            return Verdict.ASK, who.UNATTENDED, f"waiting for a person's approval: {decision.reason}"
        person = self.approver.name in ("person", "callback", "approval")
        nobody = "a person" if person else "nobody is there to approve (unattended)"
        by = who.PERSON if person else who.UNATTENDED
        return Verdict.DENY, by, f"refused: {decision.reason}; {nobody}"

    async def _answer(self, ask: Ask) -> Approval | None:
        """The approver's answer, or None when the turn is cancelled first."""
        answer: Approval | None = None
        async with trio.open_nursery() as nursery:

            async def approve() -> None:
                nonlocal answer
                answer = await self.approver(ask)
                nursery.cancel_scope.cancel()

            async def cancelled() -> None:
                await self._cancel_event.wait()
                nursery.cancel_scope.cancel()

            nursery.start_soon(approve)
            nursery.start_soon(cancelled)
        return answer

    def cancel(self) -> None:
        """After ``session/cancel``: pending and later asks are answered cancelled."""
        self.cancelled = True
        self._cancel_event.set()
