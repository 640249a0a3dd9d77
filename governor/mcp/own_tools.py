"""The governor's own tools as an MCP server: governed ``run``, ``read`` and
``write``, and ``blocked``, the agent's honest way out.

Rules of this file:

- **The gate's paths, not a second policy**: a ``read`` is the
  ``fs/read_text_file`` it stands for, a ``write`` the ``fs/write_text_file``,
  a ``run`` the ``terminal/create`` (then wait, output, release), each built
  as that ACP request and handed to the gate's own handler
  (`governor.gate.file_requests`, `governor.gate.terminal_requests`): the same decision, the
  same approver, the record written before anything happens, a command in the
  same sandbox as a terminal's, the same evidence for the workspace's changes.
  The one difference is in the record: its subject says ``via: mcp:governor``
  (`VIA`), so that the log tells the two ways apart.
- **A refusal is a tool result the model reads**: ``isError`` with the
  governor's words, as the relay answers a refused call to a job's server
  (`governor.mcp.wire.refusal`); so are bad arguments, naming the argument,
  and a file that cannot be read. A command that ran and exited non-zero is
  not an error of the tool: its exit code is in the result.
- **What the policy refuses outright is not offered**: at read-only ``write``
  is left out of ``tools/list`` (every write is refused there); a call to it is
  decided and refused all the same. ``run`` is offered only where the gate has
  terminals.
- **In-process**: the official SDK's low-level `Server` answers each shim's
  connection on the governor's own trio loop (it runs on anyio); no server
  process, nothing the agent could start on its own.

``blocked`` is no request to decide: it is the agent saying the task cannot
be done as specified (`blocked`), the same word as a final message starting
``BLOCKED:``. Its reason is an audit record (kind ``blocked``) written before
the answer, the turn then ends as a pause ends it, and the attempt is
``blocked`` with that reason (`governor.ending.how_it_ended`): a loop's tries stop there.

No ``search``: ``run`` with ``grep`` or ``rg`` searches in the sandbox under
the command rules already, and a search tool of its own would need a second
way of deciding what it may read.

The module imports the MCP SDK: `governor.mcp.relay` imports it only when a
policy turns the tools on (``[mcp] governor_tools``).
"""

from __future__ import annotations

import contextlib
import inspect
import posixpath
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

import anyio
import structlog
import trio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.shared.message import SessionMessage

from governor.acp.dispatch import RpcError
from governor.acp.models import schema
from governor.audit.log import AuditUnavailable
from governor.mcp import wire
from governor.policies.capability import Capability
from governor.policies.mcp import OWN_SERVER

if TYPE_CHECKING:
    from governor.mcp.gate_seam import McpGate

log = structlog.get_logger("governor.mcp")

VIA: Final = f"mcp:{OWN_SERVER}"
"""The ``via`` of their records' subjects."""
RUN_TIMEOUT: Final = 120.0
"""Seconds a ``run`` may take when the call names none."""
MAX_RUN_TIMEOUT: Final = 1800.0
BLOCKED_REASON_CHARS: Final = 2000
"""Characters of a ``blocked`` reason kept (as of a final message's summary)."""
RUN_OUTPUT_LIMIT: Final = 64 * 1024
"""Bytes of a command's output a ``run`` returns: the newest, as a terminal keeps them."""
KILL_GRACE: Final = 10.0

INSTRUCTIONS: Final = (
    "The governor's own tools: `run` runs a shell command in the governor's sandbox, "
    "`read` and `write` read and write a text file. Each call is decided by the job's "
    "policy and recorded before it is carried out; a refused call says why. Paths may "
    "be absolute or relative to the workspace. If the task cannot be done as specified "
    "(it contradicts the spec, a test is wrong, information is missing), call `blocked` "
    "with the reason instead of working around it: the attempt then ends, blocked."
)

_PATH: Final = {"type": "string", "description": "absolute, or relative to the workspace"}
TOOLS: Final[Mapping[str, types.Tool]] = {
    "run": types.Tool(
        name="run",
        description=(
            "Run a shell command (/bin/sh -c) in the governor's sandbox, as a terminal command "
            "is: decided by the policy's command rules first. Returns the exit code and the "
            f"output (stdout and stderr together, the newest {RUN_OUTPUT_LIMIT // 1024} KiB)."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "the shell line to run"},
                "cwd": {**_PATH, "description": "where to run it (default: the workspace)"},
                "timeout": {
                    "type": "number",
                    "description": f"seconds before it is killed (default {RUN_TIMEOUT:g}, "
                    f"at most {MAX_RUN_TIMEOUT:g})",
                },
            },
            "required": ["command"],
        },
    ),
    "read": types.Tool(
        name="read",
        description="Read a text file, decided by the policy's read rules first.",
        input_schema={
            "type": "object",
            "properties": {
                "path": _PATH,
                "line": {"type": "integer", "minimum": 1, "description": "first line (1-based)"},
                "limit": {"type": "integer", "minimum": 1, "description": "lines at most"},
            },
            "required": ["path"],
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    "write": types.Tool(
        name="write",
        description=(
            "Write a text file (created or replaced whole), decided by the policy's write "
            "rules first: capability, roots, protected paths."
        ),
        input_schema={
            "type": "object",
            "properties": {"path": _PATH, "content": {"type": "string"}},
            "required": ["path", "content"],
        },
        annotations=types.ToolAnnotations(destructive_hint=True),
    ),
    "blocked": types.Tool(
        name="blocked",
        description=(
            "Say that the task cannot be done as specified (it contradicts the spec, a test is "
            "wrong, information is missing) and why. The reason is recorded, your turn ends "
            "and the attempt ends blocked: it is not retried as a failure. Use it instead of "
            "working around a test."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "reason": {
                    "type": "string",
                    "description": "why the task cannot be done as specified, for the person "
                    f"who wrote it (at most {BLOCKED_REASON_CHARS} characters are kept)",
                },
            },
            "required": ["reason"],
        },
    ),
}

