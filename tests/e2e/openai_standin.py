"""A loopback stand-in for an OpenAI-compatible Chat Completions API, scripted one
tool call per turn (GitHub Copilot CLI's bring-your-own-key mode, Qwen Code).

The agents post ``/v1/chat/completions`` (streamed as Server-Sent Events, or
not); the answer is chosen by the request itself, as in `standin`: the number of
``tool`` messages in its history picks the step, and past the last step comes
the final text. Requests without tools (titles, summaries) get plain text.
A step with ``again_if`` is made again while its result says so (Qwen Code's
``tool_search`` finds no MCP tool until the agent's MCP discovery is done,
which an instant model outruns): its result is not counted, up to ``AGAIN`` times.

A step names the tools it would use in order of preference; the first one the
request offers is called. Everything served is kept in `OpenAIStandIn.served`,
with the model each request named.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import urlsplit

from loopback import LoopbackServer


@dataclass(frozen=True)
class Call:
    """One scripted tool call: the first of ``tools`` the request offers, with ``arguments``."""

    tools: tuple[str, ...]
    arguments: Mapping[str, Any]
    again_if: str | None = None
    """Made again while the result holds this text (the same step, not the next)."""


AGAIN = 120
"""How often a step is made again before the script goes on regardless (with
`PAUSE`, half a minute: an agent's MCP servers start slower on a busy machine)."""
PAUSE = 0.25
"""Seconds before a step made again is answered."""


@dataclass
class Served:
    path: str
    model: str | None
    tools: list[str]
    results: int
    answer: str
    """``tool NAME``, ``text`` or ``404``."""
    tool_messages: list[str] = field(default_factory=list)


class OpenAIStandIn(LoopbackServer):
    """The server on a random loopback port, in a daemon thread (a context manager)."""

    def __init__(self, steps: Sequence[Call], final: str = "Done.", model: str = "gpt-4.1") -> None:
        self.steps = list(steps)
        self.final = final
        self.model = model
        self.served: list[Served] = []
        self._lock = threading.Lock()
        super().__init__(_handler(self))

    @property
    def url(self) -> str:
        """The base URL, ``/v1`` included."""
        return f"http://127.0.0.1:{self.port}/v1"

    def tool_calls(self) -> list[str]:
        """The names of the tools called, in order."""
        return [s.answer.removeprefix("tool ") for s in self.served if s.answer.startswith("tool ")]

    def models(self) -> list[str | None]:
        """The model each request with tools named."""
        return [s.model for s in self.served if s.tools]

    def turns(self) -> int:
        """How many requests with tools were answered."""
        return sum(1 for s in self.served if s.tools)

    def describe(self) -> str:
        """What was served, one line each (for assertion messages)."""
        return "\n".join(
            f"{s.path} model={s.model} results={s.results} tools={len(s.tools)} -> {s.answer}"
            f"{' ' + repr(s.tool_messages[-1][:300]) if s.tool_messages else ''}"
            for s in self.served
        )

    def answer(self, body: Mapping[str, Any]) -> tuple[dict[str, Any] | None, str]:
        """The tool call to make (None for text) and the text, for one request."""
        offered = [
            t.get("function", {}).get("name", "")
            for t in body.get("tools") or []
            if isinstance(t, Mapping)
        ]
        results = [
            m
            for m in body.get("messages") or []
            if isinstance(m, Mapping) and m.get("role") == "tool"
        ]
        index, again = self._step(results)
        if again:
            time.sleep(PAUSE)  # a model's pace, so the retries span the agent's discovery
        if not offered or index >= len(self.steps):
            return None, self.final if offered else "Stand-in"
        step = self.steps[index]
        name = next((t for t in step.tools if t in offered), None)
        if name is None:
            return None, f"STANDIN: none of {list(step.tools)} is offered; offered: {offered}"
        return {"name": name, "arguments": json.dumps(dict(step.arguments))}, ""

    def _step(self, results: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
        """The step the history has reached: each result moves on one step, but
        a result holding its step's ``again_if`` (up to `AGAIN` of them) does not;
        and how many times in a row the last step was made again."""
        index = again = 0
        for result in results:
            step = self.steps[index] if index < len(self.steps) else None
            marker = step.again_if if step is not None else None
            if marker is not None and again < AGAIN and marker in str(result.get("content")):
                again += 1
                continue
            index, again = index + 1, 0
        return index, again

    def log(self, served: Served) -> None:
        with self._lock:
            self.served.append(served)


def _chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-standin",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


USAGE = {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48}


def _handler(standin: OpenAIStandIn) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            path = urlsplit(self.path).path
            length = int(self.headers.get("Content-Length") or 0)
            try:
                body = json.loads(self.rfile.read(length) or b"{}")
            except ValueError:
                body = {}
            if not isinstance(body, dict):
                body = {}
            tools = [
                t.get("function", {}).get("name", "")
                for t in body.get("tools") or []
                if isinstance(t, dict)
            ]
            messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
            tool_messages = [
                str(m.get("content"))[:2000] for m in messages if m.get("role") == "tool"
            ]
            model = body.get("model") if isinstance(body.get("model"), str) else None
            if not path.endswith("/chat/completions"):
                standin.log(Served(path, model, tools, len(tool_messages), "404"))
                self._json(404, {"error": {"message": f"no {path} here", "type": "not_found"}})
                return
            call, text = standin.answer(body)
            answer = f"tool {call['name']}" if call else "text"
            standin.log(Served(path, model, tools, len(tool_messages), answer, tool_messages))
            name = model or standin.model
            if not body.get("stream"):
                message: dict[str, Any] = {"role": "assistant", "content": text or None}
                if call:
                    message["tool_calls"] = [
                        {
                            "id": f"call_{uuid.uuid4().hex[:12]}",
                            "type": "function",
                            "function": call,
                        }
                    ]
                self._json(
                    200,
                    {
                        "id": "chatcmpl-standin",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": name,
                        "choices": [
                            {
                                "index": 0,
                                "message": message,
                                "finish_reason": "tool_calls" if call else "stop",
                            }
                        ],
                        "usage": USAGE,
                    },
                )
                return
            chunks = [_chunk(name, {"role": "assistant", "content": ""})]
            if call:
                chunks.append(
                    _chunk(
                        name,
                        {
                            "tool_calls": [
                                {
                                    "index": 0,
                                    "id": f"call_{uuid.uuid4().hex[:12]}",
                                    "type": "function",
                                    "function": {"name": call["name"], "arguments": ""},
                                }
                            ]
                        },
                    )
                )
                chunks.append(
                    _chunk(
                        name,
                        {
                            "tool_calls": [
                                {"index": 0, "function": {"arguments": call["arguments"]}}
                            ]
                        },
                    )
                )
                chunks.append(_chunk(name, {}, "tool_calls"))
            else:
                chunks.append(_chunk(name, {"content": text}))
                chunks.append(_chunk(name, {}, "stop"))
            final = _chunk(name, {})
            final["choices"] = []
            final["usage"] = USAGE
            chunks.append(final)
            payload = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
            data = payload.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(data)
                self.wfile.flush()

        def do_GET(self) -> None:
            path = urlsplit(self.path).path
            if path.endswith("/models"):
                self._json(
                    200,
                    {
                        "object": "list",
                        "data": [{"id": standin.model, "object": "model", "owned_by": "standin"}],
                    },
                )
                return
            self._json(404, {"error": {"message": f"no {path} here", "type": "not_found"}})

        def _json(self, status: int, value: Any) -> None:
            data = json.dumps(value).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
