"""What the kernel holds for a sandbox that no process's memory shows: System V
segments and message queues, and Unix sockets' buffers, read inside the
sandbox's own IPC and network namespaces by a forked reader kept from one
measure to the next (`KernelReaders`), for `governor.sandbox.host.budget`'s
watcher where no memory group counts them (unprivileged; cgroup v1's sockets).

Rules of this file: a reader joins the user namespace that owns the sandbox's
IPC namespace (`NS_GET_USERNS`), then the IPC and network namespaces, makes
itself non-dumpable and closes every descriptor of the governor's before it
reads; it answers numbers only; one that does not answer within `HELPER_WAIT`
counts 0 and is replaced at the next measure (said in `docs/limits.md`).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import select
import signal
import socket
import struct
import threading
from dataclasses import dataclass
from typing import Final, NoReturn

CLONE_NEWUSER: Final = 0x10000000
CLONE_NEWIPC: Final = 0x08000000
CLONE_NEWNET: Final = 0x40000000
NS_GET_USERNS: Final = 0xB701
"""ioctl on a namespace's descriptor: a descriptor of the user namespace owning it."""
SOCK_DIAG_BY_FAMILY: Final = 20
NETLINK_SOCK_DIAG: Final = 4
UDIAG_SHOW_MEMINFO: Final = 0x20
UNIX_DIAG_MEMINFO: Final = 5
PR_SET_DUMPABLE: Final = 4
HELPER_WAIT: Final = 5.0
"""Seconds a namespace's reader may take before it is killed and counts 0."""


def held_in_kernel(
    pids: list[int], segments: bool = True, readers: KernelReaders | None = None
) -> int:
    """Bytes the processes ``pids`` (a measure's) hold in the kernel where no
    process's memory shows them, read in each sandbox's own namespaces: the
    System V shared memory segments (resident and swapped) and message
    queues of its IPC namespace, held by no process once detached; and the
    buffers of the Unix sockets its processes hold open (bytes written and
    not yet read, queued at the reader but charged to the writer's
    ``wmem_alloc``), read in its network namespace, which may hold other
    attempts' sockets too (a batch: counted there, one job's flood stopped
    another at 16G); one in flight, held by no process, is not counted. ``segments``: False
    where a memory group already counts them (shmem). ``readers``: the
    attempt's (kept from one measure to the next), else made for this one."""
    if readers is None:
        with contextlib.closing(KernelReaders()) as once:
            return once.read(pids, segments)
    return readers.read(pids, segments)


@dataclass
class _Reader:
    pid: int
    request: int
    answer: int


