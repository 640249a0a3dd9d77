"""The output ring: newest bytes, bounded memory, UTF-8 boundaries."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from governor.sandbox.run.capture import OutputRing, complete_prefix, skip_continuation


def test_the_ring_keeps_the_newest_bytes_and_says_it_truncated() -> None:
    ring = OutputRing(5)
    for chunk in (b"abc", b"def", b"gh"):
        ring.feed(chunk)
    assert ring.snapshot() == (b"defgh", True)
    assert ring.total == 8


def test_output_under_the_limit_is_kept_whole_and_not_truncated() -> None:
    ring = OutputRing(100)
    ring.feed(b"hello ")
    ring.feed(b"world")
    assert ring.snapshot() == (b"hello world", False)


def test_a_zero_limit_keeps_nothing_but_counts() -> None:
    ring = OutputRing(0)
    ring.feed(b"abc")
    assert ring.snapshot() == (b"", True)
    assert ring.buffered == 0


def test_the_tail_starts_on_a_character_boundary() -> None:
    ring = OutputRing(4)
    ring.feed("aé€".encode())  # 61 c3a9 e282ac: the last 4 bytes start inside é
    data, truncated = ring.snapshot()
    assert data == "€".encode()
    assert truncated
    assert data.decode("utf-8") == "€"


def test_a_half_received_character_is_held_back_while_the_stream_is_open() -> None:
    ring = OutputRing(100)
    ring.feed("ok €".encode()[:-1])
    assert ring.text(final=False) == ("ok ", False)
    assert ring.text(final=True)[0] == "ok \ufffd"


def test_complete_prefix_and_skip_continuation_on_the_edges() -> None:
    assert complete_prefix(b"") == b""
    assert complete_prefix("é".encode()) == "é".encode()
    assert complete_prefix("€".encode()[:2]) == b""
    assert complete_prefix("😀".encode()[:3] ) == b""
    assert skip_continuation(b"\x80\x80\x80\x80a") == b"\x80a"  # never more than three
    assert skip_continuation(b"abc") == b"abc"


@given(
    chunks=st.lists(st.binary(min_size=0, max_size=300), max_size=40),
    limit=st.integers(min_value=1, max_value=600),
)
def test_the_snapshot_is_the_tail_of_everything_fed_and_memory_stays_bounded(
    chunks: list[bytes], limit: int
) -> None:
    ring = OutputRing(limit)
    for chunk in chunks:
        ring.feed(chunk)
        assert ring.buffered <= limit + max(len(c) for c in chunks)
    everything = b"".join(chunks)
    data, truncated = ring.snapshot()
    tail = everything[-limit:] if everything else b""
    assert tail.endswith(data)
    assert len(tail) - len(data) <= 3
    assert truncated == (len(data) < len(everything))
    assert ring.peak <= limit + max((len(c) for c in chunks), default=0)
