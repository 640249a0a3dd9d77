"""A classic-BPF seccomp program for sandboxed commands, generated in pure Python.

The program is handed to ``bwrap --seccomp FD``; bwrap installs it (after
``PR_SET_NO_NEW_PRIVS``) just before it executes the command. Everything that
decides what the filter refuses lives in the tables at the top of this file.

Why these rules (sandbox-reference §5, §6):

* A foreign architecture is killed: a 32-bit ``int 0x80`` call on x86_64 arrives
  with ``AUDIT_ARCH_I386`` and different syscall numbers, so a table written for
  x86_64 would not apply to it. x32 calls (numbers with bit 30 set) are refused
  for the same reason.
* ``EPERM`` for the kernel-attack and sandbox-rearranging surface (mount,
  namespaces, ptrace, keyrings, bpf, modules, ...). The capabilities are already
  dropped; the filter is the second wall.
* ``ENOSYS`` for ``clone3`` and the new mount API: ``clone3`` passes its flags in
  memory a filter cannot inspect, so it is refused with "not implemented" and
  libc falls back to ``clone``, whose flags *are* inspected (CVE-2021-41133).
  ``io_uring`` runs syscalls the filter never sees.
* ``ioctl(TIOCSTI|TIOCLINUX)`` pushes keystrokes into a terminal; only the low
  32 bits of the request are loaded because the kernel ignores the upper half
  (CVE-2019-10063: a full 64-bit compare lets ``TIOCSTI | 1 << 32`` through).
* ``socket(AF_UNIX, ...)`` is refused for a process that shares the host's
  network namespace (`governor.sandbox.plan.profile.Profile.unix_sockets`; below
  full-access none does: this is the second wall): the host's abstract sockets (X11, D-Bus) would be
  reachable there, and no mount hides them. A process with a namespace of its
  own may make them; the survey hides the host's socket files from it (a
  read-only bind does not stop ``connect()``: `governor.sandbox.host.sockets`).
  ``socketpair`` stays allowed: it creates a private pair and is what pipes
  between processes use.
* ``clone`` with a namespace flag is refused; creating namespaces is how a
  process would rearrange its mounts.
"""

from __future__ import annotations

import errno
import platform
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

# --- the rules --------------------------------------------------------------

EPERM_SYSCALLS: Final[tuple[str, ...]] = (
    "ptrace",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "syslog",
    "acct",
    "quotactl",
    "quotactl_fd",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
)

ENOSYS_SYSCALLS: Final[tuple[str, ...]] = (
    "clone3",
    "open_tree",
    "open_tree_attr",
    "move_mount",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
)

TIOCSTI: Final = 0x5412
TIOCLINUX: Final = 0x541C
BLOCKED_IOCTLS: Final[tuple[int, ...]] = (TIOCSTI, TIOCLINUX)

AF_UNIX: Final = 1

CLONE_NAMESPACE_FLAGS: Final = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)
"""CLONE_NEWTIME (0x80) is left out: in ``clone``'s flags that bit is part of the
exit signal, and NEWTIME is only accepted by ``unshare``/``clone3``, both refused."""

X32_SYSCALL_BIT: Final = 0x40000000

# --- the architectures ----------------------------------------------------------

_UNIQUE_SINCE_424: Final[Mapping[str, int]] = {
    # numbers >= 424 are the same on every architecture
    "io_uring_setup": 425,
    "io_uring_enter": 426,
    "io_uring_register": 427,
    "open_tree": 428,
    "move_mount": 429,
    "fsopen": 430,
    "fsconfig": 431,
    "fsmount": 432,
    "fspick": 433,
    "clone3": 435,
    "mount_setattr": 442,
    "quotactl_fd": 443,
    "open_tree_attr": 467,
}


@dataclass(frozen=True)
class Arch:
    """One architecture: its ``AUDIT_ARCH_*`` value and syscall numbers."""

    name: str
    audit_arch: int
    syscalls: Mapping[str, int]
    has_x32: bool


X86_64: Final = Arch(
    name="x86_64",
    audit_arch=0xC000003E,
    has_x32=True,
    syscalls={
        "ioctl": 16,
        "socket": 41,
        "clone": 56,
        "ptrace": 101,
        "syslog": 103,
        "pivot_root": 155,
        "chroot": 161,
        "acct": 163,
        "mount": 165,
        "umount2": 166,
        "init_module": 175,
        "delete_module": 176,
        "quotactl": 179,
        "kexec_load": 246,
        "add_key": 248,
        "request_key": 249,
        "keyctl": 250,
        "unshare": 272,
        "perf_event_open": 298,
        "setns": 308,
        "finit_module": 313,
        "kexec_file_load": 320,
        "bpf": 321,
        "userfaultfd": 323,
        **_UNIQUE_SINCE_424,
    },
)

AARCH64: Final = Arch(
    name="aarch64",
    audit_arch=0xC00000B7,
    has_x32=False,
    syscalls={
        "ioctl": 29,
        "umount2": 39,
        "mount": 40,
        "pivot_root": 41,
        "chroot": 51,
        "quotactl": 60,
        "acct": 89,
        "unshare": 97,
        "kexec_load": 104,
        "init_module": 105,
        "delete_module": 106,
        "syslog": 116,
        "ptrace": 117,
        "socket": 198,
        "add_key": 217,
        "request_key": 218,
        "keyctl": 219,
        "clone": 220,
        "perf_event_open": 241,
        "setns": 268,
        "finit_module": 273,
        "bpf": 280,
        "userfaultfd": 282,
        "kexec_file_load": 294,
        **_UNIQUE_SINCE_424,
    },
)

