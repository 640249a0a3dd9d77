"""One agent connection to one MCP server: every message between them, relayed
or answered here (`RelaySession`), and how a session reaches its server
(`Transport`: a sandboxed child's stdio, `StdioServer`, or the governor's own
HTTP session, `governor.mcp.http.HttpServer`).

`governor.mcp.relay` (the sockets, the sessions' bounds, the records of what
was offered) admits a connection and hands it here; a session asks of its
relay only what `Relaying` names, so the relay imports this file and never
the other way.

Rules of this file:

- **Decided before forwarded**: a ``tools/call``, ``prompts/get`` or
  ``resources/read`` goes through `Gate.ruled` (kind ``mcp``: the engine's
  `governor.policies.mcp` rules, the approver, the audit record written before the
  answer) and reaches the server only when allowed; a refusal is answered by
  the relay (`governor.mcp.wire.refusal`) and the server never sees the call.
- **Only MCP's notifications are forwarded**: an agent's message without an
  id is passed on only when its method is ``notifications/*`` (a
  ``tools/call`` sent as a notification would be carried out, undecided,
  by a server that runs notifications as JSON-RPC says).
- **Only requests the relay knows are forwarded**: one with an id whose
  method is neither governed nor one of `wire.PASSED` (``notifications/tools/call``
  with an id, a later MCP version's method) is refused, recorded (kind
  ``mcp``, rule ``mcp.unknown-method``) and answered ``METHOD_NOT_FOUND``.
- **Only answers to what was forwarded**: a server's response whose id the
  relay is not waiting for (a refused call's, a made-up one) is dropped, and
  so is every client response (no server request is passed on to the agent).
- **What the policy denies is not offered**: a ``tools/list`` result loses
  the tools whose bare call the policy refuses.
- **A server's requests are decided here, never passed to the agent**:
  ``roots/list`` is answered with the job's roots (what the server's sandbox
  shows; never what the agent says, whose ``roots`` capability and
  ``list_changed`` notifications stop here), ``ping`` is answered, an
  ``elicitation/create`` goes through the gate like the agent's own
  (`governor.gate.elicitation`: declined unattended, put to a person with
  ``--approvals person``, recorded), and ``sampling/createMessage`` or any
  other request is refused and recorded (sampling would let a server drive
  the agent's model). Sampling is never offered in the ``initialize`` the
  server gets, elicitation only when a person answers.
- **The server's input never ends the attempt**: a line that is not JSON-RPC
  is dropped and counted, a line over `wire.MAX_LINE` ends that session, a
  request the server leaves unanswered past its ``timeout`` is answered an
  error, and a server that exits answers what is pending with its last words.
  The agent reads each as an error of that one server.
"""

from __future__ import annotations

import contextlib
import importlib.util
import sys
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

import trio

from governor.acp.dispatch import RpcError
from governor.audit.log import recorded_input
from governor.gate import elicitation
from governor.mcp.servers import Unsaid
from governor.policies import by as who
from governor.policies.decide import Decision, decide_call
from governor.policies.mcp import McpCall, McpServer
from governor.policies.rules import Verdict
from governor.sandbox.run.spawn import Child

if TYPE_CHECKING:
    from governor.mcp import wire
    from governor.mcp.gate_seam import McpGate
    from governor.policies.policy import Policy


def imported_on_first_use(name: str) -> Any:
    """The module ``name``, executed when one of its names is first read
    (`importlib.util.LazyLoader`); the module itself if it is imported already
    (never a second copy of its classes)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.loader is not None, name
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


if not TYPE_CHECKING:
    # `wire` validates with the MCP SDK's models, and `import mcp` brings its
    # client, server and starlette: paid by a relay's first message, not by
    # every `governor run`, most of which name no MCP server.
    wire = imported_on_first_use("governor.mcp.wire")

EXIT_GRACE: Final = 2.0
"""Seconds a server gets to exit on its own once the agent closed its side."""
MAX_PENDING: Final = 1024
"""Requests one session may have in flight; more are answered an error."""
STDERR_TAIL: Final = 4096


class Relaying(Protocol):
    """What a session asks of its relay (`governor.mcp.relay.McpRelay`)."""

    @property
    def gate(self) -> McpGate:
        """The gate a governed request and a server's form go through."""
        ...

    @property
    def policy(self) -> Policy:
        """The job's policy: its MCP rules and its roots."""
        ...

    @property
    def dropped(self) -> dict[str, int]:
        """Server name -> messages dropped (malformed, or answers never asked for)."""
        ...

    def tools_seen(self, server: McpServer, names: list[str], hidden: set[str]) -> None:
        """A ``tools/list`` result, recorded unless it was already."""
        ...

    def problem(self, why: str) -> None:
        """What went wrong with a server, for the outcome's notices."""
        ...


