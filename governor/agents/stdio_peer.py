"""The JSON-RPC 2.0 side of a stdlib ACP agent: one JSON object per line on stdin
and stdout, and the answers to the agent's own requests matched to them by id.

Every stdlib agent we ship or test with (the demo here; the scripted, fault,
fuzz, stream and limits agents of the tests; the bench's flood agent) speaks
through this one file, so a change to how an agent reads or writes the wire is
made once. The rules of this file:

- standard library only, and nothing of ours: agents run it inside sandboxes,
  by path, where only this file (``governor.confine.sandboxes`` keeps it visible) and
  the agent's own are sure to be seen; an agent puts this folder on
  ``sys.path`` itself, because ``python -I`` and ``PYTHONSAFEPATH`` leave the
  script's folder off it;
- a line that is not a JSON object is skipped, never fatal: an agent under test
  must outlive what the governor (or a fuzzer) sends it;
- every line goes out whole, flushed, under one lock, so that an agent's
  threads never interleave two lines;
- an agent's requests are numbered from ``first_id``; while one waits for its
  answer, a ``session/cancel`` sets `Peer.cancelled`, other requests and
  notifications are held (`Peer.held`) for the agent's own loop, and answers
  to nothing are dropped;
- the end of stdin while an answer is awaited raises `Closed`, a `SystemExit`
  of status 0: an agent that does not catch it exits quietly, as an agent whose
  client went away does.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Iterator
from typing import Any, BinaryIO

Message = dict[str, Any]


class Closed(SystemExit):
    """Stdin ended while the agent waited for an answer."""

    def __init__(self) -> None:
        super().__init__(0)


def encode(message: Message) -> bytes:
    """`message` as one compact JSON-RPC 2.0 line, newline included."""
    return json.dumps({"jsonrpc": "2.0", **message}, separators=(",", ":")).encode() + b"\n"


def parse(line: bytes) -> Message | None:
    """The JSON object on `line`, or None when it is not one."""
    try:
        value = json.loads(line)
    except ValueError:  # not JSON, or not UTF-8
        return None
    return value if isinstance(value, dict) else None


class Peer:
    """The agent's end of the pipes: blocking reads and locked, flushed writes."""

    def __init__(
        self, *, first_id: int = 0, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None
    ) -> None:
        self.stdin = stdin if stdin is not None else sys.stdin.buffer
        self.stdout = stdout if stdout is not None else sys.stdout.buffer
        self.next_id = first_id
        self.inbox: list[Message] = []
        """Requests and notifications that came while an answer was awaited."""
        self.cancelled = False
        """A ``session/cancel`` came while an answer was awaited (the agent resets it)."""
        self._lock = threading.Lock()

    # -- writing --

    def write(self, *parts: bytes, flush: bool = True) -> None:
        """Raw bytes on stdout (whole lines, or on purpose not), all `parts` under
        one hold of the lock: a line written in pieces is not cut by another."""
        with self._lock:
            for part in parts:
                self.stdout.write(part)
            if flush:
                self.stdout.flush()

    def flush(self) -> None:
        """Flush what `write` was told not to."""
        with self._lock:
            self.stdout.flush()

    def send(self, message: Message) -> None:
        self.write(encode(message))

    def notify(self, method: str, params: Message) -> None:
        self.send({"method": method, "params": params})

    def respond(self, id: Any, result: Any) -> None:
        self.send({"id": id, "result": result})

    def fail(self, id: Any, code: int, message: str) -> None:
        """An error answer to the client's request `id`."""
        self.send({"id": id, "error": {"code": code, "message": message}})

    # -- reading --

    def lines(self) -> Iterator[bytes]:
        """Every line of stdin, as it came, until it ends."""
        while line := self.stdin.readline():
            yield line

    def read(self) -> Message | None:
        """The next JSON object from stdin (lines that are not one skipped), or
        None at its end."""
        for line in self.lines():
            message = parse(line)
            if message is not None:
                return message
        return None

    def receive(self) -> Message | None:
        """The next message for the agent's loop: a held one first, else `read`."""
        return self.inbox.pop(0) if self.inbox else self.read()

    # -- the agent's own requests --

    def ask(self, method: str, params: Message) -> Any:
        """Send a request without waiting; its id."""
        rid = self.next_id
        self.next_id += 1
        self.send({"id": rid, "method": method, "params": params})
        return rid

    def request(self, method: str, params: Message) -> Message:
        """Send a request and read until its answer (the whole response: ``result``
        or ``error``); `Closed` if stdin ends first."""
        return self.wait(self.ask(method, params))

    def wait(self, rid: Any) -> Message:
        """Read until the answer to request `rid`; `Closed` if stdin ends first."""
        while True:
            message = self.read()
            if message is None:
                raise Closed
            if "method" not in message:
                if message.get("id") == rid:
                    return message
            elif message["method"] == "session/cancel":
                self.cancelled = True
                self.cancel_seen(message)
            else:
                self.held(message)

    def held(self, message: Message) -> None:
        """A request or notification that came while an answer was awaited: kept
        in `inbox` for the agent's loop (an agent may answer it at once instead)."""
        self.inbox.append(message)

    def cancel_seen(self, message: Message) -> None:
        """A ``session/cancel`` that came while an answer was awaited (after
        `cancelled` is set); for an agent that records it."""