ARCHES: Final[Mapping[str, Arch]] = {"x86_64": X86_64, "amd64": X86_64, "aarch64": AARCH64, "arm64": AARCH64}


class SeccompError(RuntimeError):
    """The filter cannot be built for this machine (unknown architecture)."""


def native_arch() -> Arch:
    """The `Arch` of this machine; `SeccompError` (fail closed) on any other."""
    machine = platform.machine().lower()
    found = ARCHES.get(machine)
    if found is None:
        raise SeccompError(
            f"no seccomp table for architecture {machine!r}; supported: x86_64, aarch64"
        )
    return found


# --- classic BPF ------------------------------------------------------------

BPF_LD_W_ABS: Final = 0x20
BPF_JEQ_K: Final = 0x15
BPF_JGE_K: Final = 0x35
BPF_JSET_K: Final = 0x45
BPF_RET_K: Final = 0x06

SECCOMP_RET_KILL_PROCESS: Final = 0x80000000
SECCOMP_RET_ERRNO: Final = 0x00050000
SECCOMP_RET_ALLOW: Final = 0x7FFF0000

OFFSET_NR: Final = 0
OFFSET_ARCH: Final = 4


def offset_arg_low(index: int) -> int:
    """Offset of the low 32 bits of ``args[index]`` in ``struct seccomp_data``
    (both supported architectures are little-endian)."""
    return 16 + 8 * index


@dataclass(frozen=True)
class Insn:
    """One ``struct sock_filter``; ``jt``/``jf`` are label names or ``None`` (next)."""

    code: int
    k: int
    jt: str | None = None
    jf: str | None = None


@dataclass(frozen=True)
class Label:
    name: str


Item = Insn | Label


def assemble(items: Sequence[Item]) -> bytes:
    """Resolve labels to relative jumps and pack to ``struct sock_filter[]``."""
    positions: dict[str, int] = {}
    count = 0
    for item in items:
        if isinstance(item, Label):
            if item.name in positions:
                raise SeccompError(f"duplicate label {item.name!r}")
            positions[item.name] = count
        else:
            count += 1
    out = bytearray()
    pc = 0
    for item in items:
        if isinstance(item, Label):
            continue
        out += struct.pack(
            "=HBBI", item.code, _jump(positions, pc, item.jt), _jump(positions, pc, item.jf), item.k
        )
        pc += 1
    return bytes(out)


def _jump(positions: Mapping[str, int], pc: int, label: str | None) -> int:
    if label is None:
        return 0
    offset = positions[label] - (pc + 1)
    if not 0 <= offset <= 255:
        raise SeccompError(f"jump to {label!r} out of range ({offset})")
    return offset


def _errno(code: int) -> int:
    return SECCOMP_RET_ERRNO | code


def program(arch: Arch, *, allow_unix_sockets: bool = False) -> list[Item]:
    """The filter as labelled instructions (see the module docstring for the why)."""
    nr = arch.syscalls
    items: list[Item] = [
        Insn(BPF_LD_W_ABS, OFFSET_ARCH),
        Insn(BPF_JEQ_K, arch.audit_arch, jf="kill"),
        Insn(BPF_LD_W_ABS, OFFSET_NR),
    ]
    if arch.has_x32:
        items.append(Insn(BPF_JGE_K, X32_SYSCALL_BIT, jt="eperm"))
    items += [Insn(BPF_JEQ_K, nr[name], jt="eperm") for name in EPERM_SYSCALLS]
    items += [Insn(BPF_JEQ_K, nr[name], jt="enosys") for name in ENOSYS_SYSCALLS]
    items += [
        Insn(BPF_JEQ_K, nr["ioctl"], jt="ioctl"),
        Insn(BPF_JEQ_K, nr["clone"], jt="clone"),
    ]
    if not allow_unix_sockets:
        items.append(Insn(BPF_JEQ_K, nr["socket"], jt="socket"))
    items += [
        Insn(BPF_RET_K, SECCOMP_RET_ALLOW),
        Label("ioctl"),
        Insn(BPF_LD_W_ABS, offset_arg_low(1)),
        *(Insn(BPF_JEQ_K, request, jt="eperm") for request in BLOCKED_IOCTLS),
        Insn(BPF_RET_K, SECCOMP_RET_ALLOW),
        Label("clone"),
        Insn(BPF_LD_W_ABS, offset_arg_low(0)),
        Insn(BPF_JSET_K, CLONE_NAMESPACE_FLAGS, jt="eperm"),
        Insn(BPF_RET_K, SECCOMP_RET_ALLOW),
    ]
    if not allow_unix_sockets:
        items += [
            Label("socket"),
            Insn(BPF_LD_W_ABS, offset_arg_low(0)),
            Insn(BPF_JEQ_K, AF_UNIX, jt="eperm"),
            Insn(BPF_RET_K, SECCOMP_RET_ALLOW),
        ]
    items += [
        Label("eperm"),
        Insn(BPF_RET_K, _errno(errno.EPERM)),
        Label("enosys"),
        Insn(BPF_RET_K, _errno(errno.ENOSYS)),
        Label("kill"),
        Insn(BPF_RET_K, SECCOMP_RET_KILL_PROCESS),
    ]
    return items


def build(arch: Arch | None = None, *, allow_unix_sockets: bool = False) -> bytes:
    """The packed filter for ``arch`` (default: this machine), ready for ``--seccomp``."""
    return assemble(program(arch or native_arch(), allow_unix_sockets=allow_unix_sockets))
