"""Bounded output capture: keep the newest bytes, cut on a UTF-8 boundary.

A command may print gigabytes; the ring holds at most ``limit`` bytes plus one
read chunk, dropping whole chunks from the front. What the agent sees (ACP
``outputByteLimit``) is the *tail*, because the end of a build log is where the
error is. The tail starts on a character boundary so it always decodes.
"""

from __future__ import annotations

from collections import deque


def skip_continuation(data: bytes) -> bytes:
    """Drop at most three leading UTF-8 continuation bytes (``10xxxxxx``): the
    remains of a character whose first byte was cut off."""
    start = 0
    while start < min(3, len(data)) and data[start] & 0xC0 == 0x80:
        start += 1
    return data[start:]


def complete_prefix(data: bytes) -> bytes:
    """``data`` without a trailing, still incomplete UTF-8 sequence (more may come)."""
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 == 0x80:
            continue
        if byte < 0x80:
            return data
        need = 2 if byte >= 0xC0 and byte < 0xE0 else 3 if byte < 0xF0 else 4
        return data if back >= need else data[:-back]
    return data


class OutputRing:
    """The newest ``limit`` bytes of a stream, and how many bytes passed through."""

    def __init__(self, limit: int) -> None:
        if limit < 0:
            raise ValueError(f"output limit must be >= 0, got {limit}")
        self.limit = limit
        self.total = 0
        self.peak = 0
        self._chunks: deque[bytes] = deque()
        self._size = 0

    def feed(self, data: bytes) -> None:
        """Append ``data``, forgetting the oldest chunks beyond the limit."""
        self.total += len(data)
        if self.limit == 0 or not data:
            return
        if len(data) >= self.limit:
            self._chunks.clear()
            self._chunks.append(data[-self.limit :])
            self._size = self.limit
        else:
            self._chunks.append(data)
            self._size += len(data)
            while self._size - len(self._chunks[0]) >= self.limit:
                self._size -= len(self._chunks.popleft())
        self.peak = max(self.peak, self._size)

    @property
    def buffered(self) -> int:
        """Bytes held right now (at most ``limit`` + one chunk)."""
        return self._size

    def snapshot(self) -> tuple[bytes, bool]:
        """``(tail, truncated)``: the newest bytes starting on a character boundary,
        and whether anything was dropped."""
        data = b"".join(self._chunks)
        if len(data) > self.limit:
            data = data[-self.limit :]
        if len(data) < self.total:
            data = skip_continuation(data)
        return data, len(data) < self.total

    def text(self, *, final: bool) -> tuple[str, bool]:
        """The tail as text; while the stream is open, a half-received character
        at the end is held back rather than shown as a replacement character."""
        data, truncated = self.snapshot()
        if not final:
            data = complete_prefix(data)
        return data.decode("utf-8", "replace"), truncated
