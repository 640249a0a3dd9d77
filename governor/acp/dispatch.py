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

Built on jsonrpcserver 5's public API only (what its package exports): a
handler may raise its `JsonRpcError` or return its `Result`. Its package is
never imported here at start-up (it pulls in jsonschema, referencing, attrs,
oslash and ``http.server``): `RpcError`
is ours, and jsonrpcserver's classes are looked up in ``sys.modules`` when a
handler's exception or return value is not ours (`_theirs`), which is sound,
since a handler can only raise or return one of them once it has imported it. A `Result` is oslash's ``Either``, which keeps its error in a private
attribute, so the one public way to read it is jsonrpcserver's own dispatch
(`dispatch_to_serializable`), used here for that rare case only. Our own
answers are `Encoded` bytes (a schema model's result, the path every permission
answer takes), a JSON-ready `Value`, or a `Failure`, shaped into a line here.
Not used: its dispatch for every request, which costs ~20 us a request (about
a tenth of a permission's whole handling), binds params to a Python signature
where the schema models are the validation, puts a failed handler's exception
text on the wire (a secret it may hold) and re-parses JSON text we already
parsed; its `async_dispatch`, which awaits through `asyncio.gather` and fails
under trio (the await is ours: `_finish`); its request JSON schema check, which
the sans-IO core already does, cheaper.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final, NamedTuple, TypeAlias, cast

import structlog
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


class _Omitted:
    __slots__ = ()

    def __repr__(self) -> str:
        return "OMITTED"


OMITTED: Final = _Omitted()
"""The ``data`` of an error raised or made without any: the answer then has no
``data`` member, where ``None`` would be sent as ``null``."""


class RpcError(Exception):
    """Raise in a handler to answer with a JSON-RPC error (``data`` omitted if None)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        Exception.__init__(self, code, message)
        self.code, self.message = code, message
        self.data: Any = OMITTED if data is None else data

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class Encoded(bytes):
    """A result already encoded as JSON (a schema model, by pydantic's own
    serializer), spliced into the response line as it is."""

    __slots__ = ()


class Value(NamedTuple):
    """A JSON-ready result, encoded with the response line (which fails there,
    answered ``-32603``, when it is not JSON)."""

    result: Any


class Failure(NamedTuple):
    """An error answer; ``data`` is left out of the line when it is `OMITTED`."""

    code: int
    message: str
    data: Any = OMITTED


Answer: TypeAlias = "Encoded | Value | Failure"
"""What a request is answered with: a schema model's result already encoded
(`Encoded`, the usual case), another result (`Value`), or an error (`Failure`)."""


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
        return Failure(METHOD_NOT_FOUND, f"Method not found: {short(method)}")
    model, handler = route
    try:
        validated = model.__pydantic_validator__.validate_python(params)  # = model_validate
    except ValidationError as exc:
        message, data = invalid_params(exc)
        return Failure(INVALID_PARAMS, message, data)
    try:
        value = handler(validated)
    except RpcError as exc:
        return Failure(exc.code, exc.message, exc.data)
    except Exception as exc:
        if (failure := _theirs(exc)) is not None:
            return failure
        log.error("handler.failed", method=method, error=type(exc).__name__, exc_info=True)
        return Failure(INTERNAL_ERROR, f"Internal error ({type(exc).__name__})")
    if isinstance(value, BaseModel):  # answered at once, the usual case
        return as_result(value)
    if inspect.isawaitable(value):
        return _finish(method, value)
    return as_result(value)


async def _finish(method: str, pending: Awaitable[Any]) -> Answer:
    try:
        value = await pending
    except RpcError as exc:
        return Failure(exc.code, exc.message, exc.data)
    except Exception as exc:
        if (failure := _theirs(exc)) is not None:
            return failure
        log.error("handler.failed", method=method, error=type(exc).__name__, exc_info=True)
        return Failure(INTERNAL_ERROR, f"Internal error ({type(exc).__name__})")
    return as_result(value)


def as_result(value: Any) -> Answer:
    """A handler's return value as an `Answer`: `Encoded` for a schema model, the
    answer a jsonrpcserver `Result` holds, else a `Value`.

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
            return Value(value.model_dump(mode="json", by_alias=True, exclude_none=True))
    if type(value) is Encoded:
        return value
    if _is_their_result(value):
        return _read(value)
    return Value({} if value is None else value)


def _theirs(exc: Exception) -> Failure | None:
    """jsonrpcserver's `JsonRpcError` as a `Failure`, else None: looked up in
    ``sys.modules``, not imported (module docstring: why; a handler that raised
    it has imported it)."""
    if sys.modules.get("jsonrpcserver") is None:
        return None
    from jsonrpcserver import JsonRpcError

    if not isinstance(exc, JsonRpcError):
        return None
    data = OMITTED if exc.data is JsonRpcError(0, "").data else exc.data
    return Failure(exc.code, exc.message, data)


def _is_their_result(value: Any) -> bool:
    """Whether `value` is what jsonrpcserver's `Success` or `Error` makes (looked
    up as `_theirs` does)."""
    if sys.modules.get("jsonrpcserver") is None:
        return False
    from jsonrpcserver import Error, Success

    return isinstance(value, (type(Success()), type(Error(0, ""))))


_READ_REQUEST: Final = {"jsonrpc": "2.0", "method": "read", "id": 0}


def _as_given(request: Any) -> Any:
    return request


def _read(result: Any) -> Answer:
    """A jsonrpcserver `Result` as an `Answer`, read through jsonrpcserver's
    dispatch answering a request whose method returns it (module docstring: why)."""
    from jsonrpcserver import dispatch_to_serializable

    response = cast(
        "dict[str, Any]",
        dispatch_to_serializable(
            _READ_REQUEST, {"read": lambda: result}, deserializer=_as_given, validator=_as_given
        ),
    )
    error = response.get("error")
    if error is None:
        return as_result(response["result"])
    return Failure(error["code"], error["message"], error.get("data", OMITTED))


def reply(id: JsonId, answer: Answer) -> bytes:
    """The response line for the agent's request `id`.

    A result that cannot be encoded (not JSON, NaN) becomes ``-32603`` rather
    than an exception: the agent still gets its answer.
    """
    if type(answer) is Encoded:  # the hot path
        return b'{"jsonrpc":"2.0","id":%s,"result":%s}\n' % (encode_id(id), answer)
    payload: dict[str, Any]
    if isinstance(answer, Failure):
        error: dict[str, Any] = {"code": answer.code, "message": answer.message}
        if answer.data is not OMITTED:
            error["data"] = answer.data
        payload = {"jsonrpc": "2.0", "error": error, "id": id}
    else:
        payload = {"jsonrpc": "2.0", "id": id, "result": cast(Value, answer).result}
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
