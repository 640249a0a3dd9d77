"""HTTP/1.1 as the egress proxy needs it (RFC 9112): message heads and where a
body ends, sans-IO, strict.

The proxy forwards bodies as they came (a chunked body stays chunked, byte for
byte), so what it needs from a message is its head and where its body ends:
`parse_request` and `parse_response` read a head (everything up to the empty
line) and `Framing` says what follows it; `Chunked` follows a chunked body to
its end without changing it.

Strict where leniency is how requests are smuggled past a proxy: a header name
with a space before its colon, a folded header, a bare CR or LF, both
Content-Length and Transfer-Encoding, Content-Lengths that disagree, a
transfer coding other than ``chunked`` in a request: each is an `HttpError`
naming what is wrong (400; a head too long is 431). What this file accepts,
h11 reads the same way (tests/sandbox/test_http1.py, with generated heads);
what it refuses and h11 takes, that test lists with why. It exists because
h11, on both sides of every forwarded request, cost ~90 us of the ~430 us the
proxy added to a small request (bench/README.md); this costs ~26 us.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Final

_TOKEN: Final = rb"[-!#$%&'*+.^_`|~0-9A-Za-z]+"
_VCHAR_OBS: Final = rb"[\x21-\x7e\x80-\xff]"
_REQUEST_LINE: Final = re.compile(rb"(%s) ([\x21-\x7e]+) HTTP/(1\.[01])" % _TOKEN)
_STATUS_LINE: Final = re.compile(rb"HTTP/(1\.[01]) ([0-9]{3})(?: ([\t \x21-\x7e\x80-\xff]*))?")
_FIELD: Final = re.compile(
    rb"(%s):[\t ]*(%s(?:[\t \x21-\x7e\x80-\xff]*%s)?)?[\t ]*" % (_TOKEN, _VCHAR_OBS, _VCHAR_OBS)
)
_CHUNK_SIZE: Final = re.compile(rb"([0-9A-Fa-f]{1,16})[\t ]*(?:;[^\r\n]*)?")

HOP_BY_HOP: Final = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"transfer-encoding",
        b"upgrade",
    }
)
"""Headers that describe one connection, never forwarded as they are (RFC 9110
7.6.1), with those a ``Connection`` header names."""

LINE_BYTES: Final = 8 * 1024
"""The longest chunk-size or trailer line `Chunked` accepts."""


class HttpError(Exception):
    """A message the proxy will not forward: ``status`` to answer, ``reason`` why."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


@dataclass(slots=True)
class Head:
    """A request or response head: its start line's parts and its fields
    (names lower case, values without surrounding whitespace), in order."""

    version: bytes
    """``HTTP/1.1`` or ``HTTP/1.0``."""
    fields: list[tuple[bytes, bytes]]
    method: bytes = b""
    """A request's."""
    target: bytes = b""
    """A request's."""
    status: int = 0
    """A response's."""
    reason: bytes = b""
    """A response's."""
    index: dict[bytes, list[bytes]] = field(init=False, repr=False, compare=False)
    """The fields' values by name (a head is asked for its fields several times)."""

    def __post_init__(self) -> None:
        self.index = {}
        for key, value in self.fields:
            self.index.setdefault(key, []).append(value)

    def values(self, name: bytes) -> list[bytes]:
        """Every value of the field ``name`` (lower case), comma lists split."""
        found = self.index.get(name)
        if found is None:
            return []
        return [v for value in found for part in value.split(b",") if (v := part.strip())]

    def forwarded(self) -> list[tuple[bytes, bytes]]:
        """The fields an intermediary passes on: not hop-by-hop, not named by
        a ``Connection`` field."""
        named = {v.lower() for v in self.values(b"connection")}
        return [(k, v) for k, v in self.fields if k not in HOP_BY_HOP and k not in named]

    @property
    def close(self) -> bool:
        """Whether this message ends its connection (``Connection: close``, or
        HTTP/1.0 without ``keep-alive``)."""
        tokens = {v.lower() for v in self.values(b"connection")}
        if self.version == b"HTTP/1.0":
            return b"keep-alive" not in tokens
        return b"close" in tokens


