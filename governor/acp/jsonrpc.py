"""Newline-delimited JSON-RPC 2.0, sans-IO: bytes in, events out; messages in, bytes out.

Everything that decides what a line on the agent's stdout *means* lives here,
and nothing here does I/O: `JsonRpc.feed(data)` turns bytes into events, the
encoders turn messages into lines. The trio loop in `governor.acp.connection` is a
thin shell around this class, and a test can drive it with plain bytes.

Rules of this file:

- One message per line, compact UTF-8 JSON, ended by ``\\n``. A line that is
  not UTF-8 or not JSON is `Malformed` with a ``-32700`` reply (``id: null``),
  a JSON value that is not an object is ``-32600``, a JSON array (a batch) is
  ``-32600`` "JSON-RPC batches are not supported". Blank lines are skipped.
- A line longer than ``max_line_bytes`` is never held: its bytes are counted
  and discarded up to the next newline, then it becomes one `Malformed` event
  that names the limit. Memory stays bounded by the limit plus one chunk.
- A message with a string ``method`` is the agent's: a `Request` when it has
  an ``id`` (even if it calls itself a notification), a `Notification`
  otherwise. A message without ``method`` but with ``id`` is a response to
  *us*. The two id spaces never meet: both sides count from 0, and the agent's
  ids may be strings.
- Our ids are ints from 0. A response correlates only to an id we issued and
  have not `forget`-ten; anything else is an `UnknownResponse`.
- Newlines are found in each chunk as it arrives (``bytes.split``), never by
  re-scanning what is already buffered; a long line is collected as a list of
  chunks and joined once, so a long line costs one copy, not one per chunk.
- Events are plain slotted records (not frozen: a frozen dataclass sets each
  field through ``object.__setattr__``, and every notification builds one);
  treat them as read-only.
- Leniency where real agents are sloppy: ``"jsonrpc": "2.0"`` is not checked,
  a response with neither ``result`` nor ``error`` is a ``null`` result (a
  JavaScript ``undefined`` result serialises that way), ``"error": null`` next
  to a result is no error.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import orjson

from governor.policies.errors import clipped

DEFAULT_MAX_LINE_BYTES: Final = 32 * 1024 * 1024
"""The TypeScript SDK's default; images travel base64-encoded, so lines can be big."""

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
REQUEST_CANCELLED: Final = -32800
"""ACP: the answer to a request the peer withdrew with ``$/cancel_request``."""
AUTH_REQUIRED: Final = -32000
RESOURCE_NOT_FOUND: Final = -32002

PREFIX_BYTES: Final = 20
"""How much of a bad line a `Malformed` event (and so a log line) may show.

Lines can carry secrets (file contents, tokens in stray console output); a
short prefix is enough to recognise "Debugger listening on ..." and no more.
"""

SHORT_CHARS: Final = 100
"""How much of a string the agent chose (a method name, an id) a message or log repeats."""


def short(text: str, limit: int = SHORT_CHARS) -> str:
    """`text`, cut to `limit` characters with ``...`` when longer."""
    return text if len(text) <= limit else text[:limit] + "..."


def short_error(e: BaseException, limit: int = 300) -> str:
    """An exception (a remote error, a closed pipe, a timeout) as one short line
    for a reason: its type when it says nothing."""
    return clipped(str(e) or type(e).__name__, limit)


_SNIFF_BYTES: Final = 256
"""How much of an over-long line is kept to find the request id to answer."""

JsonId: TypeAlias = int | str | None
"""An id we accept: an integer, a string, or null.

JSON-RPC also allows fractional numbers "but SHOULD NOT"; they are refused
here because ``1e400`` parses as infinity, which no JSON answer can echo.
"""

_ID_TYPES: Final = frozenset({int, str, type(None)})  # not bool, float or containers

_loads = json.loads
MAX_DEPTH: Final = 64
"""The deepest nesting a message may have. Every reader after the wire (the
audit log's writer, ``--json``, ``--events``, the audit tools) recurses over
values; an ACP message has a handful of levels, a model's tool input a few more."""

_BOM: Final = b"\xef\xbb\xbf"


def _strict_loads(line: bytes) -> Any:
    """One line as strict JSON (RFC 8259, which every later reader takes): orjson
    refuses NaN and Infinity, a number beyond a double, a lone surrogate and
    invalid UTF-8, where the stdlib would take them and the audit log would
    hold what a strict reader cannot read back. A BOM before the value is
    allowed, as the stdlib's reader allows it."""
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        if line.startswith(_BOM):
            return orjson.loads(line[len(_BOM) :])
        raise


