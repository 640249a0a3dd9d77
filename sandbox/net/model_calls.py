"""What a model call cost, read from its response as it passes: the seed's
``ModelCallEvidence``, observed on the wire rather than reported by the agent.

`UsageReader` is sans-IO: fed the response body's bytes as they go to the
client (chunked framing and gzip undone here, the bytes forwarded unchanged),
it keeps only what a record may hold: the model, the input, output and cache
tokens, the stop reason. Never the prompt, the completion or a key: the text
is parsed and dropped event by event, and a plain JSON body is held only up
to `JSON_BYTES` (a larger one is counted, not read).

Shapes read: the Anthropic Messages API (one JSON message, or its event stream:
``message_start`` carries the input and cache tokens, ``message_delta`` the
output so far and the stop reason), OpenAI Chat Completions (``usage`` with
``prompt_tokens``/``completion_tokens``, in the last chunk of a stream when
the client asked for it), the Responses API (``response.completed``) and
Gemini's ``generateContent`` (``usageMetadata``: a JSON object, an event
stream, or a stream as one JSON array).
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any, Final

from governor.sandbox.net.credentials import canonical_path

READ_CODINGS: Final = b"gzip, deflate"
"""The ``Accept-Encoding`` of every request to a terminated host, whatever the
agent sent: the codings `UsageReader` undoes (and identity). An agent that
asked for ``br`` or ``zstd`` would otherwise choose a response whose usage
no one reads."""

_SPENDING: Final = ("messages", "completions", "responses")
"""The last path segment of the calls whose usage is read (``/v1/messages``,
``/v1/chat/completions``, ``/v1/completions``, ``/v1/responses``; a gateway's
prefix before them)."""
_FREE: Final = ("count_tokens", "input_tokens")


def spending_call(method: str, path: str) -> bool | None:
    """What a request to a model API is, for a tokens limit: True, a model
    call whose usage `UsageReader` reads; False, a call that spends no tokens
    (a read: ``GET``, ``HEAD``, ``OPTIONS``; counting tokens); None, anything
    else, which may spend tokens no response says (a Message Batch, a file
    for one, a fine-tune)."""
    if method in ("GET", "HEAD", "OPTIONS"):
        return False
    if method != "POST" or not canonical_path(path):
        return None
    last = path.rstrip("/").rsplit("/", 1)[-1]
    verb = last.rsplit(":", 1)[-1] if ":" in last else None
    if verb in ("generateContent", "streamGenerateContent"):
        return True
    if verb == "countTokens" or last in _FREE:
        return False
    return True if last in _SPENDING else None


JSON_BYTES: Final = 4 * 1024 * 1024
EVENT_BYTES: Final = 1024 * 1024
"""An event-stream line longer than this is dropped unread (a completion's delta
is small; the usage lives in short events)."""

TOKEN_KINDS: Final = ("input", "output", "cache_read", "cache_write")
"""The kinds of tokens a call's usage is read into (the values of the tables below)."""

_TOKENS: Final = {
    "input_tokens": "input",
    "prompt_tokens": "input",
    "output_tokens": "output",
    "completion_tokens": "output",
    "cache_read_input_tokens": "cache_read",
    "cache_creation_input_tokens": "cache_write",
}
_GEMINI: Final = {
    "promptTokenCount": "input",
    "candidatesTokenCount": "output",
    "cachedContentTokenCount": "cache_read",
}
_DETAILS: Final = {
    ("prompt_tokens_details", "cached_tokens"): "cache_read",
    ("input_tokens_details", "cached_tokens"): "cache_read",
}