class KernelReaders:
    """One reader per sandbox namespace, kept while the sandbox runs.

    A reader is a child forked once (setns needs one thread): it joins the
    user namespace that owns the sandbox's IPC namespace (a descendant of the
    governor's, made by a process of its user: the kernel gives the governor
    every capability there, root or not), then the IPC and network
    namespaces, closes every descriptor but its two pipes, and answers each
    request with what ``/proc/sysvipc`` and ``sock_diag`` show there. Kept,
    not forked per measure: a fork of the governor costs milliseconds, a
    request a fraction of one. A reader whose sandbox is gone from a measure
    is ended (it would keep that namespace, and its segments, alive); all
    of them at `close`. Locked: a measure runs in a worker thread."""

    def __init__(self) -> None:
        self._readers: dict[tuple[str, str, bool], _Reader] = {}
        self._lock = threading.Lock()

    def read(self, pids: list[int], segments: bool) -> int:
        """`held_in_kernel` of ``pids``."""
        own = {kind: _namespace("self", kind) for kind in ("ipc", "net")}
        places: dict[tuple[str, str, bool], int] = {}
        sockets: set[int] = set()
        held: dict[tuple[str, str, bool], set[int]] = {}
        for pid in pids:
            with contextlib.suppress(OSError):
                ipc, net = _namespace(str(pid), "ipc"), _namespace(str(pid), "net")
                mine = _sockets_held(pid)
                if net == own["net"]:
                    sockets.update(mine)
                if (ipc == own["ipc"] or not segments) and net == own["net"]:
                    continue  # nothing of its own to read there
                places.setdefault((ipc, net, segments), pid)
                held.setdefault((ipc, net, segments), set()).update(mine)
        total = _unix_memory(sockets) if sockets else 0
        with self._lock:
            for key in [k for k in self._readers if k not in places]:
                self._end(key)
            for key, pid in places.items():
                total += self._ask(key, pid, key[1] != own["net"], held.get(key, set()))
        return total

    def close(self) -> None:
        """End every reader."""
        with self._lock:
            for key in list(self._readers):
                self._end(key)

    def _ask(
        self, key: tuple[str, str, bool], pid: int, enter_net: bool, sockets: set[int]
    ) -> int:
        """The reader's count: its namespace's System V memory, and the buffers of
        the Unix sockets in ``sockets`` (those the measure's processes hold: a
        network namespace may hold other attempts' sockets too, never counted
        here; one in flight, held by no process, is not counted: the residual)."""
        reader = self._readers.get(key)
        if reader is None:
            started = _start_reader(pid, enter_net, key[2])
            if started is None:
                return 0
            reader = self._readers[key] = started
        try:
            os.write(reader.request, (",".join(map(str, sorted(sockets))) + "\n").encode())
            ready, _, _ = select.select([reader.answer], [], [], HELPER_WAIT)
            text = os.read(reader.answer, 64) if ready else b""
            return max(0, int(text))
        except (OSError, ValueError):  # gone, slow or garbled: a new one next measure
            self._end(key)
            return 0

    def _end(self, key: tuple[str, str, bool]) -> None:
        reader = self._readers.pop(key)
        with contextlib.suppress(OSError):
            os.kill(reader.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(reader.pid, 0)
        os.close(reader.request)
        os.close(reader.answer)


def _namespace(pid: str, kind: str) -> str:
    return os.readlink(f"/proc/{pid}/ns/{kind}")


def _sockets_held(pid: int) -> set[int]:
    """The inodes of the sockets ``pid`` holds open."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError, ValueError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    found.add(int(target[8:-1]))
    return found


def _start_reader(pid: int, enter_net: bool, segments: bool) -> _Reader | None:
    """A reader joined to ``pid``'s IPC (and, if ``enter_net``, network)
    namespace (`KernelReaders`); None once it cannot be started."""
    opened: list[int] = []
    try:
        ipc = os.open(f"/proc/{pid}/ns/ipc", os.O_RDONLY | os.O_CLOEXEC)
        opened.append(ipc)
        owner = fcntl.ioctl(ipc, NS_GET_USERNS)
        opened.append(owner)
        net = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY | os.O_CLOEXEC) if enter_net else -1
        if net >= 0:
            opened.append(net)
        asked, request = os.pipe2(os.O_CLOEXEC)
        answer, told = os.pipe2(os.O_CLOEXEC)
    except OSError:
        for fd in opened:
            os.close(fd)
        return None
    child = os.fork()
    if child == 0:  # pragma: no cover (the child ends by _exit)
        _serve(owner, ipc, net, asked, told, segments)
    for fd in (*opened, asked, told):
        os.close(fd)
    return _Reader(child, request, answer)


def _serve(owner: int, ipc: int, net: int, asked: int, told: int, segments: bool) -> NoReturn:
    """The reader's life: join, then answer each byte asked until the pipe closes."""
    with contextlib.suppress(BaseException):
        # no signal reaches the governor's handlers here: a Ctrl-C sent to the
        # terminal's process group would make the copy of trio's handler write to
        # a wakeup fd this process closes (a traceback on the person's terminal);
        # it ends by SIGKILL (`KernelReaders._end`) or when its pipe closes
        os.setsid()
        signal.pthread_sigmask(signal.SIG_BLOCK, set(signal.Signals) - {signal.SIGKILL, signal.SIGSTOP})
        _LIBC.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no process of the sandbox may trace it
        _setns(owner, CLONE_NEWUSER)
        _setns(ipc, CLONE_NEWIPC)
        if net >= 0:
            _setns(net, CLONE_NEWNET)
        keep = sorted({asked, told})
        os.closerange(3, keep[0])  # the governor's descriptors are none of its business
        os.closerange(keep[0] + 1, keep[-1])
        os.closerange(keep[-1] + 1, 1 << 20)
        with os.fdopen(asked, "rb") as questions:
            for line in questions:  # the inodes of the sockets the sandbox's processes hold
                only = {int(n) for n in line.strip().split(b",") if n}
                held = _sysv_memory() if segments else 0
                held += _unix_memory(only) if net >= 0 and only else 0
                os.write(told, str(held).encode())
    os._exit(0)


_LIBC = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int, kind: int) -> None:
    if _LIBC.setns(fd, kind) != 0:
        raise OSError(ctypes.get_errno(), "setns")


def _sysv_memory() -> int:
    """Bytes of the System V segments (resident and swapped) and message
    queues of this process's IPC namespace (proc(5): ``/proc/sysvipc``)."""
    total = 0
    for name, columns in (("shm", ("rss", "swap")), ("msg", ("cbytes",))):
        with contextlib.suppress(OSError, ValueError), open(f"/proc/sysvipc/{name}") as f:
            lines = f.read().splitlines()
            head = lines[0].split()
            where = [head.index(c) for c in columns if c in head]
            for line in lines[1:]:
                fields = line.split()
                total += sum(int(fields[i]) for i in where)
    return total


def _unix_memory(only: set[int] | None) -> int:
    """The send buffers (``wmem_alloc``) and receive buffers of the Unix
    sockets of this process's network namespace (``sock_diag``), of those
    whose inode is in ``only`` when given; 0 once it cannot ask."""
    total = 0
    request = struct.pack("=BBHIII8s", socket.AF_UNIX, 0, 0, 0xFFFFFFFF, 0,
                          UDIAG_SHOW_MEMINFO, b"\xff" * 8)  # fmt: skip
    header = struct.pack("=IHHII", 16 + len(request), SOCK_DIAG_BY_FAMILY, 0x301, 1, 0)
    try:
        with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as diag:
            diag.send(header + request)
            while True:
                data = diag.recv(1 << 16)
                offset = 0
                while offset + 16 <= len(data):
                    length, kind = struct.unpack_from("=IH", data, offset)
                    if kind in (2, 3) or length < 16:  # NLMSG_ERROR, NLMSG_DONE
                        return total
                    total += _one_socket(data[offset + 16 : offset + length], only)
                    offset += (length + 3) & ~3
                if not data:
                    return total
    except OSError:
        return total


def _one_socket(body: bytes, only: set[int] | None) -> int:
    """A ``unix_diag_msg`` and its attributes: its buffers' bytes."""
    if len(body) < 16:
        return 0
    (inode,) = struct.unpack_from("=I", body, 4)
    if only is not None and inode not in only:
        return 0
    at = 16
    while at + 4 <= len(body):
        length, kind = struct.unpack_from("=HH", body, at)
        if length < 4:
            return 0
        if kind == UNIX_DIAG_MEMINFO and length >= 4 + 12:
            rmem, _, wmem = struct.unpack_from("=3I", body, at + 4)
            return int(rmem + wmem)
        at += (length + 3) & ~3
    return 0
