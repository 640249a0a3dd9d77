"""The fork server that runs *inside* a session's sandbox and starts its commands.

Why it exists: one bwrap per command costs bwrap's own start, and each
read-only pin costs more on top, because bwrap re-reads the whole mount table
for every bind (figures: bench/README.md, the sandbox). A governor without CAP_LINUX_IMMUTABLE cannot seal the
27 placeholders for missing protected names (`governor.sandbox.run.stubs`), so every command
would pay for 27 pins. So a session builds its sandbox once (`governor.sandbox.run.session`):
one bwrap with the full profile, pins included, running this program. The
program forks each command into a fresh PID and mount namespace of its own.

This file is stdlib only and is not imported by the governor: it is read into a
memfd and run as ``python -I -S /proc/self/fd/N CONTROL_FD FILTER_FD`` by the
governor's own interpreter, whose install the session keeps visible.

The server keeps ``CAP_SYS_ADMIN`` (to make namespaces and mount ``/proc``) and
``CAP_SETPCAP`` (to empty the bounding set) *inside the sandbox's user
namespace*, where they give power over that namespace's mounts and processes
only. It holds no other descriptor a command could reach, and a command never
shares its PID namespace, so nothing a command runs can see, signal or trace it.

One command, three processes:

* **A**, forked by the server: ``unshare(CLONE_NEWPID | CLONE_NEWNS)``, the
  per-command binds (pins for nested repositories and masks for secret files
  that appeared after the session started), then it forks B. It sends B's
  pidfd to the governor, then waits for B *or* for the governor's end of the
  reply socket to close; the latter kills B (a governor that stops caring about
  a command never leaves it running). It sends B's wait status and exits.
* **B**, pid 1 of the new PID namespace: mounts a fresh ``/proc``, sets up the
  standard streams and the working directory, drops every capability (bounding
  set, ambient, inheritable, permitted), sets ``no_new_privs``, installs the
  seccomp filter, then spawns C and reaps until C is gone. It exits with C's
  code, or 128 + the signal that killed C (as bwrap's own pid 1 reports it).
  When B ends, the kernel kills whatever is left in the namespace: daemons and
  ``setsid`` grandchildren included.
* **C**, the command, in a new session (no controlling terminal), with exactly
  the declared environment.

Protocol on the control socket (``SOCK_SEQPACKET``): the server sends
``ready`` once. Each request is the datagram ``run`` with descriptors
``[reply socket, output pipe, request memfd, *bind sources]``; the memfd holds
JSON ``{"argv", "env", "cwd", "binds": [[kind, index, path], ...]}`` where
``kind`` is ``rw`` (self-bind, so the directory cannot be renamed), ``ro``
(read-only self-bind), ``null`` (``/dev/null`` over it) or ``mask`` (``null``
unless ``/dev/null`` is there already: a host socket the session's sandbox
covered, which its daemon made again since), and ``index`` points
into the bind sources: the governor's ``O_PATH`` descriptors of the checked
paths, which ``path`` must still lead to (see `_bind`). On the reply socket A answers
``started`` with B's pidfd, then ``exit <wait status>``; or ``error <text>``.
"""

from __future__ import annotations

import array
import contextlib
import ctypes
import json
import os
import resource
import select
import signal
import socket
import stat
import sys
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
KEPT_FLAGS = MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC | 1024 | 2048 | 4096
"""statvfs bits that equal their mount flags (rdonly, nosuid, nodev, noexec,
noatime, nodiratime, relatime): a remount in a user namespace must repeat the
locked ones or it fails with EPERM."""

NULL_DEVICE = os.makedev(1, 3)
PR_SET_PDEATHSIG = 1
PR_CAPBSET_DROP = 24
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
SECCOMP_MODE_FILTER = 2
CAP_VERSION_3 = 0x20080522
MAX_FDS = 253
REQUEST_MAX_BYTES = 64 * 1024 * 1024

libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]
libc.unshare.argtypes = [ctypes.c_int]
libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _prctl(option: int, arg: int = 0, what: str = "prctl") -> None:
    _check(libc.prctl(option, arg, 0, 0, 0), what)


