"""The trio loop around `governor.acp.peer.Peer`: one agent's stdio, read, written and served.

The protocol's rules -- which requests are dispatched or refused, the in-flight
cap, ``$/cancel_request``, `then_refuse`, giving up on a hopeless agent, the bound
on unwritten bytes -- are the peer's, decided without I/O. This file only
carries them out: pipes, tasks, cancel scopes and channels.
`Connection.serve` opens the nursery that owns every task of the connection;
none outlives it:

- the **reader** receives the agent's stdout, feeds the peer and does what it
  says. It never waits on anything but the pipe (and, with an async
  notification callback, on the bounded in-order notification queue), so a
  slow decision can never stop it from reading. A request whose handler
  answers at once is answered here, without a task;
- the **writer** task writes the agent's stdin: every line goes to it through
  one bounded channel, and it writes them in order. If the agent stops
  reading, only the writer and the tasks that want to send wait; the reader
  goes on: a reply of its own that finds the channel full is dropped (the
  peer counts it), an immediate answer that finds it full gets a task that
  waits. One shortcut passes the writer, and only in
  `Connection._write_through`: an answer made at once while nothing else waits
  to be written goes from the reader straight into the pipe, because handing
  it to the writer costs every permission round trip a scheduler pass;
- the **stderr drain** reads the agent's stderr all the time (a chatty agent
  must never block on a full pipe) and keeps its last lines for failure
  reasons (`Connection.stderr_tail`);
- one task per **incoming request** whose handler answers later, each in its
  own cancel scope (the agent may withdraw a request), at most `max_in_flight`
  of them with the answers waiting for room;
- an optional **notification** task awaits an async callback, in order.

Hazards this layout avoids: the reader blocked behind a write (the classic
pipe deadlock when both sides fill each other's buffers), two tasks writing
one pipe (a line split by another's partial write), notifications reordered
by per-message tasks (the official SDK's habit), and a line that grows memory
without bound (the framing discards over-long lines as it reads).

When the peer gives up on the agent, the reader stops as if the agent's
stdout had ended: every pending request fails with `ConnectionClosed`, and
`Connection.gave_up` says what the agent did ("sent 1,000 lines in a row that
are not JSON-RPC (1,000 not JSON)").

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

from governor.acp.dispatch import Answer, HandlerTable, begin
from governor.acp.jsonrpc import (
    DEFAULT_MAX_LINE_BYTES,
    ErrorResponse,
    JsonId,
    Malformed,
    Notification,
    Request,
    Response,
    short,
)
from governor.acp.peer import (
    DEFAULT_GIVE_UP_AFTER,
    DEFAULT_MAX_IN_FLIGHT,
    DEFAULT_MAX_UNWRITTEN_BYTES,
    DEFAULT_NOTIFICATIONS,
    Cancel,
    Peer,
    Reply,
)

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
    __slots__ = ("event", "outcome")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.outcome: Response | ErrorResponse | None = None


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
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        write_buffer: int = 256,
        stderr_lines: int = 20,
        stderr_line_chars: int = 2000,
        stderr_grace: float = 1.0,
        give_up_after: int = DEFAULT_GIVE_UP_AFTER,
        max_unwritten_bytes: int = DEFAULT_MAX_UNWRITTEN_BYTES,
        log: Any = None,
        on_rejected: Callable[[Malformed], None] | None = None,
    ) -> None:
        """`max_in_flight` caps the agent's concurrent requests; `write_buffer` is the
        number of lines queued for stdin before senders wait; `stderr_grace` is how
        long `serve` waits for stderr to end once stdout has; `give_up_after` is the
        number of malformed lines in a row after which the agent is hopeless;
        `max_unwritten_bytes` bounds the answers held for an agent that does not
        read them (the rules: `governor.acp.peer`); `on_rejected` is told of each
        line rejected at the wire (`governor.acp.jsonrpc.Malformed`)."""
        self._log = log if log is not None else structlog.get_logger("governor.acp.connection")
        self._peer = Peer(
            max_line_bytes=max_line_bytes,
            max_in_flight=max_in_flight,
            give_up_after=give_up_after,
            max_unwritten_bytes=max_unwritten_bytes,
            log=self._log,
            on_rejected=on_rejected,
        )
        self._stdin = stdin
        self._stdin_fd: int | None = (
            stdin.fileno() if isinstance(stdin, trio.lowlevel.FdStream) and write_buffer else None
        )
        """The pipe for `_write_through` (whose partial write must fit in the queue);
        None from `close_stdin` on, so that nothing is written past the end."""
        self._stdout = stdout
        self._stderr = stderr
        self._out_send, self._out_receive = trio.open_memory_channel[bytes | None](write_buffer)
        self._waiters: dict[int, _Waiter] = {}
        self._scopes: dict[JsonId, trio.CancelScope] = {}  # handlers that answer later
        self._tail: deque[str] = deque(maxlen=stderr_lines)
        self._tail_partial = b""
        self._line_chars = stderr_line_chars
        self._stderr_grace = stderr_grace
        self._serving = False
        self._stdout_closed = False
        self._stdin_closed = trio.Event()
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
        return self._peer.gave_up

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
        dispatched, in the wire's order (`governor.acp.peer`). For
        ``session/prompt``: after its result the agent has no turn to act in.
        """
        self._check_open(method)
        id, line = self._peer.request(method, _plain(params), then_refuse=then_refuse)
        waiter = _Waiter()
        self._waiters[id] = waiter
        deadline = math.inf if timeout is None else trio.current_time() + timeout
        try:
            with trio.CancelScope(deadline=deadline) as scope:
                await self._send(line, method)
                await waiter.event.wait()
        finally:
            del self._waiters[id]
            self._peer.forget(id)
        if scope.cancelled_caught:
            raise RequestTimeout(method, timeout or 0.0)
        outcome = waiter.outcome
        if type(outcome) is Response:
            return outcome.result
        if type(outcome) is ErrorResponse:
            raise RemoteError(outcome.code, outcome.message, outcome.data, method=method)
        if self._peer.gave_up is not None:
            raise ConnectionClosed(
                f"the governor stopped reading the agent before it answered {method!r}: "
                f"it {self._peer.gave_up}"
            )
        raise ConnectionClosed(f"the agent's stdout closed before it answered {method!r}")

    async def notify(self, method: str, params: Any = None) -> None:
        """Send a notification (queued for the writer; waits only if the queue is full)."""
        self._check_open(method)
        await self._send(self._peer.notify(method, _plain(params)), method)

    async def close_stdin(self) -> None:
        """Close the agent's stdin once everything queued before has been written.

        Many agents exit when their stdin ends. Returns once it is closed; wrap
        it in a timeout if the agent might not be reading.
        """
        if not self._serving:  # no writer to queue behind
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
                await self._stdin.aclose()
            self._stdin_closed.set()
        self._stdin_fd = None
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

        `handlers` answers the agent's requests (see `governor.acp.dispatch`).
        Notifications whose method is in `notifications` go to
        `on_notification`, in the order they arrived; ``$/cancel_request`` stops
        the handler it names; others are ignored (unknown ``_`` extensions quietly).
        When stdout ends, pending requests fail with `ConnectionClosed`, queued
        notifications are still delivered, in-flight handlers are cancelled.
        """
        if self._serving or self._stdout_closed:
            raise RuntimeError("serve() runs once per connection")
        self._serving = True
        self._handlers = handlers
        self._peer.notifications = frozenset(notifications)
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
                        await self._read(None, queue_send)
                    await delivered.wait()
                else:
                    task_status.started()
                    callback = cast(Callable[[str, Any], None], on_notification)
                    await self._read(callback, None)
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
        callback: Callable[[str, Any], None] | None,
        queue: trio.MemorySendChannel[Notification] | None,
    ) -> None:
        """Feed the peer until it is closed (stdout ended, or it gave up) and do what it says."""
        receive = _receiver(self._stdout)
        peer = self._peer
        log = self._log
        while not peer.closed:
            try:
                data = await receive()
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                data = b""
            for action in peer.receive(data):
                if type(action) is Notification:
                    if queue is not None:
                        await queue.send(action)
                        continue
                    try:
                        callback(action.method, action.params)  # type: ignore[misc]  # set when queue is None
                    except Exception:
                        log.error("notification.failed", method=action.method, exc_info=True)
                elif type(action) is Request:
                    self._dispatch(action)
                elif type(action) is Response or type(action) is ErrorResponse:
                    self._wake(action)
                elif type(action) is Reply:
                    self._reply(action.line)
                elif type(action) is Cancel:
                    self._scopes[action.id].cancel()  # its task answers -32800
        self._close_stdout()

    def _dispatch(self, request: Request) -> None:
        outcome = begin(self._handlers, request.method, request.params)
        assert self._nursery is not None
        if type(outcome) is CoroutineType:  # `begin`'s later answers are coroutines
            scope = trio.CancelScope()
            self._scopes[request.id] = scope
            self._nursery.start_soon(self._serve_request, request, outcome, scope)
            return
        # Answered at once, here in the reader: no task, no scope.
        line = self._peer.answer(request, cast(Answer, outcome))
        if self._write_through(line):
            self._peer.done(request.id)
            return
        try:
            self._out_send.send_nowait(line)
        except trio.WouldBlock:  # the agent is slow to read: a task waits, holding the slot
            self._nursery.start_soon(self._send_answer, request.id, line)
            return
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._peer.abandoned(line)
            self._log.info("agent.reply_not_sent", reason="stdin closed")
        self._peer.done(request.id)

    def _write_through(self, line: bytes) -> bool:
        """The shortcut past the writer (module docstring): write an answer made at
        once straight into the pipe when nothing else waits to be written -- the peer
        counts every line until it is written, so only this one is counted -- and the
        writer still runs. False when the line must be queued instead. What the pipe
        does not take at once is queued, behind nothing."""
        fd = self._stdin_fd
        if fd is None or self._peer.unwritten != len(line) or self._stdin_closed.is_set():
            return False
        try:
            written = os.write(fd, line)
        except OSError:  # a full pipe; or a broken one, which the writer will meet too
            return False
        self._peer.written(written)
        if written < len(line):
            self._out_send.send_nowait(line[written:])  # the queue is empty: it fits
        return True

    def _reply(self, line: bytes) -> None:
        """Queue a reply from the reader itself, which must never wait to write."""
        try:
            self._out_send.send_nowait(line)
        except trio.WouldBlock:
            self._peer.dropped(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._peer.abandoned(line)

    def _wake(self, event: Response | ErrorResponse) -> None:
        waiter = self._waiters.get(event.id)
        if waiter is None:  # timed out while the reader waited on the notification queue
            self._log.warning("agent.unknown_response", id=short(repr(event.id)))
            return
        waiter.outcome = event
        waiter.event.set()

    def _close_stdout(self) -> None:
        if self._stdout_closed:
            return
        self._stdout_closed = True
        for waiter in self._waiters.values():
            waiter.event.set()  # outcome None: ConnectionClosed

    # --- the tasks ---

    async def _serve_request(
        self, request: Request, outcome: Awaitable[Answer], scope: trio.CancelScope
    ) -> None:
        try:
            answer = None
            with scope:
                answer = await outcome
            await self._queue_answer(self._peer.answer(request, answer))  # None: withdrawn
        finally:
            del self._scopes[request.id]
            self._peer.done(request.id)

    async def _send_answer(self, id: JsonId, line: bytes) -> None:
        try:
            await self._queue_answer(line)
        finally:
            self._peer.done(id)

    async def _queue_answer(self, line: bytes) -> None:
        try:
            try:
                self._out_send.send_nowait(line)  # the usual case: no extra scheduler pass
            except trio.WouldBlock:  # the agent is slow to read: wait here
                await self._out_send.send(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._peer.abandoned(line)
            self._log.info("agent.reply_not_sent", reason="stdin closed")
        except BaseException:  # cancelled while it waited for room: never queued
            self._peer.abandoned(line)
            raise

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
                        self._peer.written(len(data))
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

    async def _send(self, line: bytes, method: str) -> None:
        """Queue one of our lines, waiting for room; a line not queued is abandoned."""
        try:
            await self._out_send.send(line)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self._peer.abandoned(line)
            raise ConnectionClosed(f"cannot send {method!r}: the agent's stdin is closed") from None
        except BaseException:  # cancelled while it waited for room (a timeout): never queued
            self._peer.abandoned(line)
            raise


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


def _plain(params: Any) -> Any:
    if isinstance(params, BaseModel):
        return params.model_dump(mode="json", by_alias=True, exclude_none=True)
    return params

