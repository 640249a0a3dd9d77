"""Who answers an ``ask``: nobody (refuse), nobody yet (pause), or a callback.

The approver is consulted only for ``ask`` verdicts; allow and deny never reach
it. Its answer is one of `ANSWERS`:

- ``once``: allow this one request (recorded as decided by a person);
- ``always``: allow this and every identical request for the rest of the
  attempt (recorded as a grant);
- ``refuse``: deny it;
- ``pause``: deny it *and* end the attempt as ``needs_approval`` with the
  request recorded, so that a person can decide later and run again.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol

Answer = Literal["once", "always", "refuse", "pause"]
ANSWERS: Final = ("once", "always", "refuse", "pause")


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


class Approver(Protocol):
    """Decides ``ask`` verdicts."""

    name: str

    async def __call__(self, ask: Ask) -> Answer: ...


class Unattended:
    """Nobody is watching: every ask is refused."""

    name = "unattended"

    async def __call__(self, ask: Ask) -> Answer:
        return "refuse"


class Pause:
    """Nobody is watching now: the first ask ends the attempt as needs_approval."""

    name = "pause"

    async def __call__(self, ask: Ask) -> Answer:
        return "pause"


class Callback:
    """A library user's function (sync or async) of an `Ask`, returning an answer
    or a bool (True = once, False = refuse)."""

    name = "callback"

    def __init__(self, fn: Callable[[Ask], Answer | bool | Awaitable[Answer | bool]]) -> None:
        self.fn = fn

    async def __call__(self, ask: Ask) -> Answer:
        value = self.fn(ask)
        if inspect.isawaitable(value):
            value = await value
        if value is True:
            return "once"
        if value is False or value is None:
            return "refuse"
        if value not in ANSWERS:
            raise ValueError(
                f"an approver answered {value!r}; accepted: {', '.join(ANSWERS)} or a bool"
            )
        return value


def for_on_ask(on_ask: str) -> Approver:
    """The approver a policy's ``on_ask`` names when no other is given."""
    return Pause() if on_ask == "pause" else Unattended()
