"""What the MCP relay and the governor's own tools ask of the gate.

The relay (`governor.mcp.relay`) has a server's call ruled, records what the
servers list, and puts a server's form to the person; the governor's own tools
(`governor.mcp.own_tools`) hand a ``read``, ``write`` or ``run`` to the gate's
own handlers and end the turn on ``blocked``. `McpGate` is that and no more:
the handlers' seam (`governor.gate.handler_seam.Governs`) and the few members
these two use besides. `governor.gate.gatekeeper.Gate` satisfies it; whoever
builds the attempt hands the gate over, and nothing here names it.

Rules of this file: a protocol only; a member is here because the relay or the
tools use it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

from governor.gate.handler_seam import Governs

if TYPE_CHECKING:
    import trio

    from governor.gate import elicitation
    from governor.gate.approver import Approvals
    from governor.gate.file_requests import FileRequests
    from governor.gate.terminal_requests import TerminalRelay


class McpGate(Governs, Protocol):
    """The gate as the MCP relay and the governor's own tools see it."""

    @property
    def approvals(self) -> Approvals:
        """Whether a person is there to fill a server's form (its approver)."""
        ...

    @property
    def cancelled(self) -> bool:
        """Whether the turn is over: an HTTP server's connection judged after it
        (`governor.confine.egress.judge`) cannot fail the attempt."""
        ...

    @property
    def pause_requested(self) -> trio.Event:
        """Set to end the turn (a ``blocked`` call ends it as a pause does)."""
        ...

    @property
    def on_event(self) -> Callable[[str, dict[str, Any]], None]:
        """Who listens (the OTel trace): a governed call's answer is told to it."""
        ...

    @property
    def files(self) -> FileRequests:
        """The gate's ``fs/*`` handler, which the tools' ``read`` and ``write`` go through."""
        ...

    @property
    def relay(self) -> TerminalRelay | None:
        """The gate's ``terminal/*`` handler (None without terminals: no ``run``)."""
        ...

    def blocked(self, reason: str) -> None:
        """The agent's ``blocked`` tool was called: the `Ending` keeps its first
        reason, and the turn ends as a pause does."""
        ...

    def create_elicitation(
        self, req: elicitation.ElicitationRequest, *, origin: str | None = None
    ) -> elicitation.ElicitationReply | Awaitable[elicitation.ElicitationReply]:
        """A form put to the person, governed like any request."""
        ...
