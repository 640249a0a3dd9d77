"""One started command: its output ring, its exit status, its kill, its reaping.

The runner (one-shot, with a timeout) and the ACP terminals (long-lived, polled)
both drive this class; neither touches the process any other way.

Killing the whole tree:

* Sandboxed: SIGKILL to bwrap and to the sandbox's pid 1 (its host pid comes
  from ``--info-fd``, see `governor.sandbox.run.launch.open_launch`). When pid 1 dies the
  kernel kills every process in the PID namespace, daemonized and ``setsid``'d
  ones included. When the command ends by itself, bwrap's pid 1 exits and the
  same happens. Either way nothing of the command survives and the pipe
  reaches EOF.
* Full-access (no bwrap): the command leads its own session and process group;
  the group is killed on kill *and* after the command exits. A grandchild that
  called ``setsid()`` itself leaves the group and survives: without a cgroup or
  PID namespace there is no handle on it (documented limit). If it keeps the
  output pipe open, reading stops `DRAIN_GRACE` seconds after the command exited.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, replace
from typing import Protocol

import trio

from governor.policies.limits import Limits
from governor.sandbox.host.limits import blame
from governor.sandbox.run.capture import OutputRing
from governor.sandbox.run.launch import Attach, Launch, open_launch
from governor.sandbox.run.spawn import DEVNULL, PIPE, STDOUT

READ_CHUNK = 64 * 1024
DRAIN_GRACE = 1.0


@dataclass(frozen=True)
class ExitStatus:
    """How a command ended: an exit code, or the name of the signal that killed it.

    Inside bwrap a command killed by signal N is reported by bwrap as exit code
    128+N (as a shell would); only a kill of the sandbox itself (timeout,
    `Execution.kill`) shows up as ``signal="SIGKILL"``.
    """

    exit_code: int | None = None
    signal: str | None = None
    limit: str | None = None
    """The limit the command stopped at, in words (``memory limit 512M (an
    allocation over it was refused)``), when its end says so (`governor.sandbox.host.limits.blame`)."""

    @classmethod
    def from_returncode(cls, returncode: int) -> ExitStatus:
        if returncode >= 0:
            return cls(exit_code=returncode)
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"SIG{-returncode}"
        return cls(signal=name)

    @property
    def shell_code(self) -> int:
        """The status a shell would report: the code, or 128 + signal number."""
        if self.exit_code is not None:
            return self.exit_code
        try:
            return 128 + signal.Signals[self.signal or ""].value
        except KeyError:
            return 255


class Process(Protocol):
    """What an `Execution` drives: a `governor.sandbox.run.spawn.Child`, or a command the
    session's fork server started (`governor.sandbox.run.session.SessionChild`)."""

    stdout: trio.lowlevel.FdStream | None
    group: bool

    async def wait(self) -> int: ...

    def kill(self) -> None: ...

    async def aclose(self) -> None: ...


class Execution:
    """A running (or finished) command owned by whoever called `start_launch`."""

    def __init__(self, child: Process, ring: OutputRing, limits: Limits | None = None) -> None:
        self.child = child
        self.ring = ring
        self.limits = limits
        self.status: ExitStatus | None = None
        self.killed = False
        self._finished = trio.Event()

    @property
    def running(self) -> bool:
        return self.status is None

    def kill(self) -> None:
        """SIGKILL the whole tree (see the module docstring); idempotent."""
        if self.status is None:
            self.killed = True
            self.child.kill()

    async def finish(self) -> ExitStatus:
        """Read all output and reap. Cancellable; calling it again resumes."""
        if self.status is not None:
            return self.status
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._read_all)
            returncode = await self.child.wait()
            if self.child.group:
                self.child.kill()
            nursery.cancel_scope.deadline = min(
                nursery.cancel_scope.deadline, trio.current_time() + DRAIN_GRACE
            )
        status = ExitStatus.from_returncode(returncode)
        if not self.killed:
            limit = blame(self.limits, status.exit_code, status.signal, self.ring.snapshot()[0])
            if limit is not None:
                # the command's own output says it too: the agent reads this
                self.ring.feed(f"\n[governor: stopped at the {limit}]\n".encode())
                status = replace(status, limit=limit)
        self.status = status
        self._finished.set()
        return self.status

    async def wait(self) -> ExitStatus:
        """Wait until some task's `finish` has completed."""
        await self._finished.wait()
        assert self.status is not None
        return self.status

    async def _read_all(self) -> None:
        stream = self.child.stdout
        if stream is None:
            return
        while True:
            try:
                data = await stream.receive_some(READ_CHUNK)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return
            if not data:
                return
            self.ring.feed(data)

    async def reap(self) -> None:
        """Kill if still running, wait, close the pipe; shielded from cancellation."""
        with trio.CancelScope(shield=True):
            if self.status is None:
                self.kill()
                await self.finish()
            await self.child.aclose()


async def start_launch(
    launch: Launch,
    *,
    output_limit: int,
    limits: Limits | None = None,
    attach: Attach | None = None,
) -> Execution:
    """Spawn ``launch`` with stdin from /dev/null and stdout+stderr into one pipe."""
    child = await open_launch(launch, stdin=DEVNULL, stdout=PIPE, stderr=STDOUT, attach=attach)
    return Execution(child, OutputRing(output_limit), limits)