def _too_deep(value: Any) -> bool:
    """Whether ``value`` nests deeper than `MAX_DEPTH` (iterative: no recursion)."""
    level: list[Any] = [value]
    for _ in range(MAX_DEPTH):
        level = [
            child
            for item in level
            for child in (item.values() if type(item) is dict else item if type(item) is list else ())
            if type(child) is dict or type(child) is list
        ]
        if not level:
            return False
    return True


_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
_encode_ascii = json.JSONEncoder(separators=(",", ":"), ensure_ascii=True, allow_nan=False).encode


# --- events -------------------------------------------------------------------------


@dataclass(slots=True)
class Request:
    """The agent asks us something and waits for an answer with this `id`."""

    id: JsonId
    method: str
    params: Any


@dataclass(slots=True)
class Notification:
    """The agent tells us something; no answer is expected."""

    method: str
    params: Any


@dataclass(slots=True)
class Response:
    """The agent's result for one of OUR requests (its id is one we issued)."""

    id: int
    result: Any


@dataclass(slots=True)
class ErrorResponse:
    """The agent's error for one of OUR requests.

    A malformed error object still fails the request (as ``-32603``, the raw
    object in `data`), so a caller never waits forever on a garbled answer.
    """

    id: int
    code: int
    message: str
    data: Any = None


@dataclass(slots=True)
class UnknownResponse:
    """A response to an id we never issued, already answered, or forgot.

    `code` is the error code when it was an error response; ``id: null``
    errors (the agent could not read something we sent) land here too.
    """

    id: Any
    code: int | None = None


@dataclass(slots=True)
class Malformed:
    """A line that is not a JSON-RPC message we can use.

    `reply` is the error line to send back (``None`` when answering would be
    wrong or impossible, e.g. a bad response or an over-long line whose id we
    could not see). `length` is the line's size in bytes; `prefix` is at most
    `PREFIX_BYTES` of it, for logs; `method` the method it names, when it
    could be read (from the line read leniently, or from the leading members
    of an over-long one), cut to `SHORT_CHARS`: what an audit record of the
    line may say of it, never its text.
    """

    reason: str
    reply: bytes | None
    length: int
    prefix: str
    method: str | None = None


Event: TypeAlias = Request | Notification | Response | ErrorResponse | UnknownResponse | Malformed


# --- encoding -----------------------------------------------------------------------


def encode(message: dict[str, Any]) -> bytes:
    """One message as one compact UTF-8 line, newline included.

    Strings holding lone surrogates (a filename decoded with
    ``surrogateescape``) cannot be UTF-8; they are sent as ``\\udcxx`` escapes
    instead of failing the message. NaN and infinities raise `ValueError`:
    they are not JSON and the peer could not parse them.
    """
    try:
        return _encode(message).encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        return _encode_ascii(message).encode("ascii") + b"\n"


def encode_id(id: JsonId) -> bytes:
    """A request id as JSON (an int, a string, or null)."""
    try:
        return orjson.dumps(id)
    except orjson.JSONEncodeError:  # a lone surrogate, or an int beyond 64 bits
        return _encode_ascii(id).encode("ascii")


