"""governor.sandbox.net.http1 against h11: never more lenient, the same heads, the same body ends.

h11 is the reference: whatever head `parse_request` accepts, h11 accepts too,
with the same method, target, fields and body framing, and a body ends at
the same byte for both. Where we refuse what h11 takes, the case is listed
below with why (each a way to smuggle a request past a proxy, or what a
proxy may not forward as it is).
"""

from __future__ import annotations

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governor.sandbox.net import http1


def h11_request(data: bytes) -> tuple[h11.Request, bytes, bool] | str:
    """h11's reading of a request: the head, its body and whether the body
    ended within ``data``; or the error h11 gave."""
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(data)
    try:
        event = conn.next_event()
        if not isinstance(event, h11.Request):
            return f"no request ({event!r})"
        body, ended = b"", False
        while True:
            part = conn.next_event()
            if isinstance(part, h11.Data):
                body += part.data
            elif isinstance(part, h11.EndOfMessage):
                ended = True
                break
            else:
                break
        return event, body, ended
    except h11.RemoteProtocolError as e:
        return f"h11: {e}"


def ours(data: bytes) -> tuple[http1.Head, http1.Framing, int, int | None] | str:
    """Our reading: the head, its framing, where the head ends and where the
    body ends (None: not within ``data``); or the error, in the head or the body."""
    try:
        end = http1.head_end(data, 64 * 1024)
        if end < 0:
            return "incomplete"
        head = http1.parse_request(data[: end - 4])
        framing = http1.request_framing(head)
        return head, framing, end, body_end(framing, data, end)
    except http1.HttpError as e:
        return f"ours: {e.status} {e.reason}"


def body_end(framing: http1.Framing, data: bytes, start: int) -> int | None:
    """Where the body that starts at ``start`` ends, by our framing (None: not in ``data``)."""
    if framing.chunked:
        chunked = http1.Chunked()
        used = chunked.feed(data[start:])
        return start + used if chunked.done else None
    end = start + framing.length
    return end if end <= len(data) else None


def agree(data: bytes) -> None:
    """The property: accepted by us => accepted by h11, the same way."""
    mine, theirs = ours(data), h11_request(data)
    if isinstance(mine, str):
        return
    assert not isinstance(theirs, str), (data, mine, theirs)
    head, framing, end, stop = mine
    event, body, ended = theirs
    assert head.method == event.method and head.target == event.target, data
    assert head.version == b"HTTP/" + event.http_version, data
    framed = (b"content-length", b"transfer-encoding")  # h11 folds these: compared by framing
    names = [k for k, _ in head.fields if k not in framed]
    assert names == [k.lower() for k, _ in event.headers.raw_items() if k.lower() not in framed]
    mine_values = [v for k, v in head.fields if k not in framed]
    assert mine_values == [v for k, v in event.headers.raw_items() if k.lower() not in framed], data
    if stop is None:
        assert not ended, data
        return
    assert ended, (data, framing)
    if not framing.chunked:
        assert body == data[end:stop], data


GOOD = [
    b"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
    b"GET http://a:8080/x?y=1 HTTP/1.1\r\nHost: a:8080\r\nAccept: */*\r\nX-Empty:\r\n\r\n",
    b"POST http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello",
    b"POST http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc",
    b"POST http://a/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
    b"5\r\nhello\r\n3;ext=1\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n",
    b"POST http://a/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n0\r\n\r\n",
    b"GET http://a/ HTTP/1.0\r\n\r\n",
    b"GET http://a/ HTTP/1.1\r\nHost: a\r\nX: a\tb \t\r\nY: caf\xe9\r\n\r\n",
]


@pytest.mark.parametrize("data", GOOD)
def test_what_we_accept_h11_reads_the_same_way(data: bytes) -> None:
    assert not isinstance(ours(data), str), ours(data)
    agree(data)


