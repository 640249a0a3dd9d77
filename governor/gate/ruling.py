"""A request's ruling, and acting on it now or once it is made.

Rules of this file: a `Ruling` is the gate's final, recorded word on one
request; it is made by `governor.gate.gatekeeper.Gate.govern` and nowhere else. A handler
acts on it through `then`, which runs the action in the same pass when the
ruling is made at once and in a later task otherwise; `then` and `Gate.govern`
/ `Gate.ruled` are the only places that know the two apart.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final, TypeVar, cast

from governor.gate.approver import Settled
from governor.policies.rules import Verdict

REFUSED: Final = -32001
"""Our answer to a refused fs, terminal or elicitation request (ACP defines no code for it)."""


@dataclass(frozen=True, slots=True)
class Ruling:
    """The final word on one request, as recorded: the verdict, who gave it and
    why, the option answered (permissions and elicitations)."""

    request: int
    verdict: Verdict
    by: str
    reason: str
    option: str | None = None
    seq: int | None = None
    """The seq of its (last) record in the audit log."""

    @property
    def allowed(self) -> bool:
        """Whether the request may be carried out."""
        return self.verdict is Verdict.ALLOW


Choose = Callable[[Settled], tuple[Settled, str | None]]
"""How a request picks the option it answers: the settled verdict -> (final, option id)."""

Settle = Callable[[], Awaitable[Settled]]
"""Who settles an ask when it is not the approver (an elicitation's person)."""

T = TypeVar("T")


def then(ruling: Ruling | Awaitable[Ruling], act: Callable[[Ruling], T]) -> T | Awaitable[T]:
    """`act` on the ruling now when it is made, or once it is (the fast path's
    other half: see the module docstring)."""
    if isinstance(ruling, Ruling):
        return act(ruling)

    async def later() -> T:
        answer: Any = act(await ruling)
        if inspect.isawaitable(answer):
            answer = await answer
        return cast(T, answer)

    return later()