def error_line(id: JsonId, code: int, message: str, data: Any = None) -> bytes:
    """An error response line; `data` is omitted when it is ``None``."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return encode({"jsonrpc": "2.0", "id": id, "error": error})


_REPLY_NOT_UTF8: Final = error_line(None, PARSE_ERROR, "Parse error: the line is not UTF-8")
_REPLY_NOT_JSON: Final = error_line(
    None,
    PARSE_ERROR,
    "Parse error: the line is not strict JSON (RFC 8259: no NaN or Infinity, no lone"
    " surrogates, numbers within a double)",
)
_REPLY_TOO_DEEP: Final = error_line(
    None, PARSE_ERROR, f"Parse error: the message nests deeper than {MAX_DEPTH} levels"
)
_REPLY_BATCH: Final = error_line(None, INVALID_REQUEST, "JSON-RPC batches are not supported")
_REPLY_NOT_OBJECT: Final = error_line(
    None, INVALID_REQUEST, "Invalid request: a JSON-RPC message must be a JSON object"
)
_REPLY_BAD_ID: Final = error_line(
    None, INVALID_REQUEST, "Invalid request: id must be a string, an integer or null"
)
_REPLY_NO_METHOD: Final = error_line(
    None, INVALID_REQUEST, "Invalid request: neither a request (method) nor a response (id)"
)
_REPLY_BAD_METHOD: Final = error_line(
    None, INVALID_REQUEST, "Invalid request: method must be a string"
)


# --- the state machine --------------------------------------------------------------


class JsonRpc:
    """Framing and id correlation for one JSON-RPC peer connection, without I/O.

    Feed it whatever the agent's stdout gave you, in chunks of any size; it
    returns the complete messages as events, in order. Encode what you send
    with `request`, `notify`, `result` and `error`.
    """

    __slots__ = ("_head", "_limit", "_next_id", "_parts", "_parts_len", "_pending", "_skipped")

    def __init__(self, *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        if max_line_bytes < 1:
            raise ValueError(f"max_line_bytes must be at least 1, got {max_line_bytes}")
        self._limit = max_line_bytes
        self._next_id = 0
        self._pending: set[int] = set()
        # The unterminated tail of the stream, as chunks (joined once, at its newline).
        self._parts: list[bytes] = []
        self._parts_len = 0
        # While discarding an over-long line: its first bytes, and how many we saw.
        self._head: bytes | None = None
        self._skipped = 0

    @property
    def max_line_bytes(self) -> int:
        """The longest line (without its newline) that is parsed."""
        return self._limit

    @property
    def pending(self) -> frozenset[int]:
        """Our request ids that still wait for a response."""
        return frozenset(self._pending)

    @property
    def buffered(self) -> int:
        """Bytes held for an unfinished line (never more than `max_line_bytes`)."""
        return self._parts_len

    # --- outgoing ---

    def request(self, method: str, params: Any = None) -> tuple[int, bytes]:
        """A new request of ours: its id (now pending) and its line."""
        id = self._next_id
        self._next_id = id + 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
        if params is not None:
            message["params"] = params
        line = encode(message)
        self._pending.add(id)
        return id, line

    def notify(self, method: str, params: Any = None) -> bytes:
        """A notification line (no id, no answer)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        return encode(message)

    def result(self, id: JsonId, value: Any) -> bytes:
        """The success line answering the agent's request `id`."""
        return encode({"jsonrpc": "2.0", "id": id, "result": value})

    def error(self, id: JsonId, code: int, message: str, data: Any = None) -> bytes:
        """The error line answering the agent's request `id` (``data`` omitted if None)."""
        return error_line(id, code, message, data)

    def forget(self, id: int) -> None:
        """Stop waiting for `id` (timed out, cancelled): a late answer is then unknown."""
        self._pending.discard(id)

    # --- incoming ---

    def feed(self, data: bytes) -> list[Event]:
        """The events completed by `data`, in order. Never raises on any input."""
        events: list[Event] = []
        lines = data.split(b"\n")
        rest = lines.pop()  # what follows the last newline: an unfinished line
        start = 0
        if not lines:  # no newline in this chunk
            self._hold(rest)
            return events
        if self._head is not None:
            self._skipped += len(lines[0])
            events.append(self._too_long(self._head, self._skipped))
            self._head = None
            self._skipped = 0
            start = 1
        elif self._parts:
            self._parts.append(lines[0])
            lines[0] = b"".join(self._parts)
            self._parts = []
            self._parts_len = 0
        limit = self._limit
        parse = self._parse
        for i in range(start, len(lines)):
            line = lines[i]
            if len(line) > limit:
                events.append(self._too_long(line[: self._sniff_window()], len(line)))
            elif line:
                parse(line, events)
        if rest:
            self._hold(rest)
        return events

    def feed_eof(self) -> list[Event]:
        """The stream ended: an unterminated last line still counts as a line."""
        events: list[Event] = []
        if self._head is not None:
            events.append(self._too_long(self._head, self._skipped))
            self._head = None
            self._skipped = 0
        elif self._parts:
            line = b"".join(self._parts)
            self._parts = []
            self._parts_len = 0
            self._parse(line, events)
        return events

    def _sniff_window(self) -> int:
        return min(_SNIFF_BYTES, self._limit)

    def _hold(self, piece: bytes) -> None:
        """Keep an unfinished line's bytes, or count them once it is too long."""
        if not piece:
            return
        if self._head is not None:
            self._skipped += len(piece)
            return
        total = self._parts_len + len(piece)
        if total <= self._limit:
            self._parts.append(piece)
            self._parts_len = total
            return
        window = self._sniff_window()
        head = b""
        for part in (*self._parts, piece):
            if len(head) >= window:
                break
            head += part[: window - len(head)]
        self._head = head
        self._skipped = total
        self._parts = []
        self._parts_len = 0

    def _too_long(self, head: bytes, length: int) -> Malformed:
        reason = f"a line of {length} bytes exceeds the {self._limit}-byte limit (max_line_bytes)"
        reply = None
        members = _leading_members(head)
        id = _request_id(members)
        if id is not _NO_ID:
            reply = error_line(
                id,
                INVALID_REQUEST,
                f"Invalid request: the message is {length} bytes, over the "
                f"{self._limit}-byte line limit",
            )
        return Malformed(reason, reply, length, _prefix(head), _method_of(members))

    def _parse(self, line: bytes, events: list[Event]) -> None:
        """Classify one complete line (the hot path: keep the common case short)."""
        try:
            message = _strict_loads(line)
        except orjson.JSONDecodeError as e:
            if not line.strip():
                return
            try:
                line.decode("utf-8")
            except UnicodeDecodeError:
                events.append(Malformed("not UTF-8", _REPLY_NOT_UTF8, len(line), _prefix(line)))
                return
            method = None
            try:  # the error path only: which words the log gets
                loose = _loads(line)
                why = f"not strict JSON ({e.msg})"
                method = _method_of(loose)
            except (ValueError, RecursionError):
                why = "not JSON"
            events.append(Malformed(why, _REPLY_NOT_JSON, len(line), _prefix(line), method))
            return
        # counting brackets is cheap; only a line with many of them is walked
        if line.count(b"[") + line.count(b"{") > MAX_DEPTH and _too_deep(message):
            events.append(
                Malformed(
                    "nested too deep", _REPLY_TOO_DEEP, len(line), _prefix(line), _method_of(message)
                )
            )
            return
        if type(message) is dict:
            method = message.get("method")
            if type(method) is str:
                if "id" not in message:
                    events.append(Notification(method, message.get("params")))
                    return
                id = message["id"]
                if type(id) in _ID_TYPES:
                    events.append(Request(id, method, message.get("params")))
                else:
                    events.append(
                        Malformed(
                            "request id of a bad type",
                            _REPLY_BAD_ID,
                            len(line),
                            _prefix(line),
                            short(method),
                        )
                    )
                return
            if method is not None:
                events.append(
                    Malformed("method is not a string", _REPLY_BAD_METHOD, len(line), _prefix(line))
                )
            elif "id" in message:
                events.append(self._response(message))
            else:
                events.append(
                    Malformed(
                        "neither request nor response", _REPLY_NO_METHOD, len(line), _prefix(line)
                    )
                )
        elif type(message) is list:
            events.append(Malformed("a batch", _REPLY_BATCH, len(line), _prefix(line)))
        else:
            events.append(Malformed("not an object", _REPLY_NOT_OBJECT, len(line), _prefix(line)))

    def _response(self, message: dict[str, Any]) -> Event:
        id = message["id"]
        error = message.get("error")
        if type(id) is int and id in self._pending:
            self._pending.discard(id)
            if error is None:
                return Response(id, message.get("result"))
            if (
                type(error) is dict
                and type(error.get("code")) is int
                and type(error.get("message")) is str
            ):
                return ErrorResponse(id, error["code"], error["message"], error.get("data"))
            return ErrorResponse(id, INTERNAL_ERROR, "malformed error object from the agent", error)
        code = error.get("code") if type(error) is dict else None
        return UnknownResponse(id, code if type(code) is int else None)


