"""The job's MCP servers behind the gate: one socket per server, one sandboxed
server (or one HTTP session) per agent connection, every governed request
decided before it is forwarded.

Rules of this file (a session's own, message by message -- decided before
forwarded, only answers to what was forwarded, a server's requests decided
here, its input never ending the attempt -- are `governor.mcp.relay_session`'s):

- **Sessions are bounded**: at most `MAX_SESSIONS` per server at once, and
  sandboxed server processes (one per stdio session) at most the job's
  ``[limits] processes`` together; a connection over either is refused,
  recorded (method ``session``, rule ``mcp.sessions``) and closed at once.
  The accept loops never end for want of descriptors (`governor.sandbox.net.accepting`).
- **What the agent was offered is in the log**: a ``mcp-server`` record per
  server when the relay opens (its name, command, whether it may write, its
  network hosts), and a ``mcp-tools`` record per distinct ``tools/list``
  result a server gives (the tools' names, those hidden), at most
  `TOOL_LISTS` per server.

The agent reaches a server through `sandbox/standalone/mcp_shim.py`, which it
spawns as a stdio server: its socket lies in a folder of the relay's, under
the governor's folder for attempts that every sandbox hides
(`governor.confine.attempt_folders`), bound back into this attempt's agent sandbox
only (`McpRelay.folder`, `exposed`). **A connection proves it is this
attempt's** before anything else: the shim's entry carries the attempt's
random token (`governor.mcp.servers.TOKEN_VARIABLE`, masked in every record), the shim sends it
first, and a connection without it is closed unanswered and recorded
(``mcp-connection``, and a notice). Behind the socket a
`governor.mcp.relay_session.RelaySession` speaks to the server through a
`Transport`: a sandboxed child on stdio (`StdioServer`) or, for a ``url``, the
governor's own HTTP session (`governor.mcp.http.HttpServer`); the agent never learns the URL. With ``[mcp]
governor_tools`` one more socket there is answered by the governor itself
(`governor.mcp.own_tools`), no server behind it.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import shutil
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import structlog
import trio

from governor.acp.dispatch import RpcError
from governor.audit.log import AuditUnavailable
from governor.confine.attempt_folders import attempt_folder
from governor.confine.egress import egress_for, judge
from governor.mcp import launchers
from governor.mcp.relay_session import RelaySession, StdioServer, imported_on_first_use
from governor.mcp.servers import (
    SHIM,
    relay_token,
    server_headers,
    server_profile,
    shim_interpreter,
    stdio_entry,
    unsaid,
)
from governor.policies import by as who
from governor.policies.capability import Capability
from governor.policies.decide import Decision
from governor.policies.mcp import OWN_SERVER, McpServer
from governor.policies.network import NetworkRules
from governor.policies.rules import Verdict
from governor.sandbox import BwrapUnavailable, Profile, ProfileError, agent_process
from governor.sandbox.host import processes
from governor.sandbox.net.accepting import accept_forever

if TYPE_CHECKING:
    from governor.mcp import wire
    from governor.mcp.gate_seam import McpGate
    from governor.mcp.own_tools import GovernorTools
    from governor.policies.policy import Policy
    from governor.sandbox.net.proxy import EgressProxy

log = structlog.get_logger("governor.mcp")


if not TYPE_CHECKING:
    wire = imported_on_first_use("governor.mcp.wire")  # as the sessions' (`relay_session`)

TOOL_NAMES: Final = 256
"""Names one ``mcp-tools`` record keeps (of those listed, and of those hidden); the
rest are counted (``more``, ``more_hidden``): a server listing 100,000 tools
would otherwise write megabytes into the log for each list."""
MAX_SESSIONS: Final = 8
"""Sessions one server may have at once. An agent opens one per server per
session of its own (a few with subagents); each stdio session is a sandboxed
server process of its own, so without a bound 60 connections were 60 processes
(issue 35). More are refused, recorded, and their connection closed."""
TOOL_LISTS: Final = 16
"""Distinct ``tools/list`` results recorded per server (one that changes its
list at every call would otherwise write a record each time)."""
TOKEN_PREFIX: Final = b"acp-governor-token "
"""What the shim's first line starts with; the attempt's token follows, then ``\n``."""
TOKEN_LINE_MAX: Final = 256
"""Bytes the first line may take: a connection that says more is not a shim's."""
TOKEN_WAIT: Final = 10.0
"""Seconds a connection has to say its token (the shim says it at once)."""
MAX_UNPROVEN: Final = 64
"""Connections waiting to say the token at once; more are closed at once
(a flood of silent connections holds the governor's descriptors for
`TOKEN_WAIT` at most, and only this many)."""
REFUSALS_RECORDED: Final = 16
"""Refused connections recorded per server; more are counted in the notice."""
UNIX_PATH_MAX: Final = 107
"""The longest path ``bind`` takes for a Unix socket (``sun_path`` less its NUL)."""


