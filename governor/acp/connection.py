"""The trio loop around `governor.acp.jsonrpc.JsonRpc`: one agent's stdio, read, written and served.

`Connection.serve` opens the nursery that owns every task of the connection;
none outlives it:

- the **reader** receives the agent's stdout and feeds the sans-IO core. It
  never waits on anything but the pipe (and, with an async notification
  callback, on the bounded in-order notification queue), so a slow decision
  can never stop it from reading;
- the **writer** is the only task that writes the agent's stdin; every line
  goes to it through one bounded channel. If the agent stops reading, only
  the writer and the tasks that want to send wait; the reader goes on;
- the **stderr drain** reads the agent's stderr all the time (a chatty agent
  must never block on a full pipe) and keeps its last lines for failure
  reasons (`Connection.stderr_tail`);
- one task per **incoming request**, each in its own cancel scope (the agent
  may withdraw a request with ``$/cancel_request``), at most `max_in_flight`
  at once: beyond that a request is refused at once, so a flood from an agent
  that does not read our answers cannot grow memory without bound. Counting
  requests is not enough when answers are big (many reads of a large file,
  all held for an agent that stopped reading): an answer that would take the
  bytes waiting to be written past `max_unwritten_bytes` is replaced by a short
  ``-32603`` error, unless nothing else waits;
- an optional **notification** task awaits an async callback, in order.

Hazards this layout avoids: the reader blocked behind a write (the classic
pipe deadlock when both sides fill each other's buffers), notifications
reordered by per-message tasks (the official SDK's habit), and a line that
grows memory without bound (the core discards over-long lines as it reads).

**Giving up on a hopeless agent.** Each line that is not a JSON-RPC message
(`governor.acp.jsonrpc.Malformed`: not UTF-8, not JSON, over the line limit, not
an object, a batch, a bad id or method) is answered as JSON-RPC says and
counted. The reader stops reading -- as if the agent's stdout had ended, so
every pending request fails with `ConnectionClosed` -- when either

- the agent's last `give_up_after` lines (default 1,000) were all malformed,
  with no usable message between them; or
- more than ``10 * give_up_after`` of its lines were malformed and they are
  more than 9 in 10 of all its lines (a little valid traffic does not keep a
  garbage stream alive).

`Connection.gave_up` then says what the agent did ("sent 1,000 lines in a row
that are not JSON-RPC (1,000 not JSON)"). The thresholds are far above what a
sloppy but working agent does (a stray console line on stdout now and then)
and low enough that a broken one is stopped long before the attempt's
timeout. The run is checked at each malformed line, the share once per chunk
read, so a usable message costs the hot path no more than resetting the run.

Logs are structlog events on ``governor.acp.connection``; they carry sizes, ids
and reasons, never the content of a line beyond a short prefix.
"""

from __future__ import annotations

import contextlib
import errno
import inspect
import math
import os
from collections import deque
from collections.abc import Awaitable, Callable, Collection
from types import CoroutineType
from typing import Any, Final, TypeAlias, cast

import structlog
import trio
from pydantic import BaseModel

from governor.acp.dispatch import Answer, HandlerTable, begin, reply
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
"""The agent->client notifications of ACP v1 handed to the callback by default."""

CANCEL_REQUEST: Final = "$/cancel_request"

NotificationCallback: TypeAlias = Callable[[str, Any], None] | Callable[[str, Any], Awaitable[None]]
"""``(method, params)``; a plain function is called inline, an ``async def`` awaited in order."""

_RECEIVE_SIZE: Final = 256 * 1024
_WRITE_BATCH: Final = 256
_NOTIFICATION_QUEUE: Final = 1024


class ConnectionClosed(Exception):
    """The agent's stdout ended (or its stdin broke) before the answer came."""


class RemoteError(Exception):
    """The agent answered our request with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None, *, method: str = "") -> None:
        super().__init__(code, message, data)
        self.code = code
        self.message = message
        self.data = data
        self.method = method

    def __str__(self) -> str:
        where = f"{self.method!r} failed: " if self.method else ""
        return f"{where}{self.code} {self.message}"


class RequestTimeout(trio.TooSlowError):
    """The agent did not answer within the request's timeout (the id is then forgotten)."""

    def __init__(self, method: str, timeout: float) -> None:
        super().__init__(f"the agent did not answer {method!r} within {timeout:g} s")
        self.method = method
        self.timeout = timeout