STRICTER = {
    # h11 takes these; a proxy forwarding them is how requests are smuggled
    "both framings": b"POST http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n",
    "a folded header": b"GET http://a/ HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n",
    "bare LF lines": b"GET http://a/ HTTP/1.1\nHost: a\n\n",
    "a control byte": b"GET http://a/ HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n",
    "chunked over HTTP/1.0": b"POST http://a/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
    "a version not 1.x": b"GET http://a/ HTTP/2.0\r\nHost: a\r\n\r\n",
}
REFUSED_BY_BOTH = {
    "Content-Lengths that disagree": b"POST http://a/ HTTP/1.1\r\nHost: a\r\n"
    b"Content-Length: 3\r\nContent-Length: 4\r\n\r\n",
    "a space before the colon": b"GET http://a/ HTTP/1.1\r\nHost : a\r\n\r\n",
    "no Host in 1.1": b"GET http://a/ HTTP/1.1\r\n\r\n",
    "two Hosts": b"GET http://a/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n",
    "a NUL": b"GET http://a/ HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n",
    "a signed length": b"POST http://a/ HTTP/1.1\r\nHost: a\r\nContent-Length: +3\r\n\r\n",
    "gzip coding": b"POST http://a/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
    "two spaces": b"GET  http://a/ HTTP/1.1\r\nHost: a\r\n\r\n",
    # found by the generated test: a chunk longer than its size, in the body
    "a chunk over its size": b"POST http://a/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n"
    b"\r\n3\r\nabcd\r\n0\r\n\r\n",
}


@pytest.mark.parametrize("name", sorted(STRICTER))
def test_what_h11_takes_but_a_proxy_must_not_forward_is_refused_with_a_reason(name: str) -> None:
    data = STRICTER[name]
    assert not isinstance(h11_request(data), str), name
    mine = ours(data)
    assert isinstance(mine, str) and mine.startswith("ours: 400 "), mine


@pytest.mark.parametrize("name", sorted(REFUSED_BY_BOTH))
def test_what_h11_refuses_we_refuse(name: str) -> None:
    data = REFUSED_BY_BOTH[name]
    assert isinstance(h11_request(data), str), name
    mine = ours(data)
    assert isinstance(mine, str) and mine.startswith("ours: 400 "), mine


PIECES = [
    b"Host: a",
    b"Host: b",
    b"Content-Length: 3",
    b"Content-Length: 4",
    b"Content-Length: 3, 3",
    b"Content-Length: 03",
    b"Content-Length: 1e3",
    b"Transfer-Encoding: chunked",
    b"Transfer-Encoding: identity",
    b"Transfer-Encoding: chunked, chunked",
    b"transfer-encoding: CHUNKED",
    b"Transfer-Encoding : chunked",
    b"Transfer-Encoding:\tchunked",
    b"Transfer-Encoding: chunked ",
    b"Transfer-Encoding: \x0bchunked",
    b" Transfer-Encoding: chunked",
    b"X: y",
    b"X:",
    b"X: a\rb",
    b"X : y",
    b"X\x00: y",
    b"Connection: close",
    b"Expect: 100-continue",
]
LINES = [
    b"GET http://a/ HTTP/1.1",
    b"POST http://a/x HTTP/1.1",
    b"POST http://a/x HTTP/1.0",
    b"GET http://a/ HTTP/1.2",
    b"GET http://a/ http/1.1",
    b"GET http://a/\tHTTP/1.1",
    b"G@T http://a/ HTTP/1.1",
]
BODIES = [b"", b"abc", b"abcd", b"3\r\nabc\r\n0\r\n\r\n", b"3\r\nabcd\r\n0\r\n\r\n", b"x\r\n\r\n"]


@settings(max_examples=1500, deadline=None)
@given(
    st.sampled_from(LINES),
    st.lists(st.sampled_from(PIECES), max_size=5),
    st.sampled_from(BODIES),
)
def test_generated_requests_are_never_read_more_leniently_than_h11_reads_them(
    line: bytes, fields: list[bytes], body: bytes
) -> None:
    agree(b"\r\n".join([line, *fields]) + b"\r\n\r\n" + body)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(min_size=0, max_size=40), min_size=1, max_size=6), st.data())
def test_a_chunked_body_ends_where_h11_says_in_any_split(
    parts: list[bytes], data: st.DataObject
) -> None:
    body = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in parts if p) + b"0\r\nT: 1\r\n\r\n"
    wire = (
        b"POST http://a/ HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n" + body + b"NEXT"
    )
    theirs = h11_request(wire)
    assert not isinstance(theirs, str) and theirs[2] and theirs[1] == b"".join(parts)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(body)), max_size=8)))
    chunked, used, at = http1.Chunked(), 0, 0
    for cut in [*cuts, len(body) + 4]:
        piece = (body + b"NEXT")[at:cut]
        used += chunked.feed(piece)
        at = max(at, cut)
        if chunked.done:
            break
    assert chunked.done and used == len(body)