def _prefix(line: bytes) -> str:
    return line[:PREFIX_BYTES].decode("utf-8", "replace")


_NO_ID: Final = object()
_LEADING_PAIRS: Final = re.compile(
    rb'\s*\{((?:\s*"(?:[^"\\]|\\.)*"\s*:\s*'
    rb'(?:"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null)\s*,)*)'
)
_PAIR: Final = re.compile(rb'"((?:[^"\\]|\\.)*)"\s*:\s*("(?:[^"\\]|\\.)*"|[^,\s]+)\s*,')


def _method_of(message: Any) -> str | None:
    """The method a message names, cut to `SHORT_CHARS`, or None."""
    if type(message) is dict and type(method := message.get("method")) is str:
        return short(method)
    return None


def _leading_members(head: bytes) -> dict[str, Any] | None:
    """The scalar members an over-long line begins with, or None.

    SDKs write ``{"jsonrpc":"2.0","id":5,"method":"...","params":{...`` so the
    scalar members before ``params`` are enough to answer the agent, which would
    otherwise wait forever for a request we could not read. Only leading scalar
    members are trusted: they are certainly top-level keys.
    """
    match = _LEADING_PAIRS.match(head)
    if match is None:
        return None
    members: dict[str, Any] = {}
    for key, value in _PAIR.findall(match.group(1)):
        try:
            members[_loads(b'"' + key + b'"')] = _loads(value)
        except ValueError:
            return None
    return members


def _request_id(members: dict[str, Any] | None) -> Any:
    """The id of a request whose leading members are ``members``, or `_NO_ID`."""
    if members is None or type(members.get("method")) is not str or "id" not in members:
        return _NO_ID
    id = members["id"]
    return id if type(id) in _ID_TYPES else _NO_ID
