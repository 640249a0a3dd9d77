"""A sandbox's resource limits: how they are enforced on this machine, and the
name of the limit a process ended at.

The mechanisms, and why each is where it is:

- **rlimits, set inside the sandbox.** ``RLIMIT_DATA`` (memory: each process's
  private writable memory; not ``RLIMIT_AS``, which counts address space that
  V8 and Go reserve without using and would stop node agents at start),
  ``RLIMIT_NPROC`` (processes) and ``RLIMIT_CPU`` (CPU seconds, SIGXCPU at the
  limit, SIGKILL `CPU_GRACE` seconds later). They are set *after* bwrap made
  the sandbox's user namespace: by `prlimit` around the command in a bwrap of
  its own, by the fork server's pid 1 of each command in a session's sandbox
  (`governor.sandbox.standalone.forkserver`). That placement is what makes ``RLIMIT_NPROC`` count
  the sandbox's processes only: since Linux 5.14 the count is kept per user
  namespace, and each user namespace above is checked against the limit its
  creator had; set on bwrap itself, the limit would be checked against the
  user's whole process count on the host (verified here as an unprivileged
  user: 5 forks instead of 18 with 14 processes of the user outside).
- **A pids cgroup for root.** The kernel never applies ``RLIMIT_NPROC`` to
  real uid 0 (``copy_process`` exempts ``INIT_USER``), and a root caller stays
  uid 0 inside. Where a group made below the governor's own pids group gets a
  ``pids.max`` (cgroup v1's pids hierarchy; a cgroup v2 only where pids is
  delegated there: tried, not assumed), each sandbox gets a group of its own,
  joined by the shell that execs bwrap, so nothing of the sandbox starts
  outside it. Below, never above: a group elsewhere would leave the limits
  an operator put on the governor's own group.
- **tmpfs sizes**: bwrap's ``--size`` on every tmpfs the sandbox mounts.

All the sandboxes of one attempt together are bounded by `governor.sandbox.host.budget`
(``attempt_processes``, ``attempt_memory``); this module bounds each one.

A cgroup v2 for memory and CPU (one group per sandbox, the whole tree counted)
is the better mechanism; `probe` says whether this machine offers one, and it
is not used yet (see docs/limits.md): the machine this was built on offers none.

Naming the limit: SIGXCPU is the CPU limit's own signal. A refused allocation,
fork or write is an error the process reports in its own words, so those are
recognised by the words (`SIGNS`): a process that fails and says "MemoryError"
under a memory limit is reported as stopped at it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import resource
import secrets
import shutil
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from governor.policies.limits import Limits, render
from governor.sandbox.plan.profile import ProfileError

CPU_GRACE: Final = 5
"""Seconds of CPU between SIGXCPU (the soft limit) and SIGKILL (the hard one)."""
PRLIMIT_DIRS: Final = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")
PIDS_V1: Final = "/sys/fs/cgroup/pids"
GROUP_PREFIX: Final = "acp-governor"
JOIN: Final = 'echo $$ > "$0" && exec "$@"'
"""The shell line that puts itself (then, by exec, bwrap) in a group first."""

SIGNS: Final[tuple[tuple[str, re.Pattern[str], str], ...]] = (
    (
        "memory",
        re.compile(
            r"MemoryError|Cannot allocate memory|memory exhausted|out of memory|bad_alloc"
            r"|heap out of memory|failed to allocate|Out of memory",
            re.IGNORECASE,
        ),
        "an allocation over it was refused",
    ),
    (
        "processes",
        re.compile(
            r"fork.*Resource temporarily unavailable|Cannot fork|can't fork|fork failed"
            # Python says EAGAIN as BlockingIOError, with or without its errno;
            # node as "spawn [FILE] EAGAIN"
            r"|BlockingIOError\b[^\n]*(?:\[Errno 11\]|Resource temporarily unavailable)"
            r"|pthread_create.*(?:EAGAIN|Resource temporarily)"
            r"|\bspawn\b[^\n]*\bEAGAIN\b",
            re.IGNORECASE,
        ),
        "a new process was refused",
    ),
    (
        "tmp",
        re.compile(r"/(?:var/)?tmp\b[^\n]*No space left on device"),
        "the private /tmp is full",
    ),
)
"""What a process says when a limit refused it, per limit; the first that
matches the end of its output names the limit."""
TAIL_BYTES: Final = 2048
"""Only the end of the output is read for `SIGNS`: a refusal ends a process."""


@dataclass(frozen=True)
class Enforcement:
    """How limits are enforced for this process's sandboxes."""

    processes: str
    """``rlimit`` (counted per sandbox), ``cgroup`` (a pids group per sandbox),
    or ``none`` (root without a writable pids cgroup: not enforced)."""
    pids_root: str | None
    """Where this process makes pids groups (``processes == "cgroup"``)."""
    cgroup_v2: str
    """Whether a cgroup v2 with memory, pids and cpu could be made here, and why not."""
    prlimit: str | None
    """The ``prlimit`` that sets a bwrap-of-its-own's rlimits; None: not found."""

    def lines(self) -> list[str]:
        """What `governor doctor` prints."""
        procs = {
            "rlimit": "RLIMIT_NPROC set inside the sandbox (counts its processes only)",
            "cgroup": f"a pids cgroup per sandbox under {self.pids_root}",
            "none": "NOT enforced: root is exempt from RLIMIT_NPROC and no pids cgroup is writable",
        }[self.processes]
        return [
            "memory: RLIMIT_DATA per process; cpu_seconds: RLIMIT_CPU per process; "
            "tmp: tmpfs --size",
            f"processes: {procs}",
            "attempt_processes, attempt_memory (all of an attempt's sandboxes together): "
            + (
                "a pids cgroup for the attempt with each sandbox's group below it "
                "(processes), and a watcher counting every sandbox from /proc"
                if self.processes == "cgroup"
                else "a watcher counting every sandbox's processes and private memory from /proc"
            ),
            f"cgroup v2: {self.cgroup_v2}",
            "prlimit: " + (self.prlimit or "NOT found (util-linux): limits cannot be set"),
        ]


