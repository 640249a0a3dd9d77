"""The watchdog between the governor and an unsandboxed agent (stdlib only).

    python -I -S watchdog.py LIFELINE_FD ENV_FD -- AGENT_ARGV...

A sandboxed agent dies with its PID namespace whatever happens to the governor
(bwrap's ``--die-with-parent``). An unsandboxed one (full-access,
``--no-sandbox-agent``) runs in the host's pid namespace and has no such tie:
killed as a process group at the end of the attempt, it survived a governor that
was SIGKILLed, and so did every daemon it had started. This small process sits
between the two, with no namespace and no bwrap:

1. It becomes a child subreaper (``PR_SET_CHILD_SUBREAPER``): a descendant whose
   parent exits (a daemon that double-forked and called ``setsid()``) is
   reparented to the watchdog instead of init, so whatever the agent started
   stays findable by parentage, whatever its session, group or environment.
2. It starts the agent (``posix_spawn``, in a process group of its own, with the
   environment read from ENV_FD and its stdio inherited unchanged: the governor
   still talks to the agent over the same pipes) and reports on the lifeline:
   ``ok`` with a pidfd of the agent, or ``error ERRNO``. Then it points its own
   stdio at ``/dev/null``, so an agent that closes its stdout is seen to.
3. It waits, idle in ``poll``, for one of: the agent's exit; the end of the
   lifeline; SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2, which it
   forwards to the agent's process group (what the governor sends the
   watchdog's group, the agent's group gets).
4. It SIGKILLs every descendant, round after round until it has no child left,
   and exits as the agent did: the same exit code, or the same signal raised on
   itself (so the governor reports "killed by SIGTERM", not "exited 143").

The lifeline is one end of a socketpair whose other end only the governor holds
(close-on-exec, never passed to another child). The kernel closes it when the
governor dies, by any means, SIGKILL included, and the governor closes it on
purpose to kill the agent (`governor.sandbox.run.spawn.Child.kill`): either way the watchdog
reads EOF and kills the tree. Why not ``PR_SET_PDEATHSIG``: it fires when the
*thread* that forked the child exits, not the process (see `governor.sandbox.run.spawn`;
trio forks from worker threads it retires after ten seconds). Why no
``getppid()`` check against a governor that died before the watchdog got
going: the EOF stays, so that governor is seen just the same.

Why the environment comes through a memfd rather than as the watchdog's own:
Python coerces a C locale by putting ``LC_CTYPE=C.UTF-8`` into its environment
(PEP 538, even under ``-I``), and the agent must get exactly the environment the
attempt built.

Where its reach ends: a process started on the agent's behalf by a server that
was already running (``tmux`` into an existing server, ``systemd-run --user``,
``at``) is no descendant; a descendant that changed its user (``sudo``) may
refuse the SIGKILL (the sweep gives up after `SWEEP_LIMIT` seconds); and the
agent, running as the same user, can kill the watchdog itself (full-access is
no boundary). The governor's marker sweep (``governor/confine/stray_processes.py``) still
covers whatever kept the marker variable.
"""

from __future__ import annotations

import ctypes
import errno
import os
import select
import signal
import socket
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing, collections and contextlib would slow every start of the watchdog
    from collections.abc import Mapping, Sequence
    from types import FrameType
    from typing import NoReturn

PR_SET_CHILD_SUBREAPER = 36
FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
)
SWEEP_LIMIT = 5.0
"""Seconds the final sweep keeps killing descendants that refuse to go (another
user's, or stuck in the kernel) before the watchdog exits without them."""
REPORT_MAX_BYTES = 256
USAGE = 2
CANNOT_START = 127


def command(lifeline_fd: int, env_fd: int, argv: Sequence[str]) -> list[str]:
    """The argv that starts the watchdog around the agent's ``argv``: this very
    file, run by the governor's interpreter without site or environment."""
    if not sys.executable:
        raise OSError(errno.ENOENT, "no Python interpreter to run the agent's watchdog")
    return [
        sys.executable,
        "-I",
        "-S",
        os.path.abspath(__file__),
        str(lifeline_fd),
        str(env_fd),
        "--",
        *argv,
    ]


def encode_environment(env: Mapping[str, str]) -> bytes:
    """``NAME=VALUE\\0`` entries, refused like `subprocess` refuses them."""
    out = bytearray()
    for name, value in env.items():
        key, val = os.fsencode(name), os.fsencode(value)
        if not key or b"=" in key:
            raise ValueError(f"illegal environment variable name {name!r}")
        if b"\0" in key or b"\0" in val:
            raise ValueError("embedded null byte in the environment")
        out += key + b"=" + val + b"\0"
    return bytes(out)


def _decode_environment(data: bytes) -> dict[bytes, bytes]:
    env = {}
    for entry in data.split(b"\0"):
        name, sep, value = entry.partition(b"=")
        if sep:
            env[name] = value
    return env


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)


def _become_subreaper() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"cannot become a child subreaper: {os.strerror(code)}")


def _spawn(argv: Sequence[str], env: dict[bytes, bytes]) -> int:
    """``posix_spawn`` the agent, looked up on the *agent's* ``PATH`` as
    `subprocess` does (``posix_spawnp`` would use the watchdog's)."""
    program = argv[0]
    if "/" in program:
        candidates = [program]
    else:
        path = env.get(b"PATH", os.defpath.encode()).decode(errors="surrogateescape")
        candidates = [os.path.join(d or ".", program) for d in path.split(os.pathsep)]
    denied: OSError | None = None
    for candidate in candidates:
        try:
            return os.posix_spawn(
                candidate,
                list(argv),
                env,
                setpgroup=0,
                # Python ignores these at start; an exec keeps ignored signals.
                setsigdef=(signal.SIGPIPE, signal.SIGXFSZ),
            )
        except (FileNotFoundError, NotADirectoryError):
            continue
        except PermissionError as e:
            denied = e
    if denied is not None:
        raise denied
    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), program)


