"""Validation and dispatch of the agent's requests: method table -> schema model -> handler.

A request from the agent is answered by exactly one line, whatever happens:

- an unknown method (``_``-prefixed extensions included) is ``-32601``;
- params that the method's `acp.schema` model rejects are ``-32602``, and the
  message names the first bad field (``Invalid params: toolCall.toolCallId:
  Field required``); the data lists every error, without the offending values;
- a handler that raises `RpcError` (or jsonrpcserver's `JsonRpcError`) is that
  error; any other exception is ``-32603`` with a short message, logged here
  with its traceback, never put on the wire;
- a handler's return value is the result: a pydantic model (dumped by alias,
  ``None`` fields left out), a dict, ``None`` (sent as ``{}``, as ACP asks), or
  a jsonrpcserver `Result` (``Success(...)`` / ``Error(...)``), passed through.

Built from jsonrpcserver 5's pieces where they fit: its `Result` type and
`Success`/`Error` constructors carry the outcome (and a handler may return one),
`JsonRpcError` is the base of `RpcError` (so a handler may raise either), and
`to_response` + `to_serializable_one` shape error responses (its `NODATA`
sentinel decides whether ``data`` is sent). A success is shaped here directly:
it is the one path every permission answer takes, so it skips jsonrpcserver's
detour through two namedtuples; a schema model's result
travels as `Encoded` bytes, not wrapped in a `Success`. Not used: its
`async_dispatch` awaits through `asyncio.gather`, which fails under trio, and it
re-parses JSON text we already parsed; its `validate_args` binds params to a
Python signature, where the schema models are the validation; its request
JSON schema check, which the sans-IO core already does, cheaper.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, NamedTuple, TypeAlias

import structlog
from jsonrpcserver import Error, JsonRpcError, Success
from jsonrpcserver.dispatcher import to_response
from jsonrpcserver.request import Request as _JsonRpcServerRequest
from jsonrpcserver.response import to_serializable_one
from jsonrpcserver.result import Result, SuccessResult
from jsonrpcserver.sentinels import NODATA
from oslash.either import Left, Right  # type: ignore[import-untyped]
from pydantic import BaseModel, ValidationError

from governor.acp.jsonrpc import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    JsonId,
    encode,
    encode_id,
    error_line,
    short,
)

log = structlog.get_logger("governor.acp.dispatch")

Handler: TypeAlias = Callable[[Any], Any]
"""A function of the validated params model: ``async def`` (answers later), or a
plain function returning the result (answers at once) or an awaitable of it."""


class Route(NamedTuple):
    """One row of a handler table: the params model and the handler that gets it."""

    params: type[BaseModel]
    handler: Handler


HandlerTable: TypeAlias = Mapping[str, "Route | tuple[type[BaseModel], Handler]"]
"""Method name -> (params model, async handler), e.g.
``{"fs/read_text_file": (acp.schema.ReadTextFileRequest, read_file)}``."""


class Routes(dict[str, Route]):
    """A handler table that also remembers the methods it was asked for and does
    not hold (answered ``-32601``): how many calls of each, for at most
    `UNKNOWN_KEPT` distinct names (an agent chooses them), each cut short."""

    UNKNOWN_KEPT: Final = 32

    def __init__(self, routes: Mapping[str, Route]) -> None:
        super().__init__(routes)
        self.unknown: dict[str, int] = {}

    def get(self, method: str, default: Any = None) -> Any:
        route = dict.get(self, method)
        if route is None:
            name = short(method)
            if name in self.unknown or len(self.unknown) < self.UNKNOWN_KEPT:
                self.unknown[name] = self.unknown.get(name, 0) + 1
            return default
        return route


class RpcError(JsonRpcError):
    """Raise in a handler to answer with a JSON-RPC error (``data`` omitted if None)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(code, message, NODATA if data is None else data)
        Exception.__init__(self, code, message)

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


Answer: TypeAlias = "Result | Encoded"
"""What a request is answered with: a jsonrpcserver `Result`, or a schema model's
result already encoded (`Encoded`, the usual case)."""


