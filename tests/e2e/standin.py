"""A loopback stand-in for the Anthropic Messages API, scripted one tool call per turn.

Claude Code (inside claude-code-acp and claude-agent-acp) talks to the model at
``ANTHROPIC_BASE_URL``. This server answers it on 127.0.0.1 the way the real API
does -- Server-Sent Events for streaming requests, one JSON message otherwise,
and a token count for ``/v1/messages/count_tokens`` -- so the adapters run their
real tool machinery against a model whose moves the test chose.

The script is a list of `Step`s. Which step answers a request is decided by the
request itself: the number of ``tool_result`` blocks in its history. No result
yet: the first step's tool call; one result: the second step; ...; past the
last step: the final text. That keeps the server stateless across Claude Code's
retries and its small side requests (titles, summaries), which carry no tools
and get a plain text answer.

Tool names come from the request's ``tools`` list: a step names the tools it
would use in order of preference (``mcp__acp__Write`` before ``Write``) and the
first one offered is used, so one script drives both adapters.

Everything served is kept in `StandIn.served` for debugging a failed test.
"""

from __future__ import annotations

import json
import ssl
import threading
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any, Final
from urllib.parse import urlsplit

from loopback import LoopbackServer

MODEL: Final = "claude-standin-1"
OUTPUT_TOKENS: Final = 8
"""The output tokens every answer reports (usage the agent may pass on)."""


@dataclass(frozen=True)
class Step:
    """One scripted tool call: the first of ``tools`` the request offers, with ``input``."""

    tools: tuple[str, ...]
    input: Mapping[str, Any]
    stall: bool = False
    """Hold the answer after ``message_start`` until the stand-in closes: a model
    still thinking, so that the turn can be cancelled in the middle."""


def write(path: str, content: str) -> Step:
    """A Write tool call (the client's fs first, then Claude Code's own)."""
    return Step(("mcp__acp__Write", "Write"), {"file_path": path, "content": content})


def edit(path: str, old: str, new: str) -> Step:
    """An Edit tool call replacing ``old`` by ``new`` once."""
    return Step(
        ("mcp__acp__Edit", "Edit"), {"file_path": path, "old_string": old, "new_string": new}
    )


def read(path: str) -> Step:
    """A Read tool call."""
    return Step(("mcp__acp__Read", "Read"), {"file_path": path})


def stalled(step: Step) -> Step:
    """The same tool call, answered only when the stand-in closes (never, for the agent)."""
    return Step(step.tools, step.input, stall=True)


def bash(command: str) -> Step:
    """A Bash tool call (Claude Code's Bash needs a timeout, in ms)."""
    return Step(
        ("mcp__acp__Bash", "Bash"),
        {"command": command, "description": "run a command", "timeout": 60000},
    )


@dataclass
class Served:
    """One request and what the stand-in answered."""

    path: str
    streamed: bool
    tools: list[str]
    results: int
    answer: str
    """``tool_use NAME``, ``text``, ``count_tokens`` or ``404``."""
    tool_results: list[dict[str, Any]] = field(default_factory=list)
    model: str | None = None
    """The model the request names."""
    text: str = ""
    """The request's system prompt and its messages' text, joined: what the model
    was told (the prompt, the rules appended, the MCP servers' instructions)."""
    key: str | None = None
    """The credential the request carried (``x-api-key``, else ``Authorization``)."""