def _is_error(result: Any) -> bool:
    return isinstance(result, dict) and result.get("isError") is True


@dataclass
class _Pending:
    method: str
    ident: Any
    request: int | None = None
    """The gate's number for a governed request (its decision record's ``request``)."""
    timer: trio.CancelScope = field(default_factory=trio.CancelScope)


class Transport(Protocol):
    """How a session reaches its server: a child's stdio or an HTTP session."""

    async def receive(self, deliver: Callable[[wire.Message], Awaitable[None]]) -> str:
        """Deliver the server's messages until it ends; why it ended, in words
        (what the requests still pending are answered)."""

    async def send(self, body: Mapping[str, Any]) -> None:
        """One message to the server (dropped once it is gone: `receive` says why)."""

    async def close(self) -> None:
        """The agent hung up: let the server end, bounded."""


class StdioServer:
    """A sandboxed server process's stdio as a `Transport`."""

    def __init__(
        self, server: McpServer, child: Child, problem: Callable[[str], None], unsaid: Unsaid
    ) -> None:
        self.server = server
        self.child = child
        self._unsaid = unsaid
        """Its secrets, masked in each line and in its last words (`governor.mcp.servers.Unsaid`)."""
        self._report = problem
        self._lock = trio.Lock()
        self._stderr = bytearray()

    def _problem(self, why: str) -> None:
        self._report(self._unsaid.text(why))

    async def receive(self, deliver: Callable[[wire.Message], Awaitable[None]]) -> str:
        stdout = self.child.stdout
        assert stdout is not None
        lines = wire.Lines()
        why = f"the MCP server {self.server.name} ended"
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._drain_stderr)
            try:
                while data := await stdout.receive_some(65536):
                    for line in lines.feed(data):
                        await deliver(wire.read_message(self._unsaid.line(line)))
            except wire.LineTooLong as e:
                why = f"the MCP server {self.server.name} sent {e}; its session was ended"
                self._problem(why)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            nursery.cancel_scope.cancel()
        tail = self._stderr.decode("utf-8", "replace").strip().splitlines()[-1:] or [""]
        return self._unsaid.text(f"{why}: {tail[0][:300]}" if tail[0] else why)

    async def send(self, body: Mapping[str, Any]) -> None:
        stdin = self.child.stdin
        if stdin is None:
            return
        # a server gone: its stdout's end says why
        async with self._lock:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stdin.send_all(wire.encode(body))

    async def close(self) -> None:
        stdin = self.child.stdin
        if stdin is not None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await stdin.aclose()
        with trio.move_on_after(EXIT_GRACE):
            await self.child.wait()

    async def _drain_stderr(self) -> None:
        stderr = self.child.stderr
        if stderr is None:
            return
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            while data := await stderr.receive_some(65536):
                self._stderr += data
                del self._stderr[:-STDERR_TAIL]