T = TypeVar("T")


class BadArguments(Exception):
    """A call's arguments are not the tool's: the message names the argument."""


class GovernorTools:
    """The governor's tools, answered by one gate (see the module docstring)."""

    def __init__(self, gate: McpGate) -> None:
        self.gate = gate
        self.server: Server[Any] = Server(
            OWN_SERVER,
            version="1",
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
        )
        self._calls: dict[str, Callable[[Mapping[str, Any]], Awaitable[types.CallToolResult]]] = {
            "run": self._run,
            "read": self._read,
            "write": self._write,
            "blocked": self._blocked,
        }

    # -- what is offered ---------------------------------------------------------------

    def tools(self) -> list[types.Tool]:
        """The tools ``tools/list`` offers under this gate's policy."""
        offered = []
        for name, tool in TOOLS.items():
            if name == "write" and self.gate.policy.capability is Capability.READ_ONLY:
                continue
            if name == "run" and self.gate.relay is None:
                continue
            offered.append(tool)
        return offered

    def names(self) -> list[str]:
        """Every tool of the governor's, offered or not."""
        return list(TOOLS)

    async def call(self, name: str, arguments: Mapping[str, Any] | None) -> types.CallToolResult:
        """One ``tools/call``: decided and carried out by the gate's own handlers;
        a refusal, bad arguments or a failure are an ``isError`` result."""
        handler = self._calls.get(name)
        if handler is None or (name == "run" and self.gate.relay is None):
            return _error(f"the governor has no tool {name[:64]!r}; it has {', '.join(TOOLS)}")
        try:
            return await handler(arguments or {})
        except BadArguments as e:
            return _error(f"{name}: {e}")
        except RpcError as e:
            return _error(e.message)

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=self.tools())

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await self.call(params.name, params.arguments)

    # -- the tools ---------------------------------------------------------------------

    async def _read(self, arguments: Mapping[str, Any]) -> types.CallToolResult:
        gate = self.gate
        req = schema.ReadTextFileRequest(
            session_id=gate.session_id or "",
            path=self._path(arguments, "path"),
            line=_count(arguments, "line"),
            limit=_count(arguments, "limit"),
        )
        response = await _settled(gate.files.read_text_file(req, via=VIA))
        return _text(response.content)

    async def _write(self, arguments: Mapping[str, Any]) -> types.CallToolResult:
        gate = self.gate
        content = arguments.get("content")
        if not isinstance(content, str):
            raise BadArguments("content: expected a string (the file's whole text)")
        path = self._path(arguments, "path")
        req = schema.WriteTextFileRequest(
            session_id=gate.session_id or "", path=path, content=content
        )
        await gate.files.write_text_file(req, via=VIA)
        return _text(f"wrote {len(content.encode())} bytes to {path}")

    async def _run(self, arguments: Mapping[str, Any]) -> types.CallToolResult:
        relay = self.gate.relay
        assert relay is not None
        command = arguments.get("command")
        if not isinstance(command, str) or not command.strip():
            raise BadArguments("command: expected a shell line (a non-empty string)")
        cwd = self._path(arguments, "cwd") if arguments.get("cwd") is not None else None
        timeout = arguments.get("timeout", RUN_TIMEOUT)
        if (
            isinstance(timeout, bool)
            or not isinstance(timeout, int | float)
            or not 0 < timeout <= MAX_RUN_TIMEOUT
        ):
            raise BadArguments(
                f"timeout: expected seconds above 0 and at most {MAX_RUN_TIMEOUT:g}, got {timeout!r}"
            )
        session = self.gate.session_id or ""
        created = await relay.create_terminal(
            schema.CreateTerminalRequest(
                session_id=session,
                command=command,
                cwd=cwd,
                output_byte_limit=RUN_OUTPUT_LIMIT,
            ),
            via=VIA,
        )
        terminal = created.terminal_id
        try:
            with trio.move_on_after(float(timeout)) as waiting:
                await relay.wait_for_terminal_exit(
                    schema.WaitForTerminalExitRequest(session_id=session, terminal_id=terminal)
                )
            if waiting.cancelled_caught:
                await relay.kill_terminal(
                    schema.KillTerminalRequest(session_id=session, terminal_id=terminal)
                )
                with trio.move_on_after(KILL_GRACE):
                    await relay.wait_for_terminal_exit(
                        schema.WaitForTerminalExitRequest(session_id=session, terminal_id=terminal)
                    )
            out = await relay.terminal_output(
                schema.TerminalOutputRequest(session_id=session, terminal_id=terminal)
            )
        finally:
            with trio.CancelScope(shield=True), contextlib.suppress(RpcError):
                await relay.release_terminal(
                    schema.ReleaseTerminalRequest(session_id=session, terminal_id=terminal)
                )
        status = out.exit_status
        code = status.exit_code if status is not None else None
        signal = status.signal if status is not None else None
        if waiting.cancelled_caught:
            said = f"timed out after {float(timeout):g} s and was killed"
        elif signal:
            said = f"killed by signal {signal}"
        else:
            said = f"exit code {code}"
        dropped = f" (older output dropped: the newest {RUN_OUTPUT_LIMIT} bytes are kept)"
        head = said + (dropped if out.truncated else "")
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"{head}\n{out.output}")],
            structured_content={
                "exit_code": code,
                "signal": signal,
                "timed_out": waiting.cancelled_caught,
                "truncated": out.truncated,
                "output": out.output,
            },
            is_error=waiting.cancelled_caught,
        )

    async def _blocked(self, arguments: Mapping[str, Any]) -> types.CallToolResult:
        """The agent's honest way out: recorded before the answer, the first
        reason kept, then the turn ends (`Gate.pause_requested`, which the
        attempt watches)."""
        reason = arguments.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            raise BadArguments("reason: expected why the task cannot be done (a non-empty string)")
        reason = reason.strip()[:BLOCKED_REASON_CHARS]
        gate = self.gate
        try:
            gate.audit.record("blocked", session=gate.session_id, via=VIA, reason=reason)
        except AuditUnavailable as e:  # the gate fails closed on its own; say so here too
            return _error(f"blocked: the reason could not be recorded: {e}")
        gate.blocked(reason)
        return _text("recorded: the attempt ends blocked with your reason; end your turn now")

    def _path(self, arguments: Mapping[str, Any], key: str) -> str:
        """An argument's path, absolute: a relative one is the workspace's."""
        value = arguments.get(key)
        if not isinstance(value, str) or not value:
            raise BadArguments(f"{key}: expected a path (a non-empty string)")
        if "\0" in value:
            raise BadArguments(f"{key}: a path holds no NUL character")
        return value if value.startswith("/") else posixpath.join(self.gate.policy.workspace, value)

    # -- the connections ---------------------------------------------------------------

    async def connection(self, stream: trio.SocketStream) -> None:
        """One MCP session over ``stream`` (a connection the relay's accept loop
        admitted: `McpRelay._admit` bounds them), the SDK's server on its end,
        until the client hangs up (or sends a line over `wire.MAX_LINE`)."""
        to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](16)
        to_client, from_server = anyio.create_memory_object_stream[SessionMessage](16)
        try:
            async with stream, trio.open_nursery() as nursery:
                nursery.start_soon(_read_lines, stream, to_server)
                nursery.start_soon(_write_lines, stream, from_server)
                async with from_client, to_client:
                    await self.server.run(
                        from_client, to_client, self.server.create_initialization_options()
                    )
                nursery.cancel_scope.cancel()
        except Exception as e:  # one client's session, never the attempt
            # its type only: the message may quote a call's arguments
            log.warning("mcp problem", problem=f"the governor's tools: a session ended: {type(e).__name__}")