class StandIn(LoopbackServer):
    """The HTTP server on a random loopback port, in a daemon thread (a context manager)."""

    def __init__(
        self,
        steps: Sequence[Step],
        final: str = "Done.",
        *,
        output_tokens: int = OUTPUT_TOKENS,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.steps = list(steps)
        self.final = final
        self.output_tokens = output_tokens
        """The output tokens each answer reports: what the agent's cost is reckoned from."""
        self.served: list[Served] = []
        self._lock = threading.Lock()
        self.stalling = threading.Event()
        """Set when a stalled step's request has arrived and is being held."""
        self._closing = threading.Event()
        super().__init__(_handler(self), tls)

    @property
    def url(self) -> str:
        """The base URL for ``ANTHROPIC_BASE_URL`` (``https://`` when served with TLS)."""
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self._closing.set()  # stalled answers let go first
        super().__exit__(*exc)

    def tool_uses(self) -> list[str]:
        """The names of the tool calls served, in order."""
        return [
            s.answer.removeprefix("tool_use ")
            for s in self.served
            if s.answer.startswith("tool_use")
        ]

    def models(self) -> list[str | None]:
        """The model each main-loop request (with tools) named, in order."""
        return [s.model for s in self.served if s.path == "/v1/messages" and s.tools]

    def turns(self) -> int:
        """How many main-loop model requests (with tools) were answered."""
        return sum(1 for s in self.served if s.path == "/v1/messages" and s.tools)

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool results Claude Code sent back, from the latest request that had them."""
        for s in reversed(self.served):
            if s.tool_results:
                return s.tool_results
        return []

    def describe(self) -> str:
        """What was served, one line each (for assertion messages)."""
        return "\n".join(
            f"{s.path} stream={s.streamed} results={s.results} tools={len(s.tools)} -> {s.answer}"
            for s in self.served
        )

    # -- answering ---------------------------------------------------------------------

    def answer(self, body: Mapping[str, Any]) -> tuple[list[dict[str, Any]], str, bool]:
        """The content blocks, stop reason and stall flag for a /v1/messages request."""
        offered = [t.get("name", "") for t in body.get("tools") or [] if isinstance(t, Mapping)]
        results = _tool_results(body.get("messages") or [])
        if not offered:  # a side request: a title, a summary
            return [{"type": "text", "text": "Stand-in"}], "end_turn", False
        if len(results) >= len(self.steps):
            return [{"type": "text", "text": self.final}], "end_turn", False
        step = self.steps[len(results)]
        name = next((t for t in step.tools if t in offered), None)
        if name is None:
            text = f"STANDIN: none of {list(step.tools)} is offered; offered: {offered}"
            return [{"type": "text", "text": text}], "end_turn", False
        block = {
            "type": "tool_use",
            "id": f"toolu_{uuid.uuid4().hex[:24]}",
            "name": name,
            "input": dict(step.input),
        }
        return [block], "tool_use", step.stall

    def hold(self) -> None:
        """Hold a stalled answer until the stand-in closes."""
        self.stalling.set()
        self._closing.wait()

    def log(self, served: Served) -> None:
        with self._lock:
            self.served.append(served)


def _tool_results(messages: Sequence[Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for m in messages:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            found += [c for c in content if isinstance(c, dict) and c.get("type") == "tool_result"]
    return found


def _told(body: Mapping[str, Any]) -> str:
    """The text of a request's system prompt and messages (`Served.text`)."""
    texts: list[str] = []

    def take(content: Any) -> None:
        if isinstance(content, str):
            texts.append(content)
        elif isinstance(content, list):
            texts.extend(
                c["text"] for c in content if isinstance(c, dict) and isinstance(c.get("text"), str)
            )

    take(body.get("system"))
    for m in body.get("messages") or []:
        if isinstance(m, dict):
            take(m.get("content"))
    return "\n".join(texts)


def _message(
    content: list[dict[str, Any]], stop: str, output: int = OUTPUT_TOKENS
) -> dict[str, Any]:
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": _usage(output),
    }


def _usage(output: int) -> dict[str, int]:
    return {
        "input_tokens": 12,
        "output_tokens": output,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def events(
    content: list[dict[str, Any]], stop: str, output: int = OUTPUT_TOKENS
) -> Iterator[tuple[str, dict[str, Any]]]:
    """The SSE events of one streamed message, as the Messages API sends them,
    reporting ``output`` output tokens."""
    start = _message([], stop) | {"stop_reason": None, "usage": _usage(1)}
    yield "message_start", {"type": "message_start", "message": start}
    for i, block in enumerate(content):
        if block["type"] == "text":
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": {"type": "text", "text": ""},
                },
            )
            delta = {"type": "text_delta", "text": block["text"]}
        else:
            shell = {k: v for k, v in block.items() if k != "input"} | {"input": {}}
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": shell,
                },
            )
            delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
        yield "content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}
        yield "content_block_stop", {"type": "content_block_stop", "index": i}
    yield (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {"output_tokens": output},
        },
    )
    yield "message_stop", {"type": "message_stop"}


def _handler(standin: StandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            key = self.headers.get("x-api-key") or self.headers.get("authorization")
            path = urlsplit(self.path).path
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = {}
            if not isinstance(body, dict):
                body = {}
            tools = [t.get("name", "") for t in body.get("tools") or [] if isinstance(t, dict)]
            results = _tool_results(body.get("messages") or [])
            if path == "/v1/messages/count_tokens":
                standin.log(Served(path, False, tools, len(results), "count_tokens", key=key))
                self._json(200, {"input_tokens": 42})
                return
            if path != "/v1/messages":
                standin.log(Served(path, False, tools, len(results), "404", key=key))
                self._json(
                    404, {"type": "error", "error": {"type": "not_found_error", "message": path}}
                )
                return
            content, stop, stall = standin.answer(body)
            answer = (
                f"tool_use {content[0]['name']}" if content[0]["type"] == "tool_use" else "text"
            )
            streamed = bool(body.get("stream"))
            model = body.get("model") if isinstance(body.get("model"), str) else None
            told = _told(body)
            standin.log(
                Served(path, streamed, tools, len(results), answer, list(results), model, told, key)
            )
            if not streamed:
                self._json(200, _message(content, stop, standin.output_tokens))
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
            self.end_headers()
            self.close_connection = True
            try:
                for event, data in events(content, stop, standin.output_tokens):
                    self.wfile.write(f"event: {event}\ndata: {json.dumps(data)}\n\n".encode())
                    self.wfile.flush()
                    if stall and event == "message_start":
                        standin.hold()
            except (BrokenPipeError, ConnectionResetError):
                pass  # the agent went away (cancelled, killed): nothing to answer

        def do_GET(self) -> None:
            standin.log(Served(self.path, False, [], 0, "404"))
            self._json(
                404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}}
            )

        def do_HEAD(self) -> None:
            self.send_response(200)
            self.end_headers()

        def _json(self, status: int, value: Any) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.send_header("request-id", f"req_{uuid.uuid4().hex[:24]}")
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            return  # what was served is in StandIn.served

    return Handler