@pytest.mark.parametrize(
    "body",
    [b"g\r\nabc\r\n", b"3\r\nabcdef\r\n", b"3\nabc\n", b"3\r\nabc\r\n0\r\nbad trailer\r\n\r\n",
     b"1" * 20 + b"\r\n"],
)  # fmt: skip
def test_a_malformed_chunked_body_is_an_error_not_a_guess(body: bytes) -> None:
    with pytest.raises(http1.HttpError) as caught:
        http1.Chunked().feed(body)
    assert caught.value.status == 400 and "chunk" in caught.value.reason


def response(text: bytes) -> http1.Head:
    return http1.parse_response(text.split(b"\r\n\r\n")[0])


@pytest.mark.parametrize(
    ("head", "method", "framing"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 7", b"GET", http1.Framing(length=7)),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 7", b"HEAD", http1.Framing()),
        (b"HTTP/1.1 204 No Content", b"GET", http1.Framing()),
        (b"HTTP/1.1 304 Not Modified\r\nContent-Length: 7", b"GET", http1.Framing()),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked", b"GET", http1.Framing(chunked=True)),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip", b"GET", http1.Framing(until_close=True)),
        (b"HTTP/1.1 200 OK", b"GET", http1.Framing(until_close=True)),
        (b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked", b"GET", http1.Framing(until_close=True)),
        (b"HTTP/1.1 200", b"GET", http1.Framing(until_close=True)),
    ],
)
def test_a_responses_body_is_framed_as_rfc_9112_says(
    head: bytes, method: bytes, framing: http1.Framing
) -> None:
    assert http1.response_framing(response(head), method) == framing


def test_a_malformed_response_is_a_502_naming_it() -> None:
    with pytest.raises(http1.HttpError) as caught:
        http1.parse_response(b"HTTP/1.1 2000 OK")
    assert caught.value.status == 502 and "status line" in caught.value.reason
    with pytest.raises(http1.HttpError) as caught:
        http1.response_framing(response(b"HTTP/1.1 200 OK\r\nContent-Length: 1, 2"), b"GET")
    assert caught.value.status == 502


def test_hop_by_hop_fields_and_those_connection_names_are_not_forwarded() -> None:
    head = http1.parse_request(
        b"GET http://a/ HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Secret\r\n"
        b"X-Secret: s\r\nProxy-Authorization: Basic eA==\r\nAccept: */*"
    )
    assert head.forwarded() == [(b"host", b"a"), (b"accept", b"*/*")]
    assert not head.close
    assert http1.parse_request(b"GET http://a/ HTTP/1.1\r\nHost: a\r\nConnection: close").close
    assert http1.parse_request(b"GET http://a/ HTTP/1.0").close


def test_a_head_too_long_is_a_431_and_a_bare_lf_head_a_400() -> None:
    with pytest.raises(http1.HttpError) as caught:
        http1.head_end(b"GET / HTTP/1.1\r\nX: " + b"a" * 100, 64)
    assert caught.value.status == 431
    with pytest.raises(http1.HttpError) as caught:
        http1.head_end(b"GET / HTTP/1.1\nHost: a\n\n", 1024)
    assert caught.value.status == 400
    assert http1.head_end(b"GET / HTTP/1.1\r\nHost: a\r\n", 1024) == -1


@pytest.mark.parametrize(
    "data", [b"GET http://a/ HTTP/1.1\r\nHost: a\r\n\r\nBODY", b"GET http://a/ HTTP/1.1\nHost: a\n\n"]
)
def test_a_head_sent_a_byte_at_a_time_is_found_searching_only_what_is_new(data: bytes) -> None:
    whole: int | str
    try:
        whole = http1.head_end(data, 1024)
    except http1.HttpError as e:
        whole = e.reason
    searched, found = 0, None
    for n in range(1, len(data) + 1):
        try:
            end = http1.head_end(data[:n], 1024, max(0, searched - 3))
        except http1.HttpError as e:
            found = e.reason
            break
        searched = n
        if end >= 0:
            found = end
            break
    assert found == whole