class RelaySession:
    """One agent connection to one server (see the module docstring)."""

    def __init__(
        self, relay: Relaying, server: McpServer, client: trio.SocketStream, transport: Transport
    ) -> None:
        self.relay = relay
        self.server = server
        self.client = client
        self.transport = transport
        self.pending: dict[str, _Pending] = {}
        self.asking = 0
        """Server elicitations waiting for the gate (a person may take a while)."""
        self._to_client_lock = trio.Lock()
        self._nursery: trio.Nursery | None = None

    async def run(self) -> None:
        """Relay until the agent or the server hangs up."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._from_server)
            nursery.start_soon(self._from_client)

    # -- the agent's side --------------------------------------------------------------

    async def _from_client(self) -> None:
        lines = wire.Lines()
        try:
            while data := await self.client.receive_some(65536):
                for line in lines.feed(data):
                    await self._client_message(wire.read_message(line))
        except (trio.BrokenResourceError, trio.ClosedResourceError, wire.LineTooLong):
            pass
        await self.transport.close()
        self._end()

    async def _client_message(self, message: wire.Message) -> None:
        body = message.body
        if message.shape is wire.Shape.INVALID or body is None:
            if message.key is not None and body is not None:
                await self._to_client(wire.error(body["id"], wire.INVALID_REQUEST, "not a JSON-RPC 2.0 message"))
            return
        if message.shape is wire.Shape.RESPONSE:
            return  # to no request of the relay's: server requests stop here
        if message.shape is wire.Shape.NOTIFICATION:
            # MCP's notifications are notifications/*: a tools/call without an id (or with a
            # null one) is a call a generic JSON-RPC server carries out, and no decision saw it
            method = message.method or ""
            if method.startswith("notifications/") and method != "notifications/roots/list_changed":
                await self._to_server(body)  # (the roots are ours)
            return
        assert message.key is not None
        method = message.method
        if message.key in self.pending or len(self.pending) >= MAX_PENDING:
            await self._to_client(wire.error(body["id"], wire.INVALID_REQUEST, "too many requests in flight, or an id in use"))
            return
        if method not in wire.GOVERNED and method not in wire.PASSED:
            await self._refuse_unknown(body["id"], method)
            return
        request = None
        if method in wire.GOVERNED:
            request = await self._allowed(message)
            if request is None:
                return
        if method == "initialize":
            person = elicitation.person_of(self.relay.gate.approvals.approver)
            body = wire.relayed_initialize(body, elicitation=person is not None)
        pending = _Pending(method, body["id"], request)
        self.pending[message.key] = pending
        assert self._nursery is not None
        self._nursery.start_soon(self._expire, message.key, pending)
        await self._to_server(body)

    async def _allowed(self, message: wire.Message) -> int | None:
        """Decide one governed request: the gate's number for it when allowed;
        None when refused, answered here (as are bad params)."""
        assert message.body is not None
        ident, method = message.body["id"], message.method
        parsed = wire.governed_params(message)
        if isinstance(parsed, str):
            await self._to_client(wire.error(ident, wire.INVALID_PARAMS, parsed))
            return None
        name, arguments = parsed
        call = McpCall(self.server.name, method, name, arguments)  # type: ignore[arg-type]
        decision = decide_call(call, self.relay.policy)
        subject: dict[str, Any] = {"server": self.server.name, "method": method, "name": name}
        if arguments:
            subject["arguments"] = recorded_input(arguments)
        shown = f"{self.server.name}.{name}"
        try:
            ruling = await self.relay.gate.ruled("mcp", subject, shown, decision, {"arguments": arguments})
        except RpcError as e:
            await self._to_client(wire.refusal(ident, method, str(e)))
            return None
        if not ruling.allowed:
            await self._to_client(wire.refusal(ident, method, ruling.reason))
            return None
        return ruling.request

    async def _refuse_unknown(self, ident: Any, method: str) -> None:
        """An agent's request the relay does not know how to decide: refused,
        recorded (kind ``mcp``), answered ``METHOD_NOT_FOUND``; the server never sees it."""
        shown = method[:200]
        reason = f"{shown} is not a request the governor knows how to decide; it was not forwarded"
        decision = Decision(Verdict.DENY, "mcp.unknown-method", reason, who.PROTOCOL)
        subject = {"server": self.server.name, "method": shown}
        with contextlib.suppress(RpcError):
            await self.relay.gate.ruled("mcp", subject, f"{self.server.name} {shown}", decision, {})
        await self._to_client(wire.error(ident, wire.METHOD_NOT_FOUND, f"Refused by the governor: {reason}"))

    async def _expire(self, key: str, pending: _Pending) -> None:
        with pending.timer:
            await trio.sleep(self.server.timeout)
        if pending.timer.cancelled_caught or self.pending.get(key) is not pending:
            return
        del self.pending[key]
        why = f"the MCP server {self.server.name} did not answer {pending.method} within {self.server.timeout:g} s"
        self.relay.problem(why)
        self._answered(pending, error=True)
        await self._to_client(wire.error(pending.ident, wire.REFUSED, why))

    # -- the server's side -------------------------------------------------------------

    async def _from_server(self) -> None:
        said = await self.transport.receive(self._server_message)
        for pending in list(self.pending.values()):
            pending.timer.cancel()
            self._answered(pending, error=True)
            await self._to_client(wire.error(pending.ident, wire.REFUSED, said))
        self.pending.clear()
        self._end()

    async def _server_message(self, message: wire.Message) -> None:
        body = message.body
        if message.shape is wire.Shape.INVALID or body is None:
            self._dropped()
            return
        if message.shape is wire.Shape.RESPONSE:
            pending = self.pending.pop(message.key or "", None)
            if pending is None:  # never forwarded (a refused call's id), or answered already
                self._dropped()
                return
            pending.timer.cancel()
            self._answered(pending, error="error" in body or _is_error(body.get("result")))
            if pending.method == "tools/list" and "result" in body:
                body = self._listed(body)
            await self._to_client(body)
            return
        if message.shape is wire.Shape.REQUEST:
            await self._server_request(message)
            return
        await self._to_client(body)

    def _listed(self, body: dict[str, Any]) -> dict[str, Any]:
        """A ``tools/list`` answer without the tools the policy refuses outright."""
        names = wire.tool_names(body["result"])
        if names is None:
            return wire.error(body["id"], wire.REFUSED, f"the MCP server {self.server.name} sent a malformed tools/list result")
        hidden = {
            name
            for name in names
            if decide_call(McpCall(self.server.name, "tools/call", name), self.relay.policy).verdict
            is Verdict.DENY
        }
        self.relay.tools_seen(self.server, names, hidden)
        return wire.without_tools(body, hidden) if hidden else body

    async def _server_request(self, message: wire.Message) -> None:
        """A request of the server's, answered here (see the module docstring)."""
        assert message.body is not None
        ident, method = message.body["id"], message.method
        if method == "roots/list":
            # A remote (HTTP) server is shown no local path: its roots are none of ours.
            roots = () if self.server.url is not None else self.relay.policy.roots
            await self._to_server(wire.roots_result(ident, roots))
        elif method == "ping":
            await self._to_server(wire.result(ident, {}))
        elif method == "elicitation/create" and self.asking < MAX_PENDING:
            self.asking += 1
            assert self._nursery is not None
            self._nursery.start_soon(self._elicit, ident, message.body.get("params"))
        elif method == "elicitation/create":
            await self._to_server(wire.error(ident, wire.INVALID_REQUEST, "too many requests in flight"))
        elif method == "sampling/createMessage":
            await self._refuse_server_ask(
                ident, method, "it would let a server drive the agent's model", wire.REFUSED
            )
        else:
            await self._refuse_server_ask(
                ident,
                method[:200],
                "the governor answers a server's roots/list, ping and elicitation/create only",
                wire.METHOD_NOT_FOUND,
            )

    async def _elicit(self, ident: Any, params: Any) -> None:
        """A server's form, through the gate as the agent's own would be."""
        try:
            request = elicitation.from_server(self.server.name, ident, params)
            if isinstance(request, str):
                await self._refuse_server_ask(ident, "elicitation/create", request, wire.INVALID_PARAMS)
                return
            origin = f"mcp:{self.server.name}"
            try:
                reply = self.relay.gate.create_elicitation(request, origin=origin)
                if not isinstance(reply, dict):
                    reply = await reply
            except RpcError as e:
                await self._to_server(wire.error(ident, wire.REFUSED, f"Refused by the governor: {e}"))
                return
            await self._to_server(wire.result(ident, reply))
        finally:
            self.asking -= 1

    async def _refuse_server_ask(self, ident: Any, method: str, why: str, code: int) -> None:
        """Refuse a server's request, recorded (kind ``mcp``, its origin the server)."""
        reason = f"the MCP server {self.server.name} may not use {method}: {why}"
        decision = Decision(Verdict.DENY, "mcp.server-asks", reason, who.PROTOCOL)
        subject = {"server": self.server.name, "method": method, "origin": f"mcp:{self.server.name}"}
        with contextlib.suppress(RpcError):
            await self.relay.gate.ruled("mcp", subject, f"{self.server.name} {method}", decision, {})
        await self._to_server(wire.error(ident, code, f"Refused by the governor: {reason}"))

    # -- writing -----------------------------------------------------------------------

    async def _to_client(self, body: Mapping[str, Any]) -> None:
        async with self._to_client_lock:
            try:
                await self.client.send_all(wire.encode(body))
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._end()

    async def _to_server(self, body: Mapping[str, Any]) -> None:
        await self.transport.send(body)

    def _answered(self, pending: _Pending, *, error: bool) -> None:
        """Tell the listeners (the OTel trace) that a governed request is answered."""
        if pending.request is not None:
            event = {"server": self.server.name, "request": pending.request, "error": error}
            self.relay.gate.on_event("mcp_result", event)

    def _dropped(self) -> None:
        name = self.server.name
        self.relay.dropped[name] = self.relay.dropped.get(name, 0) + 1

    def _end(self) -> None:
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()