def _mount(source: bytes | None, target: bytes, fstype: bytes | None, flags: int, what: str) -> None:
    _check(libc.mount(source, target, fstype, flags, None), what)


def _bind(kind: str, path: str, checked: int) -> None:
    """One per-command bind onto ``path``, which must still be the object the
    governor checked (``checked``, its O_PATH descriptor from the host).

    The mount needs a descriptor of *this* mount namespace (the kernel refuses
    a target from another one), so the path is opened again here, without
    following a final symlink, and compared with the governor's by device and
    inode: a path swapped for a symlink or another file in between is refused.
    """
    try:
        fd = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        if kind == "mask":
            return  # the remade socket is gone again: nothing there to cover
        raise
    try:
        here, there = os.fstat(fd), os.fstat(checked)
        if kind == "mask":
            if stat.S_ISCHR(here.st_mode) and here.st_rdev == NULL_DEVICE:
                return  # the session's mask still holds
            # gone: the daemon unlinked its socket and made it again, and the
            # kernel detached the mount from the unlinked one
            kind = "null"
        if (here.st_dev, here.st_ino) != (there.st_dev, there.st_ino):
            raise OSError(f"{path} changed while its command was set up; refusing to run")
        target = str(fd).encode()  # relative to A's cwd: its fd directory (see _spare)
        source = b"/dev/null" if kind == "null" else target
        flags = (os.statvfs(source) if kind == "null" else os.fstatvfs(fd)).f_flag & KEPT_FLAGS
        _mount(source, target, None, MS_BIND | MS_REC, f"bind {path}")
        if kind != "rw":
            # the old descriptor still names the object *under* the new mount;
            # a fresh lookup lands on the mount, which must hold what we bound
            top = os.open(path, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                now = os.fstat(top)
                bound = os.stat(source, follow_symlinks=False) if kind == "null" else here
                if (now.st_dev, now.st_ino) != (bound.st_dev, bound.st_ino):
                    raise OSError(f"{path} changed while its command was set up; refusing to run")
                ro = flags | MS_RDONLY | MS_NOSUID | MS_NODEV
                where = str(top).encode()
                _mount(None, where, None, MS_BIND | MS_REMOUNT | ro, f"make {path} read-only")
            finally:
                os.close(top)
    finally:
        os.close(fd)


PROC_COVERS = ("sys", "sysrq-trigger", "irq", "bus")  # governor.sandbox.plan.profile.PROC_HOST_KNOBS
"""Parts of a fresh ``/proc`` that are always read-only in a command. They act on
the host and are owned by root with owner-write modes: a root caller is root
inside too (uid 0 maps to 0), so the mode alone would let a command without
any capability open ``/proc/irq/*/smp_affinity`` or ``/proc/sysrq-trigger``
for writing. bwrap covers them only when its own access check says they are
writable; B has no CAP_DAC_OVERRIDE, so that check would miss the
directories, and they are covered whatever it says."""


USERNS_LIMIT = "/proc/sys/user/max_user_namespaces"
DEFAULT_SIGNALS = tuple(
    number for number in signal.valid_signals() if number not in (signal.SIGKILL, signal.SIGSTOP)
)
"""Every signal starts at its default action in a command: Python ignores some
(SIGXFSZ), and an ignored signal stays ignored across exec."""


def _mount_proc() -> None:
    """B's fresh ``/proc``, and through it the end of user namespaces.

    No process of the sandbox may create a user namespace: B sets the limit of
    nested ones in the sandbox's user namespace to 0 before its command starts
    (writing it takes CAP_SYS_RESOURCE there, which no command has; every B
    writes it, so it holds before any command runs). bwrap's
    ``--disable-userns`` would use a nested user namespace instead, which locks
    the mounts each command copies and, as root, forbids this very ``/proc``.
    """
    _mount(b"proc", b"/proc", b"proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mount /proc")
    with open(USERNS_LIMIT, "w") as handle:
        handle.write("0")
    with open(USERNS_LIMIT) as handle:
        if handle.read().strip() != "0":
            raise OSError(f"{USERNS_LIMIT} did not take 0")
    for name in PROC_COVERS:
        path = f"/proc/{name}"
        if os.path.lexists(path):
            target = path.encode()
            _mount(target, target, None, MS_BIND | MS_REC, f"cover {path}")
            flags = os.statvfs(path).f_flag & KEPT_FLAGS
            _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | flags, f"cover {path}")


