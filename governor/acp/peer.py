"""The rules of the conversation with one agent, sans-IO: what each message it sends makes us do.

`Peer` sits between the framing (`governor.acp.jsonrpc.JsonRpc`) and the trio
loop (`governor.acp.connection`). Feed it what the agent's stdout gave you
(`receive`); it yields, in wire order, what to do about each message: pass a
`Request` on to its handler, a `Notification` to the callback, a `Response` or
`ErrorResponse` to the request of ours it answers; send a `Reply` line; stop a
handler (`Cancel`). It does no I/O and knows nothing of tasks: a test drives it
with bytes and reads what it yields. Everything that decides how the agent is
treated lives here; the connection only carries it out.

Rules of this file:

- **The agent's requests.** Each is passed on to be dispatched unless it is
  refused at once with a `Reply`, checked in this order: a `then_refuse` error
  is in force (below); its id is already in flight (``-32600``); `max_in_flight`
  of its requests are already in flight (``-32603``, so a flood from an agent
  that does not read our answers cannot grow memory without bound). A request
  passed on is in flight until `done`: until its answer is queued for the
  writer, not merely made (`answer`), so answers waiting for room count too.
- **Withdrawn requests.** ``$/cancel_request`` naming a request in flight and not
  yet answered yields `Cancel`; its handler is stopped and `answer(request, None)`
  is ``-32800``. Naming anything else it is ignored (logged).
- **Our requests** carry ids from 0 (`JsonRpc`). `then_refuse` (code, message):
  from the moment the answer to that request is *read*, every later request of
  the agent is refused with that error and never dispatched. Ordering is the
  wire's: a request on the line after the answer is refused even when both
  arrive in one chunk, and one on the line before it is served.
- **Notifications** whose method is in `notifications` are passed on, in order;
  ``_`` extensions are ignored quietly, other methods with a warning.
- **Malformed lines** (`governor.acp.jsonrpc.Malformed`) are answered with the
  reply the framing gives (if any), counted by kind, and told to
  ``on_rejected`` (the attempt makes each a ``wire`` record of the audit log). The peer gives up -- as
  if the agent's stdout had ended: `closed`, and `gave_up` says what the agent
  did -- when the agent's last `give_up_after` lines were all malformed, with no
  usable message between them, or when more than ``10 * give_up_after`` of its
  lines were malformed and they are more than 9 in 10 of all its lines (a little
  valid traffic does not keep a garbage stream alive). The thresholds are far
  above what a sloppy but working agent does (a stray console line now and then)
  and low enough that a broken one is stopped long before the attempt's timeout.
  The run is checked at each malformed line (the rest of the chunk is not
  read), the share once per chunk.
- **Unwritten bytes.** Every line made here counts as waiting to be written
  until `written` says it was (or `abandoned` that it never will be).
  Counting requests is not enough when answers are big (many reads of a large
  file, all held for an agent that stopped reading): an answer that would take
  the bytes waiting past `max_unwritten_bytes` is replaced by a short
  ``-32603`` error, unless nothing else waits.
- **A `Reply` never waits.** It is sent where the message was read; when there
  is no room for it, it is dropped and `dropped` counts it.

Logs are structlog events (on the logger given, the connection's by default);
they carry sizes, ids and reasons, never more of a line than a short prefix.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import structlog

from governor.acp.dispatch import Answer, reply
from governor.acp.jsonrpc import (
    DEFAULT_MAX_LINE_BYTES,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    REQUEST_CANCELLED,
    ErrorResponse,
    JsonId,
    JsonRpc,
    Malformed,
    Notification,
    Request,
    Response,
    UnknownResponse,
    short,
)

DEFAULT_NOTIFICATIONS: Final = frozenset({"session/update", "elicitation/complete"})
"""The agent->client notifications of ACP v1 passed on by default."""

CANCEL_REQUEST: Final = "$/cancel_request"

DEFAULT_MAX_IN_FLIGHT: Final = 256
DEFAULT_GIVE_UP_AFTER: Final = 1000
DEFAULT_MAX_UNWRITTEN_BYTES: Final = 64 * 2**20


@dataclass(slots=True)
class Reply:
    """Send `line` to the agent now, without waiting for room (`Peer.dropped` if none)."""

    line: bytes


@dataclass(slots=True)
class Cancel:
    """The agent withdrew its request `id`, in flight and unanswered: stop its handler."""

    id: JsonId


Action: TypeAlias = Request | Notification | Response | ErrorResponse | Reply | Cancel
"""What `Peer.receive` yields: the agent's messages passed on, or what to do instead."""