def cgroup2_mount() -> str | None:
    """Where a cgroup2 file system is mounted (the first in this process's
    mountinfo), None when none is."""
    with contextlib.suppress(OSError), open("/proc/self/mountinfo") as handle:
        for line in handle:
            left, _, right = line.partition(" - ")
            if right.split(" ", 1)[0] == "cgroup2":
                return left.split(" ")[4]
    return None


def _cgroup_v2() -> tuple[str | None, str]:
    """The cgroup v2 directory of this process and whether it can make a child
    group with memory, pids and cpu in it (the answer in words)."""
    mount = cgroup2_mount()
    if mount is None:
        return None, "no cgroup2 file system is mounted"
    own = "/"
    with contextlib.suppress(OSError), open("/proc/self/cgroup") as handle:
        for line in handle:
            if line.startswith("0::"):
                own = line[3:].strip()
    where = os.path.join(mount, own.lstrip("/")).rstrip("/") or "/"
    try:
        offered = set(Path(where, "cgroup.controllers").read_text().split())
    except OSError as exc:
        return None, f"cannot read {where}/cgroup.controllers: {exc.strerror}"
    missing = sorted({"memory", "pids", "cpu"} - offered)
    if missing:
        return where, (
            f"not available: {where} offers {', '.join(sorted(offered)) or 'no controller'}; "
            f"{', '.join(missing)} missing (bound to cgroup v1, or not delegated)"
        )
    if not os.access(where, os.W_OK):
        return where, f"not available: {where} is not writable by this user (not delegated)"
    return where, f"available at {where}, not used yet (rlimits are)"