def _install_filter(program: bytes) -> None:
    buffer = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    _check(
        libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog), 0, 0),
        "install the seccomp filter",
    )


def _read_request(fd: int) -> dict[str, Any]:
    size = os.fstat(fd).st_size
    if size > REQUEST_MAX_BYTES:
        raise OSError(f"the command's request is {size} bytes; the limit is {REQUEST_MAX_BYTES}")
    request: dict[str, Any] = json.loads(os.pread(fd, size, 0))
    return request


def _init(channel: socket.socket, program: bytes) -> None:
    """B: pid 1 of a command's namespace, made before its command. Never returns."""
    try:
        # the namespace ends with A: nothing of a command runs on without the
        # process that answers for it
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL, "parent-death signal")
        os.chdir("/")
        _mount_proc()
        _drop_privileges_and_filter(program)
    except BaseException as exc:  # no command yet: A reports it with the next one
        with contextlib.suppress(OSError):
            _send(channel, f"error {exc}".encode())
        os._exit(126)
    _send(channel, b"ready")
    message, fds = _receive(channel)
    if message != b"go" or len(fds) != 2:
        os._exit(126)
    output, document = fds
    try:
        null = os.open("/dev/null", os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(output, 1)
        os.dup2(output, 2)
        request = _read_request(document)
        os.closerange(3, 1 << 20)
        cwd = request["cwd"]
        try:
            os.chdir(cwd)
        except OSError as exc:
            why = f"cannot enter the working directory {cwd}: {exc.strerror}"
            raise OSError(exc.errno, why) from None
        env = request["env"]
        os.environ.clear()
        os.environ["PATH"] = env.get("PATH", "/usr/bin:/bin")
        argv = request["argv"]
        # the command's limits (governor.sandbox.host.limits), set here, inside the sandbox's
        # user namespace: RLIMIT_NPROC then counts the sandbox's processes only
        for which, soft, hard in request.get("rlimits", ()):
            resource.setrlimit(which, (soft, hard))
        try:
            child = os.posix_spawnp(argv[0], argv, env, setsid=True, setsigdef=DEFAULT_SIGNALS)
        except OSError as exc:
            os.write(2, f"sandbox: cannot run {argv[0]}: {exc.strerror}\n".encode())
            os._exit(127)
    except BaseException as exc:  # pid 1 reports and exits, it never unwinds
        os.write(2, f"sandbox: {exc}\n".encode())
        os._exit(126)
    for fd in (0, 1, 2):
        os.close(fd)
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            os._exit(126)
        if pid == child:
            if os.WIFSIGNALED(status):
                os._exit(128 + os.WTERMSIG(status))
            os._exit(os.waitstatus_to_exitcode(status))


def _drop_privileges_and_filter(program: bytes) -> None:
    """Everything B does before it may spawn the command: no capability left
    anywhere, no way to gain one, and the syscall filter on."""
    _prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, "clear ambient capabilities")
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != 22:
            _check(-1, f"drop capability {cap} from the bounding set")
    header = (ctypes.c_uint32 * 2)(CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    _check(libc.capset(header, data), "capset")
    _prctl(PR_SET_NO_NEW_PRIVS, 1, "no_new_privs")
    _install_filter(program)


def _send(reply: socket.socket, message: bytes, fds: list[int] | None = None) -> None:
    ancillary = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []
    # no SIGPIPE: a closed peer is an error to handle, not the end of this process
    reply.sendmsg([message], ancillary, socket.MSG_NOSIGNAL)


def _spare(server: socket.socket, program: bytes) -> None:
    """A, made before its command: the namespaces and B are ready when the
    request comes, so a command waits for none of it. Never returns."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    problem = ""
    init = 0
    try:
        _check(libc.unshare(CLONE_NEWPID | CLONE_NEWNS), "unshare")
        _mount(None, b"/", None, MS_REC | MS_PRIVATE, "make mounts private")
        # B mounts the new namespace's /proc over the one that shows A, so A
        # reaches its descriptors (the mount targets of _bind) from here
        os.chdir("/proc/self/fd")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        init = os.fork()
        if init == 0:
            server.close()
            ours.close()
            _init(theirs, program)
        theirs.close()
        word = ours.recv(4096)
        if word != b"ready":
            problem = word[6:].decode("utf-8", "replace") or "the command's pid 1 did not start"
    except BaseException as exc:
        problem = str(exc)
    message, fds = _receive(server)
    if message != b"run" or len(fds) < 3:  # the session is ending
        if init:
            os.kill(init, signal.SIGKILL)
        os._exit(0)
    reply = socket.socket(fileno=fds[0])
    try:
        if problem:
            raise OSError(problem)
        request = _read_request(fds[2])
        sources = fds[3:]
        for kind, index, path in request["binds"]:
            _bind(kind, path, sources[index])
        _send(ours, b"go", fds[1:3])
        for fd in fds[1:]:
            os.close(fd)
        pidfd = os.pidfd_open(init)
        _send(reply, b"started", [pidfd])
    except BaseException as exc:  # report, then exit: never back into the server loop
        if init:
            os.kill(init, signal.SIGKILL)
        try:
            _send(reply, f"error {exc}".encode())
        finally:
            os._exit(0)
    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    poller.register(reply.fileno(), select.POLLIN | select.POLLHUP)
    killed = False
    while True:
        events = dict(poller.poll())
        if pidfd in events:
            break
        if not killed:
            killed = True
            signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        poller.unregister(reply.fileno())
    _, status = os.waitpid(init, 0)
    with contextlib.suppress(OSError):  # the governor has stopped listening
        _send(reply, f"exit {status}".encode())
    os._exit(0)


def _make_spare(control: socket.socket, program: bytes) -> socket.socket | None:
    """Fork the next command's A (and through it B); None if that fails now."""
    try:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
        pid = os.fork()
    except OSError:
        return None
    if pid == 0:
        control.close()
        ours.close()
        _spare(theirs, program)
    theirs.close()
    return ours


def _receive(control: socket.socket) -> tuple[bytes, list[int]]:
    fds = array.array("i")
    message, ancillary, _flags, _addr = control.recvmsg(64, socket.CMSG_SPACE(MAX_FDS * fds.itemsize))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[: len(data) - len(data) % fds.itemsize])
    return message, list(fds)


def main(argv: list[str]) -> None:
    control = socket.socket(fileno=int(argv[1]))
    with os.fdopen(int(argv[2]), "rb") as handle:
        program = handle.read()
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(number, signal.SIG_DFL)
    # Finished commands' A processes are reaped by the kernel; A resets this.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    spare = _make_spare(control, program)
    _send(control, b"ready")
    null = os.open("/dev/null", os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)
    while True:
        message, fds = _receive(control)
        if not message:
            return
        if message == b"run" and len(fds) >= 3:
            sent = False
            for _ in range(2):  # a spare that died meanwhile is replaced once
                spare = spare or _make_spare(control, program)
                if spare is None:
                    break
                try:
                    _send(spare, b"run", fds)
                    sent = True
                    break
                except OSError:
                    spare.close()
                    spare = None
            if not sent:
                with socket.socket(fileno=os.dup(fds[0])) as reply, contextlib.suppress(OSError):
                    _send(reply, b"error the fork server cannot fork a process for it")
            if spare is not None:
                spare.close()
            spare = None
        for fd in fds:
            os.close(fd)
        if spare is None:
            spare = _make_spare(control, program)


if __name__ == "__main__":
    main(sys.argv)
