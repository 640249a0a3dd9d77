"""Start a child process on the trio thread and wait for it through a pidfd.

Why not `trio.lowlevel.open_process`: trio forks from a *worker thread*
(``trio.to_thread.run_sync(subprocess.Popen, ...)``), and bwrap's
``--die-with-parent`` is ``PR_SET_PDEATHSIG``, which fires when the *thread*
that forked the child exits, not the process. trio retires idle worker threads
after 10 seconds, so a sandboxed agent or long command started that way is
SIGKILLed ten seconds after the spawning thread goes idle (measured here:
``returncode -9`` at 10.2 s for ``sleep 14``). Forking from the thread that runs
the trio loop ties the death signal to the loop's lifetime, which is the lifetime
we want. The fork itself blocks the loop for well under a millisecond.

Waiting uses ``pidfd_open`` + `trio.lowlevel.wait_readable`: no SIGCHLD handler,
no polling, and killing through the pidfd cannot hit a recycled pid.

A `Child` may be a watchdog (`governor.sandbox.standalone.watchdog`) holding the other end of a
lifeline: then `Child.kill` ends the lifeline and SIGKILLs the agent behind it,
and leaves the watchdog alive to kill the agent's descendants and exit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
from collections.abc import Mapping, Sequence

import trio

PIPE = subprocess.PIPE
DEVNULL = subprocess.DEVNULL
STDOUT = subprocess.STDOUT
INNER_GRACE = 5.0
"""Seconds `Child.wait` gives a killed sandbox's pid 1 to end its namespace."""

Std = int | None
"""`PIPE`, `DEVNULL`, `STDOUT` (stderr only), an fd to hand over, or None (inherit)."""


class Child:
    """A started process: its pipes as trio streams, an async `wait`, a `kill`."""

    def __init__(
        self,
        popen: subprocess.Popen[bytes],
        *,
        stdin: trio.lowlevel.FdStream | None,
        stdout: trio.lowlevel.FdStream | None,
        stderr: trio.lowlevel.FdStream | None,
        group: bool,
    ) -> None:
        self._popen = popen
        self.pid = popen.pid
        self._pidfd: int | None = os.pidfd_open(popen.pid)
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.group = group
        self._inner_pidfd: int | None = None
        self._lifeline: socket.socket | None = None
        self.watchdog = False

    def adopt_inner(self, pid: int) -> None:
        """Also kill ``pid`` (a sandbox's pid 1, whose death ends its namespace)."""
        try:
            self._inner_pidfd = os.pidfd_open(pid)
        except ProcessLookupError:
            self._inner_pidfd = None

    def adopt_inner_pidfd(self, pidfd: int) -> None:
        """Also kill the process behind ``pidfd`` (taken over: we close it)."""
        if self._inner_pidfd is not None:
            os.close(self._inner_pidfd)
        self._inner_pidfd = pidfd

    def hold_lifeline(self, lifeline: socket.socket) -> None:
        """This child is a watchdog holding the other end of ``lifeline``: the
        end of it (our `kill`, or our death) makes the watchdog kill its tree."""
        self._lifeline = lifeline
        self.watchdog = True

    @property
    def returncode(self) -> int | None:
        """None while running (or not yet reaped); negative for a signal, as in `subprocess`."""
        return self._popen.returncode

    async def wait(self) -> int:
        """Wait for exit and reap; safe to call again, and to cancel."""
        if self._popen.returncode is None:
            assert self._pidfd is not None
            await trio.lowlevel.wait_readable(self._pidfd)
            if self._inner_pidfd is not None and not self.watchdog:
                # A sandbox's pid 1 exits only once every process of its namespace
                # is gone, which can be after bwrap itself has: wait for that too.
                with trio.move_on_after(INNER_GRACE):
                    await trio.lowlevel.wait_readable(self._inner_pidfd)
            self._popen.wait()
            self._close_pidfd()
        return self._popen.returncode

    def kill(self, *, hard: bool = False) -> None:
        """SIGKILL the process, and its whole process group when it leads one.

        A watchdog (see `hold_lifeline`) is not killed but told to kill, by the
        end of its lifeline; the agent behind it is SIGKILLed directly as well.
        Killing the watchdog itself would leave the agent's descendants without
        the one process that can find them: ``hard`` does it anyway, for a
        watchdog that did not exit by itself.
        """
        self._end_lifeline()
        if self.watchdog and not hard:
            if self._inner_pidfd is not None:
                with contextlib.suppress(ProcessLookupError):
                    signal.pidfd_send_signal(self._inner_pidfd, signal.SIGKILL)
            return
        if self.group:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
        if self._popen.returncode is None and self._pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        if self._inner_pidfd is not None:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(self._inner_pidfd, signal.SIGKILL)

    def _end_lifeline(self) -> None:
        if self._lifeline is not None:
            trio.lowlevel.notify_closing(self._lifeline)
            self._lifeline.close()
            self._lifeline = None

    def _close_pidfd(self) -> None:
        self._end_lifeline()
        if self._pidfd is not None:
            trio.lowlevel.notify_closing(self._pidfd)
            os.close(self._pidfd)
            self._pidfd = None
        if self._inner_pidfd is not None:
            os.close(self._inner_pidfd)
            self._inner_pidfd = None

    async def aclose(self) -> None:
        """Close our ends of the pipes (the process itself is not touched)."""
        for stream in (self.stdin, self.stdout, self.stderr):
            if stream is not None:
                await stream.aclose()


def spawn(
    argv: Sequence[str],
    *,
    stdin: Std = DEVNULL,
    stdout: Std = PIPE,
    stderr: Std = STDOUT,
    pass_fds: Sequence[int] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    start_new_session: bool = False,
) -> Child:
    """Start ``argv`` from the calling thread (call it from the trio thread; see
    the module docstring). ``env=None`` inherits, ``{}`` gives an empty one."""
    to_close: list[int] = []
    ours: dict[str, int] = {}

    def pipe(name: str, child_reads: bool) -> int:
        read_end, write_end = os.pipe2(os.O_CLOEXEC)
        child_end, our_end = (read_end, write_end) if child_reads else (write_end, read_end)
        to_close.append(child_end)
        ours[name] = our_end
        return child_end

    try:
        child_stdin = pipe("stdin", True) if stdin == PIPE else stdin
        child_stdout = pipe("stdout", False) if stdout == PIPE else stdout
        child_stderr: int | None
        if stderr == STDOUT:
            child_stderr = child_stdout if child_stdout is not None else STDOUT
        elif stderr == PIPE:
            child_stderr = pipe("stderr", False)
        else:
            child_stderr = stderr
        popen = subprocess.Popen(
            list(argv),
            stdin=child_stdin,
            stdout=child_stdout,
            stderr=child_stderr,
            pass_fds=tuple(pass_fds),
            env=None if env is None else dict(env),
            cwd=cwd,
            start_new_session=start_new_session,
        )
    except BaseException:
        for fd in ours.values():
            os.close(fd)
        raise
    finally:
        for fd in to_close:
            os.close(fd)

    def stream(name: str) -> trio.lowlevel.FdStream | None:
        fd = ours.get(name)
        return None if fd is None else trio.lowlevel.FdStream(fd)

    return Child(
        popen,
        stdin=stream("stdin"),
        stdout=stream("stdout"),
        stderr=stream("stderr"),
        group=start_new_session,
    )