def head_end(buffer: bytes | bytearray, limit: int, start: int = 0) -> int:
    """Where the head in ``buffer`` ends (the index after its empty line), or
    -1 while it is incomplete; `HttpError` (431) once ``limit`` bytes hold no
    end, (400) at a bare LF line end. ``start``: where to look from (the
    length already searched, less 3: a head sent a byte at a time is not
    searched from its start again at each byte)."""
    end = buffer.find(b"\r\n\r\n", start)
    if end >= 0 and end + 4 <= limit:
        return end + 4
    if end < 0 and buffer.find(b"\n\n", start, limit) >= 0:
        raise HttpError(400, "malformed head: a line ends in a bare LF")
    if len(buffer) >= limit or end >= 0:
        raise HttpError(431, f"the head is over {limit} bytes")
    return -1


def _fields(lines: list[bytes]) -> list[tuple[bytes, bytes]]:
    fields: list[tuple[bytes, bytes]] = []
    for line in lines:
        match = _FIELD.fullmatch(line)
        if match is None:
            shown = line[:80].decode("ascii", "backslashreplace")
            if line[:1] in (b" ", b"\t"):
                raise HttpError(400, f"malformed head: a folded header line ({shown!r})")
            raise HttpError(400, f"malformed head: {shown!r} is not a header field")
        fields.append((match[1].lower(), match[2] or b""))
    return fields


def _lines(block: bytes) -> list[bytes]:
    """A head's lines (the block up to but not including its empty line)."""
    lines = block.split(b"\r\n")
    for line in lines:
        if b"\r" in line or b"\n" in line or b"\0" in line:
            raise HttpError(400, "malformed head: a bare CR, LF or NUL")
    return lines


def parse_request(block: bytes) -> Head:
    """A request head from ``block`` (up to its empty line, which is left off);
    a few empty lines before the request line are ignored (RFC 9112 2.2)."""
    lines = _lines(block.lstrip(b"\r\n"))
    match = _REQUEST_LINE.fullmatch(lines[0])
    if match is None:
        shown = lines[0][:120].decode("ascii", "backslashreplace")
        raise HttpError(400, f"malformed request line {shown!r}")
    head = Head(b"HTTP/" + match[3], _fields(lines[1:]), method=match[1], target=match[2])
    hosts = head.index.get(b"host", [])
    if len(hosts) > 1:
        raise HttpError(400, "more than one Host header")
    if not hosts and head.version == b"HTTP/1.1":
        raise HttpError(400, "an HTTP/1.1 request without a Host header")
    return head


def parse_response(block: bytes) -> Head:
    """A response head from ``block`` (up to its empty line, left off)."""
    lines = _lines(block)
    match = _STATUS_LINE.fullmatch(lines[0])
    if match is None:
        shown = lines[0][:120].decode("ascii", "backslashreplace")
        raise HttpError(502, f"the server sent a malformed status line {shown!r}")
    try:
        fields = _fields(lines[1:])
    except HttpError as e:
        raise HttpError(502, f"the server sent a {e.reason}") from None
    return Head(b"HTTP/" + match[1], fields, status=int(match[2]), reason=match[3] or b"")


@dataclass(frozen=True, slots=True)
class Framing:
    """What follows a head: ``length`` bytes, a chunked body, or everything
    until the connection closes (a response only)."""

    length: int = 0
    chunked: bool = False
    until_close: bool = False

    @property
    def empty(self) -> bool:
        return not (self.length or self.chunked or self.until_close)


_NO_BODY: Final = Framing()