def begin(table: HandlerTable, method: str, params: Any) -> Answer | Awaitable[Answer]:
    """Validate `params` and call the method's handler.

    A handler may answer at once (a plain function returning its result) or
    later (an ``async def``, or a plain function returning an awaitable for the
    slow cases). An immediate answer comes back as an `Answer`, so the caller can
    reply from where it stands -- no task and no scheduler pass on the path every
    permission takes; otherwise a coroutine of the `Answer`.

    Never raises for anything the agent or the handler did wrong.
    """
    route = table.get(method)
    if route is None:
        return Error(METHOD_NOT_FOUND, f"Method not found: {short(method)}")
    model, handler = route
    try:
        validated = model.__pydantic_validator__.validate_python(params)  # = model_validate
    except ValidationError as exc:
        message, data = invalid_params(exc)
        return Error(INVALID_PARAMS, message, data)
    try:
        value = handler(validated)
    except JsonRpcError as exc:
        return Error(exc.code, exc.message, exc.data)
    except Exception as exc:
        log.error("handler.failed", method=method, error=type(exc).__name__, exc_info=True)
        return Error(INTERNAL_ERROR, f"Internal error ({type(exc).__name__})")
    if isinstance(value, BaseModel):  # answered at once, the usual case
        return as_result(value)
    if inspect.isawaitable(value):
        return _finish(method, value)
    return as_result(value)


async def _finish(method: str, pending: Awaitable[Any]) -> Answer:
    try:
        value = await pending
    except JsonRpcError as exc:
        return Error(exc.code, exc.message, exc.data)
    except Exception as exc:
        log.error("handler.failed", method=method, error=type(exc).__name__, exc_info=True)
        return Error(INTERNAL_ERROR, f"Internal error ({type(exc).__name__})")
    return as_result(value)


class Encoded(bytes):
    """A result already encoded as JSON (a schema model, by pydantic's own
    serializer), spliced into the response line as it is."""

    __slots__ = ()


def as_result(value: Any) -> Answer:
    """A handler's return value as an `Answer`: `Encoded` for a schema model, else a
    jsonrpcserver `Result` with a JSON-ready payload.

    A schema model is encoded here, by pydantic's serializer, straight to bytes,
    not dumped to dicts that are then encoded again. A model it
    cannot encode (a lone surrogate in a string) is dumped to dicts instead,
    which `encode` writes with ``\\udcxx`` escapes."""
    if isinstance(value, BaseModel):  # the usual case first
        try:
            return Encoded(
                value.__pydantic_serializer__.to_json(value, by_alias=True, exclude_none=True)
            )
        except ValueError:  # PydanticSerializationError
            return Success(value.model_dump(mode="json", by_alias=True, exclude_none=True))
    if isinstance(value, Left):
        return value
    if isinstance(value, Right):
        inner = value._value
        return as_result(inner.result) if isinstance(inner, SuccessResult) else value
    return Success({} if value is None else value)


def reply(id: JsonId, result: Answer) -> bytes:
    """The response line for the agent's request `id`.

    A result that cannot be encoded (not JSON, NaN) becomes ``-32603`` rather
    than an exception: the agent still gets its answer.
    """
    if type(result) is Encoded:  # the hot path
        return b'{"jsonrpc":"2.0","id":%s,"result":%s}\n' % (encode_id(id), result)
    if isinstance(result, Right):  # skip the namedtuple round trip
        value = result._value.result
        if type(value) is Encoded:
            return b'{"jsonrpc":"2.0","id":%s,"result":%s}\n' % (encode_id(id), value)
        payload: Any = {"jsonrpc": "2.0", "id": id, "result": value}
    else:
        request = _JsonRpcServerRequest(method="", params={}, id=id)
        payload = to_serializable_one(to_response(request, result))
    try:
        return encode(payload)
    except (TypeError, ValueError) as exc:
        log.error("handler.result_not_json", error=type(exc).__name__, message=str(exc)[:200])
        return error_line(id, INTERNAL_ERROR, "Internal error (the result is not JSON)")


def invalid_params(exc: ValidationError) -> tuple[str, dict[str, Any]]:
    """A ``-32602`` message naming the first bad field, and every error as data.

    The offending input values are left out: params can hold file contents.
    """
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    listed = [
        {"field": ".".join(str(part) for part in error["loc"]) or "params", "message": error["msg"]}
        for error in errors
    ]
    first = listed[0] if listed else {"field": "params", "message": "invalid"}
    more = f" (and {len(listed) - 1} more)" if len(listed) > 1 else ""
    return f"Invalid params: {first['field']}: {first['message']}{more}", {"errors": listed}