class McpRelay:
    """The job's servers behind one gate (see the module docstring).
    Open it with `open_relay`."""

    def __init__(
        self,
        gate: McpGate,
        policy: Policy,
        environ: Mapping[str, str],
        folder: Path,
        proxy: Callable[[], EgressProxy | None],
        token: str | None = None,
    ) -> None:
        self.gate = gate
        self.policy = policy
        self.environ = environ
        self.folder = folder
        """Where the sockets and the shim lie: kept visible in the agent's sandbox."""
        self.proxy = proxy
        self.token = token or relay_token()
        """What a connection must say first (`admitted`): the attempt's secret."""
        self.refused: dict[str, int] = {}
        """Server name -> connections refused for want of the token."""
        self.unproven = 0
        """Connections that have not said the token yet (at most `MAX_UNPROVEN`)."""
        self.servers = policy.mcp.servers
        self.shim = str(folder / "mcp_shim.py")
        self.interpreter = shim_interpreter()
        self.dropped: dict[str, int] = {}
        """Server name -> messages dropped (malformed, or answers never asked for)."""
        self.problems: list[str] = []
        """What went wrong with a server, in words (the outcome's notices)."""
        self.tool_lists: dict[str, set[tuple[tuple[str, ...], tuple[str, ...]]]] = {}
        """Server name -> the tools/list results recorded (names, hidden)."""
        self.commands: dict[str, tuple[str, ...]] = {}
        """Server name -> the argv that really starts it (`launchers.resolve`)."""
        self.unlaunched: dict[str, str] = {}
        """Server name -> why its launcher could not be resolved (its sessions are refused)."""
        self.own: GovernorTools | None = None
        """The governor's own tools, when the policy offers them."""
        self.max_sessions = MAX_SESSIONS
        self.sessions: dict[str, int] = {}
        """Server name -> its sessions open now (`MAX_SESSIONS` at most)."""
        self.running = 0
        """Sandboxed server processes running now (one per stdio session), counted
        against the job's ``[limits] processes``."""
        if policy.mcp.governor_tools:
            from governor.mcp.own_tools import GovernorTools  # the SDK's server: only when on

            self.own = GovernorTools(gate)

    async def resolve_launches(self) -> None:
        """What each stdio server really runs, found before any session: an npx
        package fetched outside into the governor's folder, any program by its
        absolute path (`governor.mcp.launchers`). A server whose launcher fails
        is a problem of the outcome and answers every session with why."""
        places = processes.Places.of(roots=self.policy.roots, environ=self.environ)
        for server in self.servers:
            if not server.stdio:
                continue
            try:
                self.commands[server.name] = await launchers.resolve(
                    server.name, server.command, self.environ, places, self.policy.workspace
                )
            except launchers.LauncherError as e:
                self.unlaunched[server.name] = str(e)
                self.problem(str(e))

    def socket_path(self, server: McpServer) -> str:
        """Where the shim for ``server`` connects."""
        return str(self.folder / f"{server.name}.sock")

    def own_socket_path(self) -> str:
        """Where the shim for the governor's own tools connects."""
        return str(self.folder / f"{OWN_SERVER}.sock")

    def entries(self) -> list[dict[str, object]]:
        """``session/new``'s ``mcpServers``: a shim in place of each real server
        (and one for the governor's own tools)."""
        entries = [
            stdio_entry(s.name, self.socket_path(s), self.interpreter, self.shim, self.token)
            for s in self.servers
        ]
        if self.own is not None:
            entries.append(
                stdio_entry(OWN_SERVER, self.own_socket_path(), self.interpreter, self.shim, self.token)
            )
        return entries

    async def admitted(self, name: str, client: trio.SocketStream) -> bool:
        """Whether ``client`` (a connection to server ``name``'s socket) says this
        attempt's token first, read a byte at a time so that nothing after it is
        taken from the session. One that does not is refused: recorded
        (``mcp-connection``, up to `REFUSALS_RECORDED` per server) and counted
        in the notices; the caller closes it unanswered."""
        line = bytearray()
        with trio.move_on_after(TOKEN_WAIT):
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                while len(line) < TOKEN_LINE_MAX and not line.endswith(b"\n"):
                    byte = await client.receive_some(1)
                    if not byte:
                        break
                    line += byte
        expected = TOKEN_PREFIX + self.token.encode() + b"\n"
        if hmac.compare_digest(bytes(line), expected):
            return True
        self._unproven(name, "no token" if not line.startswith(TOKEN_PREFIX) else "a wrong token")
        return False

    def _unproven(self, name: str, why: str) -> None:
        """A connection refused for want of the token: counted, and recorded
        (``mcp-connection``) up to `REFUSALS_RECORDED` times per server."""
        count = self.refused[name] = self.refused.get(name, 0) + 1
        if count <= REFUSALS_RECORDED:
            self._record("mcp-connection", {"server": name, "verdict": "deny", "reason": why})

    async def serve(
        self, listeners: list[tuple[McpServer, socket.socket]], own: socket.socket | None = None
    ) -> None:
        """Accept the agent's connections until cancelled; each is a session."""
        async with trio.open_nursery() as nursery:
            for server, listener in listeners:
                nursery.start_soon(self._accept, nursery, server, listener)
            if self.own is not None and own is not None:
                nursery.start_soon(self._accept, nursery, None, own)

    async def _accept(
        self, nursery: trio.Nursery, server: McpServer | None, listener: socket.socket
    ) -> None:
        """Each connection a session, when `_admit` lets it in (``server`` None: the
        governor's own tools); one over the caps is refused and closed at once,
        so a flood holds none of the governor's descriptors."""
        name = OWN_SERVER if server is None else server.name

        def take(sock: socket.socket) -> None:
            stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
            nursery.start_soon(self._admit, server, stream)

        def starved(e: OSError) -> None:
            self.problem(
                f"MCP server {name}: connections waited, the governor out of descriptors "
                f"({e.strerror or e})"
            )

        await accept_forever(listener, take, starved=starved)

    async def _admit(self, server: McpServer | None, client: trio.SocketStream) -> None:
        """One connection: closed unanswered unless it says the attempt's token
        first (`admitted`: before the caps, so that a socket found by another
        attempt's agent holds no session of this one's); then a session when
        under the caps, else refused and recorded."""
        name = OWN_SERVER if server is None else server.name
        self.unproven += 1
        try:
            if self.unproven > MAX_UNPROVEN:
                self._unproven(name, f"over {MAX_UNPROVEN} connections yet to say the token")
                proven = False
            else:
                proven = await self.admitted(name, client)
        finally:
            self.unproven -= 1
        if not proven:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await client.aclose()
            return
        stdio = server is not None and server.stdio
        over = self._over(name, stdio)
        if over is not None:
            await self._refuse_session(name, over)
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await client.aclose()
            return
        self.sessions[name] = self.sessions.get(name, 0) + 1
        self.running += stdio
        try:
            if server is None:
                assert self.own is not None
                await self.own.connection(client)
            else:
                await self._session(server, client)
        finally:
            self.sessions[name] -= 1
            self.running -= stdio

    def _over(self, name: str, stdio: bool) -> str | None:
        """Why one more session of ``name`` is refused (None: it is not)."""
        if self.sessions.get(name, 0) >= self.max_sessions:
            return f"over {self.max_sessions} sessions at once to the MCP server {name}"
        processes = self.policy.limits.processes
        if stdio and processes is not None and self.running >= processes:
            return (
                f"over {processes} MCP server processes at once (the job's [limits] processes): "
                f"a session of {name} would start another"
            )
        return None

    async def _refuse_session(self, name: str, why: str) -> None:
        """A session refused: recorded (kind ``mcp``, method ``session``) and a notice."""
        self.problem(f"MCP server {name}: sessions refused: {why}")
        decision = Decision(Verdict.DENY, "mcp.sessions", why, who.PROTOCOL)
        subject = {"server": name, "method": "session"}
        with contextlib.suppress(RpcError):
            await self.gate.ruled("mcp", subject, f"{name} session", decision, {})

    async def _session(self, server: McpServer, client: trio.SocketStream) -> None:
        """One agent connection: its own server process (or HTTP session), relayed
        until either ends."""
        async with client:
            if not server.stdio:
                # the SDK's HTTP client: paid by a url's first session
                from governor.mcp.http import HttpServer

                headers = server_headers(server, self.environ)
                http = HttpServer(server, headers, judge(self.gate), self.problem)
                await RelaySession(self, server, client, http).run()
                return
            try:
                if server.name in self.unlaunched:
                    raise ProfileError(self.unlaunched[server.name])
                command = self.commands.get(server.name, server.command)
                egress = egress_for(_server_rules(server), f"mcp:{server.name}")
                hide = tuple(str(p) for p in self.folder.glob("*.sock"))
                profile = server_profile(
                    server, self.policy, self.environ, egress=egress, hide=hide, command=command
                )
                proxy = self.proxy()
                if proxy is None:
                    raise ProfileError("the governor's egress proxy is not running")

                async def attach(pid: int) -> None:
                    assert proxy is not None
                    await proxy.attach(pid, egress, f"mcp:{server.name}")

                async with agent_process(profile, command, bwrap=_bwrap(), attach=attach) as child:
                    stdio = StdioServer(server, child, self.problem, unsaid(server, self.environ))
                    await RelaySession(self, server, client, stdio).run()
            except (OSError, ProfileError, BwrapUnavailable) as e:
                why = f"MCP server {server.name} could not start: {getattr(e, 'strerror', None) or e}"
                self.problem(why)
                await _refuse_all(client, why)

    def record_servers(self) -> None:
        """A ``mcp-server`` record per server, as it will run."""
        for server in self.servers:
            writable = server.writable and self.policy.capability >= Capability.EDIT_WORKSPACE
            subject: dict[str, Any] = {
                "server": server.name,
                "command": list(server.command),
                "writable": writable,
                **({"program": list(self.commands[server.name])} if server.name in self.commands else {}),
                "network": [h.text for h in server.hosts],
            }
            if server.url is not None:  # reached by the governor: its URL and its headers' names
                subject["url"] = server.url
                subject["headers"] = sorted({h for h, _ in server.headers} | set(server.header_values))
            self._record("mcp-server", subject)
        if self.own is not None:  # the governor's own: in-process, its tools as offered
            writable = self.policy.capability >= Capability.EDIT_WORKSPACE
            self._record("mcp-server", {"server": OWN_SERVER, "own": True, "writable": writable, "network": []})
            offered = [t.name for t in self.own.tools()]
            hidden = sorted(set(self.own.names()) - set(offered))
            self._record("mcp-tools", {"server": OWN_SERVER, "tools": offered, "hidden": hidden})

    def tools_seen(self, server: McpServer, names: list[str], hidden: set[str]) -> None:
        """A ``mcp-tools`` record of one ``tools/list`` result, unless recorded already."""
        seen = self.tool_lists.setdefault(server.name, set())
        listed = (tuple(names), tuple(sorted(hidden)))
        if listed in seen or len(seen) >= TOOL_LISTS:
            return
        seen.add(listed)
        subject: dict[str, Any] = {
            "server": server.name,
            "tools": names[:TOOL_NAMES],
            "hidden": list(listed[1][:TOOL_NAMES]),
        }
        if len(names) > TOOL_NAMES:
            subject["more"] = len(names) - TOOL_NAMES
        if len(hidden) > TOOL_NAMES:
            subject["more_hidden"] = len(hidden) - TOOL_NAMES
        self._record("mcp-tools", subject)

    def _record(self, kind: str, subject: dict[str, Any]) -> None:
        try:
            self.gate.audit.record(kind, session=self.gate.session_id, subject=subject)
        except AuditUnavailable as e:
            self.gate.fail(str(e))

    def problem(self, why: str) -> None:
        if why not in self.problems and len(self.problems) < 32:
            self.problems.append(why)
            log.warning("mcp problem", problem=why)

    def notices(self) -> list[str]:
        """What the outcome should say about the servers."""
        said = list(self.problems)
        for name, count in self.refused.items():
            said.append(
                f"MCP server {name}: {count} connection(s) refused: they did not carry "
                "this attempt's token (another attempt's agent, or a socket found by hand)"
            )
        for name, count in self.dropped.items():
            said.append(f"MCP server {name}: {count} messages dropped (malformed or unasked for)")
        return said