def _content_length(head: Head, status: int) -> int | None:
    values = head.values(b"content-length")
    if not values:
        return None
    if len(set(values)) > 1 or not values[0].isdigit() or len(values[0]) > 18:
        shown = b", ".join(values)[:80].decode("ascii", "backslashreplace")
        raise HttpError(status, f"a bad or disagreeing Content-Length ({shown!r})")
    return int(values[0])


def request_framing(head: Head) -> Framing:
    """A request's body (RFC 9112 6.3): chunked, a Content-Length, or none."""
    codings = [v.lower() for v in head.values(b"transfer-encoding")]
    length = _content_length(head, 400)
    if codings:
        if length is not None:
            raise HttpError(400, "both Transfer-Encoding and Content-Length (refused: smuggling)")
        if codings != [b"chunked"] or head.version != b"HTTP/1.1":
            shown = b", ".join(codings)[:80].decode("ascii", "backslashreplace")
            raise HttpError(400, f"a request transfer coding other than chunked ({shown!r})")
        return Framing(chunked=True)
    return Framing(length=length) if length else _NO_BODY


def response_framing(head: Head, method: bytes) -> Framing:
    """A response's body (RFC 9112 6.3) to a request of ``method``."""
    if method == b"HEAD" or head.status < 200 or head.status in (204, 304):
        return _NO_BODY
    codings = [v.lower() for v in head.values(b"transfer-encoding")]
    if codings:
        if codings[-1] == b"chunked" and head.version == b"HTTP/1.1":
            return Framing(chunked=True)
        return Framing(until_close=True)
    length = _content_length(head, 502)
    if length is None:
        return Framing(until_close=True)
    return Framing(length=length) if length else _NO_BODY


class Chunked:
    """Follows a chunked body (RFC 9112 7.1) fed in pieces, to find its end;
    the bytes themselves pass on unchanged."""

    __slots__ = ("_left", "_line", "_state")

    def __init__(self) -> None:
        self._state = "size"  # size, data, data-end, trailer
        self._left = 0
        self._line = bytearray()

    def feed(self, data: bytes | bytearray | memoryview) -> int:
        """How many bytes at the start of ``data`` belong to the body: all of
        them while it goes on, fewer once it ended (`done`). `HttpError` (400) at
        a malformed size or trailer line."""
        at = 0
        size = len(data)
        while at < size and self._state != "done":
            if self._state == "data":
                take = min(self._left, size - at)
                at += take
                self._left -= take
                if not self._left:
                    self._state = "data-end"
                continue
            newline = bytes(data[at : at + LINE_BYTES + 2]).find(b"\n")
            if newline < 0:
                self._line += data[at:size]
                at = size
                if len(self._line) > LINE_BYTES:
                    raise HttpError(400, "a chunked body's line is too long")
                break
            self._line += data[at : at + newline + 1]
            at += newline + 1
            self._end_line()
        return at

    def _end_line(self) -> None:
        line = bytes(self._line)
        self._line.clear()
        if len(line) > LINE_BYTES or not line.endswith(b"\r\n"):
            raise HttpError(400, "a chunked body's line is malformed (bare LF or too long)")
        line = line[:-2]
        if self._state == "data-end":
            if line:
                raise HttpError(400, "a chunk's data is longer than its size")
            self._state = "size"
        elif self._state == "size":
            match = _CHUNK_SIZE.fullmatch(line)
            if match is None:
                shown = line[:40].decode("ascii", "backslashreplace")
                raise HttpError(400, f"a chunk size {shown!r} is not hexadecimal")
            self._left = int(match[1], 16)
            self._state = "data" if self._left else "trailer"
        elif not line:  # the empty line after the trailers: the end
            self._state = "done"
        elif _FIELD.fullmatch(line) is None:
            raise HttpError(400, "a chunked body's trailer is not a header field")

    @property
    def done(self) -> bool:
        return self._state == "done"


__all__ = [
    "HOP_BY_HOP",
    "Chunked",
    "Framing",
    "Head",
    "HttpError",
    "head_end",
    "parse_request",
    "parse_response",
    "request_framing",
    "response_framing",
]