def _own_v1_pids() -> str:
    """This process's group in the cgroup v1 pids hierarchy (``/`` if none)."""
    with contextlib.suppress(OSError), open("/proc/self/cgroup") as handle:
        for line in handle:
            parts = line.strip().split(":", 2)
            if len(parts) == 3 and "pids" in parts[1].split(","):
                return parts[2] or "/"
    return "/"


def _makes_pids_groups(where: str) -> bool:
    """Whether a group made below ``where`` gets a ``pids.max`` (tried: made and
    removed). A cgroup v2 gives one only where the parent delegates pids."""
    probe_dir = os.path.join(where, f"{GROUP_PREFIX}-probe-{secrets.token_hex(4)}")
    try:
        os.mkdir(probe_dir)
    except OSError:
        return False
    try:
        return os.path.exists(os.path.join(probe_dir, "pids.max"))
    finally:
        with contextlib.suppress(OSError):
            os.rmdir(probe_dir)


def _pids_root(v2: str | None) -> str | None:
    """Where pids groups can be made for this process's sandboxes: below its own
    group (never above it: that would leave the limits the operator put on the
    governor), in cgroup v1's pids hierarchy, else in its cgroup v2 group."""
    v1 = os.path.join(PIDS_V1, _own_v1_pids().lstrip("/")).rstrip("/")
    for where in (v1 if os.path.isdir(PIDS_V1) else None, v2):
        if where is not None and os.access(where, os.W_OK) and _makes_pids_groups(where):
            return where
    return None


def probe() -> Enforcement:
    """How limits are enforced here, for this user."""
    v2, v2_text = _cgroup_v2()
    root = os.getuid() == 0
    pids = _pids_root(v2) if root else None
    processes = "rlimit" if not root else "cgroup" if pids is not None else "none"
    return Enforcement(processes, pids, v2_text, find_prlimit())


@functools.cache
def enforcement() -> Enforcement:
    """`probe`, once per process (what it reads does not change while we run)."""
    return probe()


def command_prefix(limits: Limits | None) -> tuple[str, ...]:
    """What runs a bwrap-of-its-own's command under ``limits``' rlimits: the
    words before the command, inside the sandbox (see the module docstring)."""
    return () if limits is None else prlimit_prefix(limits, enforcement().prlimit)


def launcher(
    limits: Limits | None,
    stack: contextlib.ExitStack,
    within: str | None = None,
    ending: Callable[[str], None] | None = None,
) -> tuple[str, ...]:
    """The words before bwrap that start it in a pids group of its own, where
    the processes limit needs one (root); the group lives until ``stack`` closes.
    ``within``: the attempt's pids group (`governor.sandbox.host.budget`), made below
    this process's own: the sandbox's group is made below it, so the kernel
    holds the sandbox to ``processes`` and the whole attempt to its budget;
    ``ending`` is told the group's path just before it is removed."""
    found = enforcement()
    if found.processes != "cgroup":
        return ()
    each = None if limits is None else limits.processes
    if each is None and within is None:
        return ()
    root = within if within is not None else found.pids_root
    assert root is not None
    procs = stack.enter_context(pids_group(root, each, ending))
    return ("/bin/sh", "-c", JOIN, procs)


def find_prlimit() -> str | None:
    """util-linux's ``prlimit`` in a system directory (visible in every sandbox)."""
    for folder in PRLIMIT_DIRS:
        found = shutil.which("prlimit", path=folder)
        if found is not None:
            return found
    return None


def rlimits(limits: Limits) -> list[tuple[int, int, int]]:
    """(resource, soft, hard) for each limit a process gets as an rlimit."""
    out = []
    if limits.memory is not None:
        out.append((resource.RLIMIT_DATA, limits.memory, limits.memory))
    if limits.processes is not None:
        out.append((resource.RLIMIT_NPROC, limits.processes, limits.processes))
    if limits.cpu_seconds is not None:
        cpu = limits.cpu_seconds
        out.append((resource.RLIMIT_CPU, cpu, cpu + CPU_GRACE))
    return out