def _server_rules(server: McpServer) -> NetworkRules:
    return NetworkRules(enabled=bool(server.network), allow=server.network)


def _bwrap() -> str | None:
    from governor.confine.sandboxes import configured_bwrap  # governor.confine imports much; late

    return configured_bwrap()


async def _refuse_all(client: trio.SocketStream, why: str) -> None:
    """Answer every request of ``client`` with ``why`` until it hangs up (a server
    that could not start: the agent learns it from its first request)."""
    lines = wire.Lines()
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, wire.LineTooLong):
        while data := await client.receive_some(65536):
            for line in lines.feed(data):
                message = wire.read_message(line)
                if message.shape is wire.Shape.REQUEST and message.body is not None:
                    await client.send_all(wire.encode(wire.error(message.body["id"], wire.REFUSED, why)))


@asynccontextmanager
async def open_relay(
    gate: McpGate,
    policy: Policy,
    environ: Mapping[str, str] | None,
    proxy: Callable[[], EgressProxy | None],
    token: str | None = None,
) -> AsyncIterator[McpRelay | None]:
    """The relay of the job's servers (and of the governor's own tools),
    listening for the block (None when the job names none and offers no tools);
    its folder (`governor.confine.attempt_folders`) removed after. The servers'
    variables (and the HTTP servers' header values) come from ``environ``
    (None: the governor's own). ``token``: the attempt's, masked in its
    records (`governor.job.spec.Prepared.relay_token`); None: a fresh one."""
    if not policy.mcp.servers and not policy.mcp.governor_tools:
        yield None
        return
    folder = attempt_folder("mcp-")
    try:
        shutil.copyfile(SHIM, folder / "mcp_shim.py")
        environ = os.environ if environ is None else environ
        relay = McpRelay(gate, policy, environ, folder, proxy, token)
        await relay.resolve_launches()
        relay.record_servers()
        listeners: list[tuple[McpServer, socket.socket]] = []
        own: socket.socket | None = None
        try:
            for server in relay.servers:
                sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                listeners.append((server, sock))
                _bind(sock, relay.socket_path(server))
                os.chmod(relay.socket_path(server), 0o600)
                sock.listen(16)
            if relay.own is not None:
                own = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                _bind(own, relay.own_socket_path())
                os.chmod(relay.own_socket_path(), 0o600)
                own.listen(16)
        except BaseException:
            for _, sock in listeners:
                sock.close()
            if own is not None:
                own.close()
            raise
        async with trio.open_nursery() as nursery:
            nursery.start_soon(relay.serve, listeners, own)
            try:
                yield relay
            finally:
                nursery.cancel_scope.cancel()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _bind(sock: socket.socket, path: str) -> None:
    """Bind ``sock`` at ``path``, through its folder's descriptor when the path
    is longer than a Unix socket's may be (a deep ``$XDG_STATE_HOME``)."""
    if len(os.fsencode(path)) <= UNIX_PATH_MAX:
        sock.bind(path)
        return
    fd = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        sock.bind(f"/proc/self/fd/{fd}/{os.path.basename(path)}")
    finally:
        os.close(fd)


def exposed(profile: Profile, relay: McpRelay | None) -> Profile:
    """The agent's profile with the relay's folder (its sockets, the shim) bound
    back over the hidden folder of every attempt's (`Profile.own`)."""
    if relay is None or not profile.sandboxed:
        return profile
    return replace(profile, own=(*profile.own, relay.folder))


def offered(relay: McpRelay | None) -> list[dict[str, object]]:
    """``session/new``'s ``mcpServers`` (none without a relay)."""
    return [] if relay is None else relay.entries()


def said(relay: McpRelay | None) -> tuple[str, ...]:
    """The relay's notices for the outcome (none without a relay)."""
    return () if relay is None else tuple(relay.notices())