async def _read_lines(
    stream: trio.SocketStream, into: anyio.abc.ObjectSendStream[SessionMessage | Exception]
) -> None:
    """The client's lines as the SDK's messages (a line it cannot read is
    handed on as the error, which the server answers or drops)."""
    lines = wire.Lines()
    async with into:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, anyio.BrokenResourceError):
            try:
                while data := await stream.receive_some(65536):
                    for line in lines.feed(data):
                        try:
                            message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                        except ValueError as e:
                            await into.send(e)
                            continue
                        await into.send(SessionMessage(message))
            except wire.LineTooLong as e:
                log.warning("mcp problem", problem=f"the governor's tools: a client sent {e}")


async def _write_lines(
    stream: trio.SocketStream, source: anyio.abc.ObjectReceiveStream[SessionMessage]
) -> None:
    async with source:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            async for message in source:
                text = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                await stream.send_all(text.encode() + b"\n")


async def _settled(answer: T | Awaitable[T]) -> T:
    """A gate handler's answer, made at once or later (`governor.gate.ruling.then`)."""
    if inspect.isawaitable(answer):
        return await answer
    return answer


def _count(arguments: Mapping[str, Any], key: str) -> int | None:
    value = arguments.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise BadArguments(f"{key}: expected a whole number above 0, got {value!r}")
    return value


def _text(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


def _error(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