@dataclass
class Usage:
    """What one model call's response said of itself."""

    model: str | None = None
    tokens: dict[str, int] = field(default_factory=dict)
    """``input``, ``output``, ``cache_read``, ``cache_write``: those the response gave."""
    stop: str | None = None

    def take(self, value: Any) -> None:
        """Fold one JSON object of a response (a whole body, or one event)."""
        if isinstance(value, list):  # a stream of objects as one JSON array (Gemini's)
            for each in value[:10000]:
                self.take(each)
            return
        if not isinstance(value, dict):
            return
        kind = value.get("type")
        if kind == "message_start":
            self.take(value.get("message"))
        elif isinstance(kind, str) and kind.startswith("response.") and "response" in value:
            self.take(value.get("response"))
        model = value.get("model")
        if isinstance(model, str) and model:
            self.model = model[:200]
        usage = value.get("usage")
        metadata = value.get("usageMetadata")  # Gemini's
        if isinstance(metadata, dict):
            for key, name in _GEMINI.items():
                count = metadata.get(key)
                if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
                    self.tokens[name] = count
        if isinstance(usage, dict):
            for key, name in _TOKENS.items():
                count = usage.get(key)
                if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
                    self.tokens[name] = count
            for (outer, inner), name in _DETAILS.items():
                details = usage.get(outer)
                count = details.get(inner) if isinstance(details, dict) else None
                if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
                    self.tokens[name] = count
        stop = value.get("stop_reason")
        delta = value.get("delta")
        if stop is None and isinstance(delta, dict):
            stop = delta.get("stop_reason")
        choices = value.get("choices")
        if stop is None and isinstance(choices, list) and choices and isinstance(choices[0], dict):
            stop = choices[0].get("finish_reason")
        if stop is None and kind is None and isinstance(value.get("status"), str) and "output" in value:
            stop = value["status"]  # a Responses API object
        if isinstance(stop, str) and stop:
            self.stop = stop[:64]


class _Dechunk:
    """A chunked body's data, from its framing (already checked by the proxy)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._left = 0
        self._done = False

    def feed(self, data: bytes) -> bytes:
        self._buffer += data
        out = bytearray()
        while not self._done:
            if self._left:
                take = self._buffer[: self._left]
                out += take
                del self._buffer[: len(take)]
                self._left -= len(take)
                if self._left:
                    break
                continue
            end = self._buffer.find(b"\r\n")
            if end < 0:
                break
            line = bytes(self._buffer[:end]).split(b";", 1)[0].strip()
            del self._buffer[: end + 2]
            if not line:
                continue  # the CRLF after a chunk's data
            try:
                self._left = int(line, 16)
            except ValueError:
                self._done = True
                break
            if self._left == 0:
                self._done = True
        return bytes(out)


class UsageReader:
    """Reads one response body as it passes (`feed`), then says what it held (`usage`)."""

    def __init__(self, content_type: str, *, chunked: bool = False, encoding: str = "") -> None:
        self.streamed = "event-stream" in content_type.lower()
        self.result = Usage()
        self._dechunk = _Dechunk() if chunked else None
        coding = encoding.lower().strip()
        self._inflate = (
            zlib.decompressobj(16 + zlib.MAX_WBITS) if coding in ("gzip", "x-gzip")
            else zlib.decompressobj() if coding == "deflate"
            else None
        )  # fmt: skip
        self._unreadable = coding not in ("", "identity", "gzip", "x-gzip", "deflate")
        self._body = bytearray()
        self._line = bytearray()
        self._data: list[bytes] = []
        self._skipping = False
        self.bytes = 0

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """The next bytes of the body as they came over the wire."""
        raw = bytes(data)
        self.bytes += len(raw)
        if self._unreadable:
            return
        if self._dechunk is not None:
            raw = self._dechunk.feed(raw)
        if self._inflate is not None:
            try:
                raw = self._inflate.decompress(raw, JSON_BYTES)
            except zlib.error:
                self._unreadable = True
                return
        if not self.streamed:
            if len(self._body) + len(raw) <= JSON_BYTES:
                self._body += raw
            else:
                self._unreadable = True
            return
        self._lines(raw)

    def _lines(self, raw: bytes) -> None:
        start = 0
        while True:
            end = raw.find(b"\n", start)
            if end < 0:
                rest = raw[start:]
                if len(self._line) + len(rest) > EVENT_BYTES:
                    self._line.clear()
                    self._skipping = True
                else:
                    self._line += rest
                return
            piece = raw[start:end]
            start = end + 1
            if self._skipping:
                self._skipping = False
                self._line.clear()
                continue
            line = bytes(self._line + piece).rstrip(b"\r")
            self._line.clear()
            self._event_line(line)

    def _event_line(self, line: bytes) -> None:
        if not line:  # an event's end: its data lines joined
            if self._data:
                text = b"\n".join(self._data)
                self._data.clear()
                if text.strip() != b"[DONE]":
                    self._json(text)
            return
        if line.startswith(b"data:"):
            self._data.append(line[5:].removeprefix(b" "))

    def _json(self, text: bytes) -> None:
        try:
            value = json.loads(text)
        except ValueError:
            return
        self.result.take(value)

    def usage(self) -> Usage:
        """What the body said of its call (a plain JSON body read now)."""
        if not self.streamed and self._body and not self._unreadable:
            self._json(bytes(self._body))
            self._body.clear()
        elif self.streamed:
            self._event_line(b"")  # a last event without its blank line
        return self.result