class _Waiter:
    __slots__ = ("event", "outcome", "then_refuse")

    def __init__(self, then_refuse: tuple[int, str] | None = None) -> None:
        self.event = trio.Event()
        self.outcome: Response | ErrorResponse | None = None
        self.then_refuse = then_refuse


class Connection:
    """A JSON-RPC peer connection over an agent's stdin/stdout (and stderr).

    Start `serve` in a nursery (``await nursery.start(conn.serve, handlers,
    on_notification)``), then make requests with `request` and `notify`. `serve`
    returns when the agent's stdout ends; cancel it to stop earlier.
    """

    def __init__(
        self,
        stdin: trio.abc.SendStream,
        stdout: trio.abc.ReceiveStream,
        stderr: trio.abc.ReceiveStream | None = None,
        *,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        max_in_flight: int = 256,
        write_buffer: int = 256,
        stderr_lines: int = 20,
        stderr_line_chars: int = 2000,
        stderr_grace: float = 1.0,
        give_up_after: int = 1000,
        max_unwritten_bytes: int = 64 * 2**20,
        log: Any = None,
    ) -> None:
        """`max_in_flight` caps the agent's concurrent requests; `write_buffer` is the
        number of lines queued for stdin before senders wait; `stderr_grace` is how
        long `serve` waits for stderr to end once stdout has; `give_up_after` is the
        number of malformed lines in a row after which the agent is hopeless (see
        the module docstring); `max_unwritten_bytes` bounds the answers held for an
        agent that does not read them."""
        if give_up_after < 1:
            raise ValueError(f"give_up_after must be at least 1, got {give_up_after}")
        self._stdin = stdin
        self._stdout = stdout
        self._stderr = stderr
        self._rpc = JsonRpc(max_line_bytes=max_line_bytes)
        self._max_in_flight = max_in_flight
        self._out_send, self._out_receive = trio.open_memory_channel[bytes | None](write_buffer)
        self._waiters: dict[int, _Waiter] = {}
        self._in_flight: dict[JsonId, trio.CancelScope] = {}
        self._tail: deque[str] = deque(maxlen=stderr_lines)
        self._tail_partial = b""
        self._line_chars = stderr_line_chars
        self._stderr_grace = stderr_grace
        self._log = log if log is not None else structlog.get_logger("governor.acp.connection")
        self._serving = False
        self._stdout_closed = False
        self._stdin_closed = trio.Event()
        self._dropped_replies = 0
        self._give_up_after = give_up_after
        self._lines = 0
        self._malformed: dict[str, int] = {}
        self._malformed_total = 0
        self._gave_up: str | None = None
        self._refusing: tuple[int, str] | None = None
        self._max_unwritten = max_unwritten_bytes
        self._unwritten = 0  # bytes queued for stdin (or waiting to be), not yet written
        self._sends_waiting = 0  # immediate answers waiting for room in the write queue
        self._nursery: trio.Nursery | None = None
        self._handlers: HandlerTable = {}

    @classmethod
    def from_process(cls, process: trio.Process, **options: Any) -> Connection:
        """A connection over a process started with ``stdin=PIPE, stdout=PIPE`` (and
        ideally ``stderr=PIPE``, so its tail can explain a failure)."""
        if process.stdin is None or process.stdout is None:
            raise ValueError(
                "the agent process needs stdin=subprocess.PIPE and stdout=subprocess.PIPE "
                "to speak ACP"
            )
        return cls(process.stdin, process.stdout, process.stderr, **options)

    # --- what callers see ---

    @property
    def stderr_tail(self) -> list[str]:
        """The agent's last stderr lines (each cut to `stderr_line_chars`), oldest first."""
        lines = list(self._tail)
        if self._tail_partial:
            lines.append(self._decode_stderr(self._tail_partial))
            del lines[: max(0, len(lines) - (self._tail.maxlen or 0))]
        return lines

    @property
    def gave_up(self) -> str | None:
        """Why the reader gave up on the agent (what it sent), or None."""
        return self._gave_up

    @property
    def closed(self) -> bool:
        """True once the agent's stdout has ended (or `serve` stopped): no answer can come."""
        return self._stdout_closed

    async def request(
        self,
        method: str,
        params: Any = None,
        *,
        timeout: float | None = None,
        then_refuse: tuple[int, str] | None = None,
    ) -> Any:
        """Send a request and wait for its result.

        Raises `RemoteError` for an error answer, `ConnectionClosed` if the agent's
        stdout ends first (or its stdin is closed), `RequestTimeout` after `timeout`
        seconds (a late answer is then logged and dropped). A pydantic model as
        `params` is sent dumped by alias, without ``None`` fields.

        `then_refuse` (code, message): from the moment the answer is *read*, every
        later request of the agent is answered with this error at once and never
        dispatched. Ordering is the wire's: a request on the line after the answer
        is refused even when both arrive in one chunk, which a flag set by the
        awaiting task could not promise (the handlers would run first). For
        ``session/prompt``: after its result the agent has no turn to act in.
        """
        self._check_open(method)
        id, line = self._rpc.request(method, _plain(params))
        waiter = _Waiter(then_refuse)
        self._waiters[id] = waiter
        deadline = math.inf if timeout is None else trio.current_time() + timeout
        try:
            with trio.CancelScope(deadline=deadline) as scope:
                await self._send(line, method)
                await waiter.event.wait()
        finally:
            del self._waiters[id]
            self._rpc.forget(id)
        if scope.cancelled_caught:
            raise RequestTimeout(method, timeout or 0.0)
        outcome = waiter.outcome
        if type(outcome) is Response:
            return outcome.result
        if type(outcome) is ErrorResponse:
            raise RemoteError(outcome.code, outcome.message, outcome.data, method=method)
        if self._gave_up is not None:
            raise ConnectionClosed(
                f"the governor stopped reading the agent before it answered {method!r}: "
                f"it {self._gave_up}"
            )
        raise ConnectionClosed(f"the agent's stdout closed before it answered {method!r}")

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (queued for the writer; waits only if the queue is full)."""
        self._check_open(method)
        await self._send(self._rpc.notify(method, _plain(params)), method)

    async def close_stdin(self) -> None:
        """Close the agent's stdin once everything queued before has been written.

        Many agents exit when their stdin ends. Returns once it is closed; wrap
        it in a timeout if the agent might not be reading.
        """
        if not self._serving:  # no writer to queue behind
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self._stdin.aclose()
            self._stdin_closed.set()
        if not self._stdin_closed.is_set():
            try:
                await self._out_send.send(None)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                return
            await self._stdin_closed.wait()

    async def serve(
        self,
        handlers: HandlerTable,
        on_notification: NotificationCallback,
        *,
        notifications: Collection[str] = DEFAULT_NOTIFICATIONS,
        task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        """Read and answer the agent until its stdout ends.

        `handlers` answers the agent's requests (see `governor.acp.dispatch`), each in
        its own task. Notifications whose method is in `notifications` go to
        `on_notification`, in the order they arrived; ``$/cancel_request`` is
        handled here; others are ignored (unknown ``_`` extensions quietly).
        When stdout ends, pending requests fail with `ConnectionClosed`, queued
        notifications are still delivered, in-flight handlers are cancelled.
        """
        if self._serving or self._stdout_closed:
            raise RuntimeError("serve() runs once per connection")
        self._serving = True
        self._handlers = handlers
        is_async = inspect.iscoroutinefunction(on_notification) or inspect.iscoroutinefunction(
            type(on_notification).__call__  # an object with an async __call__
        )
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._write)
                stderr_done = trio.Event()
                if self._stderr is not None:
                    nursery.start_soon(self._drain_stderr, self._stderr, stderr_done)
                else:
                    stderr_done.set()
                if is_async:
                    queue_send, queue_receive = trio.open_memory_channel[Notification](
                        _NOTIFICATION_QUEUE
                    )
                    delivered = trio.Event()
                    nursery.start_soon(
                        self._deliver,
                        queue_receive,
                        cast(Callable[[str, Any], Awaitable[None]], on_notification),
                        delivered,
                    )
                    task_status.started()
                    async with queue_send:
                        await self._read(notifications, None, queue_send)
                    await delivered.wait()
                else:
                    task_status.started()
                    callback = cast(Callable[[str, Any], None], on_notification)
                    await self._read(notifications, callback, None)
                with trio.move_on_after(self._stderr_grace):
                    await stderr_done.wait()
                nursery.cancel_scope.cancel()
        finally:
            self._nursery = None
            self._serving = False
            self._close_stdout()

    # --- the reader ---

    async def _read(
        self,
        notifications: Collection[str],
        callback: Callable[[str, Any], None] | None,
        queue: trio.MemorySendChannel[Notification] | None,
    ) -> None:
        receive = _receiver(self._stdout)
        feed = self._rpc.feed
        others = self._on_event
        wanted = frozenset(notifications)
        log = self._log
        run = 0  # malformed lines since the last usable message
        give_up_after = self._give_up_after
        while True:
            try:
                data = await receive()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            events = feed(data) if data else self._rpc.feed_eof()
            for event in events:
                if type(event) is Notification:
                    run = 0
                    method = event.method
                    if method in wanted:
                        if queue is not None:
                            await queue.send(event)
                            continue
                        try:
                            callback(method, event.params)  # type: ignore[misc]  # set when queue is None
                        except Exception:
                            log.error("notification.failed", method=method, exc_info=True)
                    else:
                        self._unwanted_notification(event)
                elif type(event) is Malformed:
                    run += 1
                    self._on_malformed(event)
                    if run == give_up_after:
                        break  # hopeless: judged below; the rest of this chunk is not read
                else:
                    run = 0
                    others[type(event)](self, event)
            if events:
                self._lines += len(events)
                if run >= give_up_after or self._malformed_total > 10 * give_up_after:
                    self._judge(run)
                    if self._gave_up is not None:
                        break
            if not data:
                break
        self._close_stdout()

    def _judge(self, run: int) -> None:
        """Give up on the agent if its malformed lines meet the rule (module docstring)."""
        total = self._malformed_total
        if run >= self._give_up_after:
            what = f"sent {run:,} lines in a row that are not JSON-RPC"
        elif total > 10 * self._give_up_after and total * 10 > self._lines * 9:
            what = f"sent {total:,} lines that are not JSON-RPC out of {self._lines:,}"
        else:
            return
        kinds = ", ".join(
            f"{n:,} {kind}" for kind, n in sorted(self._malformed.items(), key=lambda kv: -kv[1])
        )
        self._gave_up = f"{what} ({kinds})"
        self._log.error(
            "agent.hopeless", malformed=total, lines=self._lines, run=run, reason=self._gave_up
        )

    def _unwanted_notification(self, event: Notification) -> None:
        if event.method == CANCEL_REQUEST:
            self._cancel_incoming(event.params)
        elif event.method.startswith("_"):
            self._log.debug("agent.extension_notification_ignored", method=short(event.method))
        else:
            self._log.warning("agent.unknown_notification", method=short(event.method))

    def _on_request(self, event: Request) -> None:
        if self._refusing is not None:
            self._send_nowait(self._rpc.error(event.id, *self._refusing))
            self._log.warning(
                "agent.request_refused", method=short(event.method), why=self._refusing[1]
            )
            return
        if event.id in self._in_flight:
            self._send_nowait(
                self._rpc.error(
                    event.id, INVALID_REQUEST, "Invalid request: this id is already in flight"
                )
            )
            self._log.warning("agent.duplicate_request_id", id=short(repr(event.id)))
            return
        if len(self._in_flight) >= self._max_in_flight:
            self._send_nowait(
                self._rpc.error(
                    event.id,
                    INTERNAL_ERROR,
                    f"Too many requests in flight (the limit is {self._max_in_flight})",
                )
            )
            self._log.warning(
                "agent.too_many_requests", limit=self._max_in_flight, method=short(event.method)
            )
            return
        outcome = begin(self._handlers, event.method, event.params)
        if type(outcome) is not CoroutineType:  # `begin`'s later answers are coroutines
            # Answered at once, here in the reader: no task, no scope, no pass.
            line = reply(event.id, outcome)
            if self._unwritten and self._unwritten + len(line) > self._max_unwritten:
                line = self._not_reading(event, len(line))
            self._unwritten += len(line)
            try:
                self._out_send.send_nowait(line)
            except trio.WouldBlock:  # the agent is slow to read: a task waits to send
                if self._sends_waiting >= self._max_in_flight:  # as many as requests in flight
                    self._send_nowait(line)  # counted and dropped: the agent reads nothing
                    return
                assert self._nursery is not None
                self._nursery.start_soon(self._send_later, line)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._log.info("agent.reply_not_sent", reason="stdin closed")
            return
        scope = trio.CancelScope()
        self._in_flight[event.id] = scope
        assert self._nursery is not None
        self._nursery.start_soon(self._serve_request, event, outcome, scope)

    def _on_response(self, event: Response | ErrorResponse) -> None:
        waiter = self._waiters.get(event.id)
        if waiter is None:  # cannot happen: the core only correlates ids we wait on
            self._log.warning("agent.unknown_response", id=event.id)
            return
        waiter.outcome = event
        waiter.event.set()
        if waiter.then_refuse is not None:
            self._refusing = waiter.then_refuse

    def _on_unknown_response(self, event: UnknownResponse) -> None:
        self._log.warning(
            "agent.unknown_response", id=short(repr(event.id)), error_code=event.code
        )

    def _on_malformed(self, event: Malformed) -> None:
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
        if event.reply is not None:
            self._send_nowait(event.reply)

    _on_event: Final[dict[type, Callable[[Connection, Any], None]]] = {
        Request: _on_request,
        Response: _on_response,
        ErrorResponse: _on_response,
        UnknownResponse: _on_unknown_response,
        Malformed: _on_malformed,
    }

    def _cancel_incoming(self, params: Any) -> None:
        request_id = params.get("requestId") if isinstance(params, dict) else None
        try:
            scope = self._in_flight.get(request_id)
        except TypeError:  # an unhashable id names no request of ours
            scope = None
        if scope is None:
            self._log.debug("agent.cancel_unknown_request", id=short(repr(request_id)))
            return
        scope.cancel()

    def _close_stdout(self) -> None:
        if self._stdout_closed:
            return
        self._stdout_closed = True
        for waiter in self._waiters.values():
            waiter.event.set()  # outcome None: ConnectionClosed

    # --- the tasks ---

    async def _serve_request(
        self, event: Request, outcome: Awaitable[Answer], scope: trio.CancelScope
    ) -> None:
        try:
            line = None
            with scope:
                line = reply(event.id, await outcome)
            if line is None:  # withdrawn by $/cancel_request
                line = self._rpc.error(event.id, REQUEST_CANCELLED, "Request cancelled")
            elif self._unwritten and self._unwritten + len(line) > self._max_unwritten:
                line = self._not_reading(event, len(line))
            self._unwritten += len(line)
            try:
                self._out_send.send_nowait(line)  # the usual case: no extra scheduler pass
            except trio.WouldBlock:
                await self._send_later(line)  # the agent is slow to read: wait here
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self._log.info("agent.reply_not_sent", reason="stdin closed")
        finally:
            del self._in_flight[event.id]

    async def _send_later(self, line: bytes) -> None:
        self._sends_waiting += 1
        try:
            await self._out_send.send(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._log.info("agent.reply_not_sent", reason="stdin closed")
        finally:
            self._sends_waiting -= 1

    async def _write(self) -> None:
        """The only writer of stdin: batches whatever is queued into one write."""
        receive = self._out_receive
        send_all = _sender(self._stdin)
        try:
            async for first in receive:
                lines: list[bytes] = []
                end = False
                item = first
                while True:  # whatever else is queued goes out in the same write
                    if item is None:
                        end = True  # close_stdin(): nothing queued after it is written
                        break
                    lines.append(item)
                    if len(lines) == _WRITE_BATCH:
                        break
                    try:
                        item = receive.receive_nowait()
                    except trio.WouldBlock:
                        break
                data = lines[0] if len(lines) == 1 else b"".join(lines)
                try:
                    if data:
                        await send_all(data)
                        self._unwritten -= len(data)
                    if end:
                        await self._stdin.aclose()
                        return
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    self._log.warning("agent.stdin_closed")
                    return
        finally:
            # Nobody writes any more: senders get BrokenResourceError instead of waiting.
            receive.close()
            self._stdin_closed.set()

    async def _deliver(
        self,
        queue: trio.MemoryReceiveChannel[Notification],
        callback: Callable[[str, Any], Awaitable[None]],
        delivered: trio.Event,
    ) -> None:
        try:
            async for event in queue:
                try:
                    await callback(event.method, event.params)
                except Exception:
                    self._log.error("notification.failed", method=event.method, exc_info=True)
        finally:
            delivered.set()

    async def _drain_stderr(self, stderr: trio.abc.ReceiveStream, done: trio.Event) -> None:
        """Read stderr to its end, keeping only the last lines (bounded, cheap per chunk)."""
        keep = self._tail.maxlen or 0
        cap = self._line_chars * 4  # bytes enough for `cap` chars of UTF-8
        receive = _receiver(stderr)
        try:
            while True:
                try:
                    data = await receive()
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    break
                if not data:
                    break
                lines = data.split(b"\n")
                rest = lines.pop()
                if lines:
                    lines[0] = self._tail_partial + lines[0][:cap]
                    self._tail_partial = b""
                    for line in lines[-keep:] if keep else ():
                        self._tail.append(self._decode_stderr(line))
                room = cap - len(self._tail_partial)
                if room > 0 and rest:
                    self._tail_partial += rest[:room]
        finally:
            if self._tail_partial:
                self._tail.append(self._decode_stderr(self._tail_partial))
                self._tail_partial = b""
            done.set()

    def _decode_stderr(self, line: bytes) -> str:
        return (
            line[: self._line_chars * 4].decode("utf-8", "replace").rstrip("\r")[: self._line_chars]
        )

    # --- sending ---

    def _check_open(self, method: str) -> None:
        if self._stdout_closed:
            raise ConnectionClosed(f"cannot send {method!r}: the agent's stdout has closed")
        if not self._serving:
            raise RuntimeError(f"cannot send {method!r}: serve() is not running yet")

    def _not_reading(self, event: Request, size: int) -> bytes:
        """The short error that stands for an answer the agent would not read in time."""
        self._log.warning(
            "agent.not_reading", method=short(event.method), dropped_bytes=size,
            unwritten_bytes=self._unwritten,
        )  # fmt: skip
        return self._rpc.error(
            event.id,
            INTERNAL_ERROR,
            f"Internal error: the agent is not reading its answers ({self._unwritten:,} bytes "
            f"wait to be written); this answer of {size:,} bytes was not kept",
        )

    async def _send(self, line: bytes, method: str) -> None:
        self._unwritten += len(line)
        try:
            await self._out_send.send(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            raise ConnectionClosed(f"cannot send {method!r}: the agent's stdin is closed") from None

    def _send_nowait(self, line: bytes) -> None:
        """Queue a reply from the reader itself, which must never wait to write."""
        try:
            self._out_send.send_nowait(line)
            self._unwritten += len(line)
        except trio.WouldBlock:
            self._dropped_replies += 1
            if self._dropped_replies == 1 or self._dropped_replies % 1000 == 0:
                self._log.warning("agent.not_reading", dropped_replies=self._dropped_replies)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass


# --- pipes ---------------------------------------------------------------------------
#
# A trio stream call costs a scheduler pass of its own: `FdStream.receive_some`
# and `send_all` each start with a checkpoint. On the agent's pipes the
# connection does the same non-blocking reads and writes itself, parking only
# when the pipe is empty or full, so a round trip pays for no pass but the ones
# where a task really waits. Any other stream goes the usual way.


def _receiver(stream: trio.abc.ReceiveStream) -> Callable[[], Awaitable[bytes]]:
    """``receive()`` for `stream`: b"" at its end."""
    if not isinstance(stream, trio.lowlevel.FdStream):

        async def receive_stream() -> bytes:
            return bytes(await stream.receive_some(_RECEIVE_SIZE))

        return receive_stream
    fd = stream.fileno()

    async def receive_fd() -> bytes:
        while True:
            await trio.lowlevel.wait_readable(fd)  # the checkpoint, and the wait
            try:
                return os.read(fd, _RECEIVE_SIZE)
            except BlockingIOError:
                continue
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    raise trio.ClosedResourceError("the pipe was closed") from None
                raise trio.BrokenResourceError from exc

    return receive_fd


def _sender(stream: trio.abc.SendStream) -> Callable[[bytes], Awaitable[None]]:
    """``send_all(data)`` for `stream`: parks only while the pipe is full."""
    if not isinstance(stream, trio.lowlevel.FdStream):
        return stream.send_all
    fd = stream.fileno()

    async def send_fd(data: bytes) -> None:
        view = memoryview(data)
        while view:
            try:
                view = view[os.write(fd, view) :]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(fd)
            except OSError as exc:
                if exc.errno == errno.EBADF:
                    raise trio.ClosedResourceError("the pipe was closed") from None
                raise trio.BrokenResourceError from exc

    return send_fd


_MALFORMED_KINDS: Final = {
    "not UTF-8": "not UTF-8",
    "not JSON": "not JSON",
    "a batch": "batches",
    "not an object": "not a JSON object",
    "request id of a bad type": "with an id of a bad type",
    "method is not a string": "with a method that is not a string",
    "neither request nor response": "neither request nor response",
}
"""`Malformed.reason` -> how `Connection.gave_up` names it (over-long lines name their size)."""


def _plain(params: Any) -> Any:
    if isinstance(params, BaseModel):
        return params.model_dump(mode="json", by_alias=True, exclude_none=True)
    return params