class Peer:
    """The protocol rules for one agent connection, without I/O (see the module docstring).

    Use: `request` and `notify` make our lines; `receive` turns the agent's
    bytes into actions; every `Request` it yields is answered with `answer` and
    released with `done`; the writer reports with `written`, a reply that found
    no room with `dropped`, a line that was never queued with `abandoned`.
    """

    __slots__ = (
        "_dropped",
        "_gave_up",
        "_give_up_after",
        "_in_flight",
        "_lines",
        "_log",
        "_malformed",
        "_malformed_total",
        "_max_in_flight",
        "_max_unwritten",
        "_on_rejected",
        "_refusing",
        "_rpc",
        "_run",
        "_stopped",
        "_then_refuse",
        "_unwritten",
        "notifications",
    )

    def __init__(
        self,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        give_up_after: int = DEFAULT_GIVE_UP_AFTER,
        max_unwritten_bytes: int = DEFAULT_MAX_UNWRITTEN_BYTES,
        notifications: Collection[str] = DEFAULT_NOTIFICATIONS,
        log: Any = None,
        on_rejected: Callable[[Malformed], None] | None = None,
    ) -> None:
        """``on_rejected`` is told of each malformed line (its reason, length and
        method when readable; `governor.acp.jsonrpc.Malformed`), as it is read:
        the attempt records it in the audit log."""
        if give_up_after < 1:
            raise ValueError(f"give_up_after must be at least 1, got {give_up_after}")
        self._rpc = JsonRpc(max_line_bytes=max_line_bytes)
        self._max_in_flight = max_in_flight
        self._give_up_after = give_up_after
        self._max_unwritten = max_unwritten_bytes
        self.notifications: frozenset[str] = frozenset(notifications)
        """The notification methods `receive` passes on."""
        self._log = log if log is not None else structlog.get_logger("governor.acp.connection")
        self._in_flight: dict[JsonId, bool] = {}  # the agent's request id -> answered yet
        self._then_refuse: dict[int, tuple[int, str]] = {}  # our request id -> its error
        self._refusing: tuple[int, str] | None = None
        self._unwritten = 0
        self._dropped = 0
        self._lines = 0
        self._run = 0  # malformed lines since the last usable message
        self._malformed: dict[str, int] = {}
        self._malformed_total = 0
        self._gave_up: str | None = None
        self._stopped = False
        self._on_rejected = on_rejected

    # --- what the loop reads ---

    @property
    def closed(self) -> bool:
        """True once the agent's stdout ended or the peer gave up: read no more."""
        return self._stopped

    @property
    def gave_up(self) -> str | None:
        """Why the peer gave up on the agent (what it sent), or None."""
        return self._gave_up

    @property
    def unwritten(self) -> int:
        """Bytes of lines made here that are not written yet."""
        return self._unwritten

    # --- ours ---

    def request(
        self, method: str, params: Any = None, *, then_refuse: tuple[int, str] | None = None
    ) -> tuple[int, bytes]:
        """A new request of ours: its id (now awaiting its answer) and its line."""
        id, line = self._rpc.request(method, params)
        if then_refuse is not None:
            self._then_refuse[id] = then_refuse
        self._unwritten += len(line)
        return id, line

    def notify(self, method: str, params: Any = None) -> bytes:
        """A notification line of ours."""
        line = self._rpc.notify(method, params)
        self._unwritten += len(line)
        return line

    def forget(self, id: int) -> None:
        """Stop waiting for our request `id` (answered, timed out, given up on)."""
        self._rpc.forget(id)
        self._then_refuse.pop(id, None)

    # --- theirs ---

    def receive(self, data: bytes) -> Iterator[Action]:
        """What to do about the messages completed by `data` (``b""``: the stream ended).

        Lazy: act on each action before taking the next, since the verdict on a
        message depends on what became of the ones before it (a request answered
        at once frees its slot before the next line is judged).
        """
        if self._stopped:
            return
        if data:
            events = self._rpc.feed(data)
        else:
            events = self._rpc.feed_eof()
            self._stopped = True
        self._lines += len(events)
        wanted = self.notifications
        for event in events:
            if type(event) is Notification:
                self._run = 0
                if event.method in wanted:
                    yield event
                elif event.method == CANCEL_REQUEST:
                    cancel = self._cancel(event.params)
                    if cancel is not None:
                        yield cancel
                elif event.method.startswith("_"):
                    self._log.debug(
                        "agent.extension_notification_ignored", method=short(event.method)
                    )
                else:
                    self._log.warning("agent.unknown_notification", method=short(event.method))
            elif type(event) is Request:
                self._run = 0
                refusal = self._refusal(event)
                if refusal is None:
                    self._in_flight[event.id] = False
                    yield event
                else:
                    self._unwritten += len(refusal)
                    yield Reply(refusal)
            elif type(event) is Response or type(event) is ErrorResponse:
                self._run = 0
                if self._then_refuse:
                    refuse = self._then_refuse.pop(event.id, None)
                    if refuse is not None:
                        self._refusing = refuse  # before the next line is judged
                yield event
            elif type(event) is Malformed:
                self._run += 1
                self._count(event)
                if event.reply is not None:
                    self._unwritten += len(event.reply)
                    yield Reply(event.reply)
                if self._run >= self._give_up_after:
                    self._judge()
                    return  # hopeless: the rest of this chunk is not read
            else:
                assert type(event) is UnknownResponse
                self._run = 0
                self._log.warning(
                    "agent.unknown_response", id=short(repr(event.id)), error_code=event.code
                )
        if self._malformed_total > 10 * self._give_up_after:
            self._judge()

    def answer(self, request: Request, answer: Answer | None) -> bytes:
        """The line that answers `request` (passed on by `receive`), counted as unwritten.

        `answer` is its handler's (`governor.acp.dispatch.begin`), None when the
        agent withdrew it. The request stays in flight until `done`.
        """
        if request.id in self._in_flight:
            self._in_flight[request.id] = True  # no longer to be cancelled
        if answer is None:
            line = self._rpc.error(request.id, REQUEST_CANCELLED, "Request cancelled")
        else:
            line = reply(request.id, answer)
            if self._unwritten and self._unwritten + len(line) > self._max_unwritten:
                line = self._not_reading(request, len(line))
        self._unwritten += len(line)
        return line

    def done(self, id: JsonId) -> None:
        """The agent's request `id` is no longer in flight: its answer is queued (or
        could not be, stdin being closed)."""
        self._in_flight.pop(id, None)

    # --- the write queue ---

    def written(self, size: int) -> None:
        """`size` bytes of lines made here were written to the agent."""
        self._unwritten -= size

    def abandoned(self, line: bytes) -> None:
        """A line made here will never be written: it was not queued after all (its
        sender was cancelled while it waited for room, or stdin is closed)."""
        self._unwritten -= len(line)

    def dropped(self, line: bytes) -> None:
        """A `Reply` found no room and was dropped: the agent reads nothing."""
        self._unwritten -= len(line)
        self._dropped += 1
        if self._dropped == 1 or self._dropped % 1000 == 0:
            self._log.warning(
                "agent.not_reading", dropped_replies=self._dropped, unwritten_bytes=self._unwritten
            )

    # --- the rules ---

    def _refusal(self, event: Request) -> bytes | None:
        """The error line that refuses `event` at once, or None to dispatch it."""
        if self._refusing is not None:
            self._log.warning(
                "agent.request_refused", method=short(event.method), why=self._refusing[1]
            )
            return self._rpc.error(event.id, *self._refusing)
        if event.id in self._in_flight:
            self._log.warning("agent.duplicate_request_id", id=short(repr(event.id)))
            return self._rpc.error(
                event.id, INVALID_REQUEST, "Invalid request: this id is already in flight"
            )
        if len(self._in_flight) >= self._max_in_flight:
            self._log.warning(
                "agent.too_many_requests", limit=self._max_in_flight, method=short(event.method)
            )
            return self._rpc.error(
                event.id,
                INTERNAL_ERROR,
                f"Too many requests in flight (the limit is {self._max_in_flight})",
            )
        return None

    def _cancel(self, params: Any) -> Cancel | None:
        request_id = params.get("requestId") if isinstance(params, dict) else None
        try:
            answered = self._in_flight.get(request_id, True)
        except TypeError:  # an unhashable id names no request of the agent's
            answered = True
        if answered:
            self._log.debug("agent.cancel_unknown_request", id=short(repr(request_id)))
            return None
        return Cancel(request_id)

    def _not_reading(self, request: Request, size: int) -> bytes:
        """The short error that stands for an answer the agent would not read in time."""
        self._log.warning(
            "agent.not_reading", method=short(request.method), dropped_bytes=size,
            unwritten_bytes=self._unwritten,
        )  # fmt: skip
        return self._rpc.error(
            request.id,
            INTERNAL_ERROR,
            f"Internal error: the agent is not reading its answers ({self._unwritten:,} bytes "
            f"wait to be written); this answer of {size:,} bytes was not kept",
        )

    def _count(self, event: Malformed) -> None:
        kind = _MALFORMED_KINDS.get(event.reason, "over the line limit")
        self._malformed[kind] = self._malformed.get(kind, 0) + 1
        self._malformed_total += 1
        self._log.warning(
            "agent.malformed_line",
            reason=event.reason,
            length=event.length,
            prefix=event.prefix,
            answered=event.reply is not None,
        )
        if self._on_rejected is not None:
            self._on_rejected(event)

    def _judge(self) -> None:
        """Give up on the agent if its malformed lines meet the rule (module docstring)."""
        run, total, lines = self._run, self._malformed_total, self._lines
        if run >= self._give_up_after:
            what = f"sent {run:,} lines in a row that are not JSON-RPC"
        elif total > 10 * self._give_up_after and total * 10 > lines * 9:
            what = f"sent {total:,} lines that are not JSON-RPC out of {lines:,}"
        else:
            return
        kinds = ", ".join(
            f"{n:,} {kind}" for kind, n in sorted(self._malformed.items(), key=lambda kv: -kv[1])
        )
        self._gave_up = f"{what} ({kinds})"
        self._stopped = True
        self._log.error(
            "agent.hopeless", malformed=total, lines=lines, run=run, reason=self._gave_up
        )


_MALFORMED_KINDS: Final = {
    "not UTF-8": "not UTF-8",
    "not JSON": "not JSON",
    "a batch": "batches",
    "not an object": "not a JSON object",
    "request id of a bad type": "with an id of a bad type",
    "method is not a string": "with a method that is not a string",
    "neither request nor response": "neither request nor response",
}
"""`Malformed.reason` -> how `Peer.gave_up` names it (over-long lines name their size)."""
