"""What a request handler asks of the gate: the seam between them.

The handlers (`governor.gate.file_requests`, `governor.gate.terminal_requests`)
build an action, have it governed once, and act on the ruling; the gate
(`governor.gate.gatekeeper.Gate`) builds them and satisfies `Governs`. They
name this protocol, never the gate, so that the import graph runs one way:
``gatekeeper -> handlers -> handler_seam``. With the handlers naming the gate,
the gate and its handlers imported each other (a loop `tests/governor/test_rooms.py`
now refuses), and a handler could reach anything of the gate's -- its
approver, its routes, its other handlers -- where it needs only these.

Rules of this file: protocols only, no behaviour; a member is here because a
handler uses it (the governed request's four steps stay in `Gate.govern`).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from governor.audit.log import AuditLog
    from governor.ending.attribution import Carried
    from governor.gate.ruling import Choose, Ruling, Settle
    from governor.policies.decide import Decision
    from governor.policies.policy import Policy


class Governs(Protocol):
    """The gate as a handler sees it: the attempt's policy, its log, what was
    carried out, the session, and the one way a request is ruled."""

    @property
    def policy(self) -> Policy:
        """The attempt's policy (what the handler builds its decision from)."""
        ...

    @property
    def audit(self) -> AuditLog:
        """The attempt's log: an allowed action's effects (a diff, an exit) are
        recorded after it, masked with its masker."""
        ...

    @property
    def carried(self) -> Carried:
        """What the gate carried out (reads, writes, terminals), for the `Ending`."""
        ...

    @property
    def session_id(self) -> str | None:
        """The attempt's ACP session (None before ``session/new``)."""
        ...

    @property
    def failure(self) -> str | None:
        """Why the gate failed closed (None while it has not)."""
        ...

    def check_session(self, session_id: str) -> None:
        """Refuse a request for a session other than the attempt's."""
        ...

    def govern(
        self,
        kind: str,
        subject: dict[str, Any],
        shown: str,
        decision: Decision,
        detail: dict[str, Any],
        choose: Choose | None = None,
        *,
        settle: Settle | None = None,
        overrules: Ruling | None = None,
    ) -> Ruling | Awaitable[Ruling]:
        """The ruling on one request, recorded before it is returned."""
        ...

    async def ruled(
        self,
        kind: str,
        subject: dict[str, Any],
        shown: str,
        decision: Decision,
        detail: dict[str, Any],
        *,
        overrules: Ruling | None = None,
    ) -> Ruling:
        """`govern`, the ruling awaited."""
        ...

    def fail(self, why: str) -> None:
        """Fail closed: refuse everything from now on and end the turn."""
        ...