_PRLIMIT_FLAG: Final = {
    resource.RLIMIT_DATA: "--data",
    resource.RLIMIT_NPROC: "--nproc",
    resource.RLIMIT_CPU: "--cpu",
}


def prlimit_prefix(limits: Limits, prlimit: str | None) -> tuple[str, ...]:
    """The words before a command that run it with ``limits``' rlimits (empty
    when there are none). `LimitsUnavailable` when there is no ``prlimit``."""
    wanted = rlimits(limits)
    if not wanted:
        return ()
    if prlimit is None:
        raise LimitsUnavailable(
            "the sandbox's limits are set with prlimit (util-linux), which is not "
            f"installed in {', '.join(PRLIMIT_DIRS)}"
        )
    flags = [f"{_PRLIMIT_FLAG[res]}={soft}:{hard}" for res, soft, hard in wanted]
    return (prlimit, *flags, "--")


class LimitsUnavailable(ProfileError):
    """Limits were asked for and cannot be set here; nothing runs (fail closed)."""


@contextlib.contextmanager
def pids_group(
    root: str, processes: int | None, ending: Callable[[str], None] | None = None
) -> Iterator[str]:
    """A pids group of its own under ``root`` allowing ``processes`` (None: as
    many as the groups above allow): yields the
    path of its ``cgroup.procs`` (for `JOIN`); on exit, whatever is left in it
    is killed and the group removed. Groups left by a governor that died are
    removed when empty (the name holds its owner's pid: a group another
    governor just made, not joined yet, is empty too and must stay)."""
    base = os.path.join(root, GROUP_PREFIX)
    os.makedirs(base, exist_ok=True)
    _sweep(base)
    group = os.path.join(base, f"{os.getpid()}-{secrets.token_hex(8)}")
    os.mkdir(group)
    try:
        Path(group, "pids.max").write_text("max" if processes is None else str(processes))
        yield os.path.join(group, "cgroup.procs")
    finally:
        if ending is not None:
            with contextlib.suppress(OSError):
                ending(group)
        _remove(group)


def _sweep(base: str) -> None:
    """Remove the empty groups of governors no longer running."""
    with contextlib.suppress(OSError):
        for name in os.listdir(base):
            owner, _, _ = name.partition("-")
            if owner.isdigit() and _alive(int(owner)):
                continue
            path = os.path.join(base, name)
            with contextlib.suppress(OSError):
                if not Path(path, "cgroup.procs").read_text().strip():
                    os.rmdir(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's: alive
    return True


def _remove(group: str) -> None:
    for _ in range(50):
        try:
            os.rmdir(group)
            return
        except FileNotFoundError:
            return
        except OSError:
            with contextlib.suppress(OSError):
                for pid in Path(group, "cgroup.procs").read_text().split():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(int(pid), signal.SIGKILL)
            time.sleep(0.02)


def blame(
    limits: Limits | None, exit_code: int | None, sig: str | None, output: bytes
) -> str | None:
    """The limit a process that ended this way stopped at, in words (``cpu
    limit 30 s (SIGXCPU)``), or None. ``exit_code`` 128+N is signal N (bwrap and
    the fork server report a command's signal so)."""
    if limits is None or (exit_code == 0 and sig is None):
        return None
    xcpu = 128 + signal.SIGXCPU
    if limits.cpu_seconds is not None and (sig == "SIGXCPU" or exit_code == xcpu):
        return f"cpu limit {render('cpu_seconds', limits.cpu_seconds)} (killed by SIGXCPU)"
    text = output[-TAIL_BYTES:].decode("utf-8", "replace")
    for name, pattern, why in SIGNS:
        value = getattr(limits, name)
        if value is not None and pattern.search(text):
            return f"{name} limit {render(name, value)} ({why})"
    return None
