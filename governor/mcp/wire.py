"""MCP's stdio wire as the relay reads it: sans-IO, a value fed lines.

Rules of this file: nothing here does I/O or decides anything. It splits a
byte stream into bounded lines (`Lines`), reads one line as a JSON-RPC message
(`read_message`), says what a message is (`Shape`), and builds the few
messages the relay writes itself: a refusal, an error, a ``tools/list`` result
without the tools the policy denies, the ``initialize`` the server gets, the
roots it is told. The governed requests' params are
validated with the official SDK's models (`mcp.types`), so that what is
decided is what the server would have read.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from mcp import types
from pydantic import BaseModel, ValidationError

from governor.boundary import spelling

MAX_LINE: Final = 16 * 2**20
"""Bytes one message may take: a longer line ends the session (a server that
never sends a newline would otherwise grow the buffer without bound)."""

INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
REFUSED: Final = -32001
"""Our code for a refused prompt or resource, and for a call the server did not answer."""

GOVERNED: Final[Mapping[str, tuple[type[BaseModel], str]]] = {
    "tools/call": (types.CallToolRequestParams, "name"),
    "prompts/get": (types.GetPromptRequestParams, "name"),
    "resources/read": (types.ReadResourceRequestParams, "uri"),
}
"""The requests decided before they are forwarded: their params model and the
field that names their subject."""

PASSED: Final = frozenset(
    {
        "initialize",
        "ping",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/subscribe",
        "resources/unsubscribe",
        "completion/complete",
        "logging/setLevel",
    }
)
"""The agent's requests forwarded without a decision: they list, describe or
set up, and act on nothing. A request whose method is neither here nor in
`GOVERNED` is refused and recorded, never forwarded: a server may carry out
whatever it is sent (``notifications/tools/call`` with an id, a method of a
later MCP version), and no decision would have seen it. The list is written
out, not read from the SDK, so that a new SDK's method is refused until the
relay knows how to decide it."""



class LineTooLong(Exception):
    """A line over `MAX_LINE` bytes."""


class Lines:
    """Bytes in, complete lines out (without their newline), bounded."""

    def __init__(self, limit: int = MAX_LINE) -> None:
        self.limit = limit
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """The lines ``data`` completes; `LineTooLong` past the limit."""
        self._buffer += data
        *lines, rest = self._buffer.split(b"\n")
        self._buffer = bytearray(rest)
        if len(rest) > self.limit or any(len(line) > self.limit for line in lines):
            raise LineTooLong(f"a line over {self.limit} bytes")
        return [bytes(line) for line in lines if line.strip()]


class Shape(enum.Enum):
    """What one JSON-RPC message is."""

    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"
    INVALID = "invalid"


@dataclass(frozen=True, slots=True)
class Message:
    """One line read: its shape, the object (None when not JSON), its id's key."""

    shape: Shape
    body: dict[str, Any] | None
    key: str | None = None
    """The id as a dict key (``1`` and ``"1"`` are two ids)."""

    @property
    def method(self) -> str:
        """The method of a request or notification ('' otherwise)."""
        method = self.body.get("method") if self.body else None
        return method if isinstance(method, str) else ""


def read_message(line: bytes) -> Message:
    """A line as a message; `Shape.INVALID` for anything JSON-RPC 2.0 does not allow
    (the relay never forwards those)."""
    try:
        body = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return Message(Shape.INVALID, None)
    return message_of(body)


def message_of(body: Any) -> Message:
    """A decoded JSON value as a message (an HTTP server's, which is not read as lines)."""
    if not isinstance(body, dict) or body.get("jsonrpc") != "2.0":
        return Message(Shape.INVALID, body if isinstance(body, dict) else None)
    ident = body.get("id")
    has_id = "id" in body and (isinstance(ident, str) or type(ident) is int)
    key = json.dumps(ident) if has_id else None
    method = body.get("method")
    if isinstance(method, str):
        return Message(Shape.REQUEST if has_id else Shape.NOTIFICATION, body, key)
    if has_id and ("result" in body) != ("error" in body):
        return Message(Shape.RESPONSE, body, key)
    return Message(Shape.INVALID, body, key)


def governed_params(message: Message) -> tuple[str, dict[str, Any]] | str:
    """A governed request's subject (tool or prompt name, resource URI) and
    arguments, or what is wrong with its params (validated by the SDK's model)."""
    assert message.body is not None
    model, field = GOVERNED[message.method]
    try:
        params = model.model_validate(message.body.get("params"))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "params"
        return f"invalid params for {message.method}: {where}: {first['msg']}"
    arguments = getattr(params, "arguments", None) or {}
    return str(getattr(params, field)), dict(arguments)


def encode(body: Mapping[str, Any]) -> bytes:
    """One message as a line."""
    return spelling.dumps(body, separators=(",", ":")).encode() + b"\n"


def error(ident: Any, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error response."""
    return {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}


def refusal(ident: Any, method: str, reason: str) -> dict[str, Any]:
    """The answer to a refused request. A refused tool call is a tool result with
    ``isError`` (MCP puts tool execution errors there: the model reads it and
    goes on, where agents surface a JSON-RPC error as a broken server); a
    refused prompt or resource is a JSON-RPC error, as MCP has no error result
    for them."""
    text = f"Refused by the governor: {reason}"
    if method == "tools/call":
        result = types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
        return {"jsonrpc": "2.0", "id": ident, "result": result.model_dump(by_alias=True, exclude_none=True)}
    return error(ident, REFUSED, text)


def tool_names(result: Any) -> list[str] | None:
    """The tools' names of a ``tools/list`` result, or None when it is not one
    (validated with the SDK's model)."""
    try:
        listed = types.ListToolsResult.model_validate(result)
    except ValidationError:
        return None
    return [tool.name for tool in listed.tools]


def without_tools(body: dict[str, Any], hidden: set[str]) -> dict[str, Any]:
    """A ``tools/list`` response without the tools named in ``hidden``."""
    result = dict(body["result"])
    result["tools"] = [t for t in result.get("tools", []) if t.get("name") not in hidden]
    return {**body, "result": result}


def relayed_initialize(body: dict[str, Any], *, elicitation: bool) -> dict[str, Any]:
    """An ``initialize`` request as the server gets it: the client's capabilities
    without ``sampling`` (a server never reaches the agent's model), with
    ``elicitation`` only when ``elicitation`` (a person answers the forms), and
    with ``roots`` whatever the agent said (the relay answers ``roots/list``)."""
    params = body.get("params")
    if not isinstance(params, dict):
        return body
    given = params.get("capabilities")
    capabilities = {
        k: v
        for k, v in (given.items() if isinstance(given, dict) else ())
        if k not in ("sampling", "elicitation", "roots")
    }
    capabilities["roots"] = {}
    if elicitation:
        capabilities["elicitation"] = {}
    return {**body, "params": {**params, "capabilities": capabilities}}


def result(ident: Any, value: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON-RPC result response."""
    return {"jsonrpc": "2.0", "id": ident, "result": dict(value)}


def roots_result(ident: Any, roots: Sequence[str]) -> dict[str, Any]:
    """The answer to ``roots/list``: each folder as a ``file://`` root."""
    listed = [{"uri": Path(r).as_uri(), "name": Path(r).name or r} for r in roots]
    return result(ident, {"roots": listed})