# try/except rather than contextlib.suppress: see the imports.
def _signal(pid: int, signum: int) -> None:
    try:  # noqa: SIM105
        os.kill(pid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_group(pgid: int, signum: int) -> None:
    try:  # noqa: SIM105
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


def _processes_by_parent() -> dict[int, list[int]]:
    """Every process's children, from ``/proc/*/stat`` (``/proc/PID/task/TID/children``
    needs ``CONFIG_PROC_CHILDREN``, which common kernels lack)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
            ppid = int(stat.rsplit(b")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    return children


def descendants(root: int) -> list[int]:
    """Pids of every live process below ``root`` (a snapshot: the tree may change)."""
    children = _processes_by_parent()
    found: list[int] = []
    todo = [root]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


class Watchdog:
    """The state of one watchdog process (see the module docstring)."""

    def __init__(self, lifeline: socket.socket) -> None:
        self.lifeline = lifeline
        self.agent: int | None = None
        self.agent_status: int | None = None
        self.pending: list[int] = []
        wake_read, wake_write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.wake = wake_read
        signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
        signal.signal(signal.SIGCHLD, self._noted)
        for signum in FORWARDED:
            # An ignored signal stays ignored (the agent inherits that, as it
            # would have without a watchdog); only a live one is forwarded.
            if signal.getsignal(signum) != signal.SIG_IGN:
                signal.signal(signum, self._forward)

    def _noted(self, signum: int, frame: FrameType | None) -> None:
        """SIGCHLD: nothing to do here; the wakeup fd ends the ``poll``."""

    def _forward(self, signum: int, frame: FrameType | None) -> None:
        if self.agent is None:
            self.pending.append(signum)
        elif self.agent_status is None:
            _signal_group(self.agent, signum)

    def start(self, argv: Sequence[str], env: dict[bytes, bytes]) -> None:
        """Start the agent, report it on the lifeline, let go of our stdio."""
        self.agent = _spawn(argv, env)
        pidfd = os.pidfd_open(self.agent)  # before any reaping: cannot be a reused pid
        try:
            socket.send_fds(self.lifeline, [b"ok"], [pidfd])
        except OSError:
            pass  # the governor is gone already; `supervise` will read the EOF
        finally:
            os.close(pidfd)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)
        for signum in self.pending:
            self._forward(signum, None)
        self.pending.clear()

    def _reap(self) -> bool:
        """Reap every child that has ended (noting the agent's status); whether
        any child is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.agent:
                self.agent_status = status

    def _drain_wake(self) -> None:
        try:
            while os.read(self.wake, 512):
                pass
        except BlockingIOError:
            pass

    def supervise(self) -> None:
        """Return when the agent has exited or the lifeline has ended."""
        poller = select.poll()
        poller.register(self.lifeline.fileno(), select.POLLIN)
        poller.register(self.wake, select.POLLIN)
        while True:
            self._reap()
            if self.agent_status is not None:
                return
            for fd, _ in poller.poll():
                if fd == self.wake:
                    self._drain_wake()
                    continue
                try:
                    data = self.lifeline.recv(REPORT_MAX_BYTES)
                except OSError:
                    data = b""
                if not data:
                    return  # the governor closed it, or died

    def sweep(self) -> None:
        """SIGKILL every descendant until no child is left (or `SWEEP_LIMIT`)."""
        deadline = time.monotonic() + SWEEP_LIMIT
        me = os.getpid()
        while self._reap():
            for pid in descendants(me):
                _signal(pid, signal.SIGKILL)
            if not self._reap() or time.monotonic() > deadline:
                return
            # A SIGCHLD (written to the wakeup fd) or a short pause, then again:
            # a child forked between the scan and the kill is ours by now.
            select.select([self.wake], [], [], 0.05)
            self._drain_wake()

    def exit(self) -> NoReturn:
        """Exit as the agent did: its exit code, or its signal raised on ourselves."""
        status = self.agent_status
        if status is None:
            os._exit(0)  # the governor is gone: nobody reads this
        if os.WIFSIGNALED(status):
            signum = os.WTERMSIG(status)
            try:
                import resource

                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # no core of ours
            except (ImportError, OSError, ValueError):
                pass
            if signum != signal.SIGKILL:
                signal.signal(signum, signal.SIG_DFL)  # our forwarder would catch it
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signum])
            os.kill(os.getpid(), signum)
            os._exit(128 + signum)  # a signal whose default is not to terminate
        os._exit(os.waitstatus_to_exitcode(status))


def main(args: Sequence[str]) -> NoReturn:
    """Run the watchdog (see the module docstring)."""
    if len(args) < 4 or args[2] != "--":
        os.write(2, b"usage: watchdog.py LIFELINE_FD ENV_FD -- AGENT_ARGV...\n")
        os._exit(USAGE)
    lifeline = socket.socket(fileno=int(args[0]))
    lifeline.set_inheritable(False)
    env_fd = int(args[1])
    env = _decode_environment(_read_all(env_fd))
    os.close(env_fd)
    watchdog = Watchdog(lifeline)
    try:
        _become_subreaper()
        watchdog.start(args[3:], env)
    except (OSError, ValueError) as e:
        code = e.errno if isinstance(e, OSError) and e.errno else errno.EINVAL
        try:  # noqa: SIM105
            lifeline.send(f"error {code}".encode())
        except OSError:
            pass
        os._exit(CANNOT_START)
    watchdog.supervise()
    watchdog.sweep()
    watchdog.exit()


if __name__ == "__main__":
    main(sys.argv[1:])
