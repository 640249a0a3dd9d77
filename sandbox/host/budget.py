"""One processes-and-memory budget for all the sandboxes of one attempt.

``[limits] processes`` and ``memory`` bound one sandbox and one process
(`governor.sandbox.host.limits`): an attempt that opens a session for its commands,
three MCP servers and a check sandbox may hold five times ``processes``, and
each of its processes ``memory``. ``[limits] attempt_processes`` and
``attempt_memory`` bound them together: every sandbox started while an
`AttemptBudget` is current (a context variable, so the tasks of one attempt
share it and a batch's other attempts, in other tasks, never do) is counted in
it, from the moment `open_launch` has started it until it is reaped.

How, and why each way:

- **Counted from /proc** (everywhere): `measure` walks each sandbox's process
  tree from its launched process (bwrap, or the shell that execs it) down,
  through ``/proc/PID/task/TID/children``, and sums the threads
  (``Threads:``) and the private resident memory (``RssAnon:`` +
  ``RssShmem:``) of each process in ``/proc/PID/status``, which any user can
  read for every process, including those in a sandbox's user namespace. A
  pid namespace's orphans are reparented to its pid 1, bwrap's child: the
  walk finds every process of the sandbox. bwrap's own process counts, as
  a pids cgroup counts it. Shared memory mapped by several processes is
  counted in each (an overestimate, never an underestimate).
- **And the memory no process's RSS shows** (everywhere, as root and
  unprivileged): pages a sandbox holds in a file and not in a mapping. A
  tmpfs is memory; so is a memfd; so is the upper layer of a
  ``--tmp-overlay`` (an invisible tmpfs bwrap makes for a cache or a check's
  scratch root). `measure` adds, per sandbox, what every tmpfs and overlay
  its mount namespace holds *that the governor's own namespace does not*
  (the host's ``/dev/shm`` or ``/run``, seen through ``--ro-bind / /``,
  are the host's), measured by ``statvfs`` through ``/proc/PID/root`` (an
  overlay's ``statfs`` is its upper layer's), each superblock once; and the
  blocks of every memfd a process of the sandbox holds open (by inode, once).
  Both need only what the ``/proc/PID/status`` read needs: the sandbox's
  user namespace is the governor's own child, so its processes are the
  governor's to inspect, root or not.
- **And the memory the kernel holds for a sandbox** (no process's RSS, no
  file): bytes written into a socket and never read (queued, past each
  process's ``memory`` rlimit, which bounds an address space), a System V
  segment detached (its IPC namespace holds it), a memfd in flight.
  Where a memory cgroup can be made (`memory_root`: root, or a user whose
  own group is delegated to it; tried, not assumed), the attempt gets one,
  every sandbox joins it before bwrap starts (`AttemptBudget.joining`), and
  the watcher counts the kernel's charge (`charged`) when it is more than
  the /proc count: anonymous memory and shmem wherever they are, and on
  cgroup v2 kernel memory too (socket buffers, pipes), the kernel's
  reclaimable caches of files left out. Everywhere else, and for the
  sockets on cgroup v1 (whose charge cannot tell a socket's buffers from
  the inode cache), `held_in_kernel` reads each sandbox's own namespaces
  (bwrap's ``--unshare-all`` gives it an IPC namespace, and a network one
  unless it has the network): the System V segments and message queues
  there, and the buffers of its Unix sockets (``sock_diag``).
  docs/security.md lists the residual (pipes' buffers without a cgroup v2;
  a sandbox with the network: a socket in flight).
- **A pids cgroup for the whole attempt** where one can be made (root, with a
  writable pids hierarchy: `governor.sandbox.host.limits.enforcement`): each sandbox's
  own pids group is made *below* the attempt's, whose ``pids.max`` is
  ``attempt_processes``; the kernel refuses the fork past it, whatever the
  watcher's pace. Its ``pids.events`` ``max`` count (forks refused) tells the
  watcher the budget was reached. The attempt's memory group (above) is
  counted, not limited: its charge is read by the watcher, which names the
  limit (a ``memory.max`` would end a process by the OOM killer, the
  attempt's reason lost); the groups above keep the operator's limits.
- **A watcher** (`watch`) measures every so often, spaced by ten times the
  last measure's duration (as `governor.attempt.roots_size` spaces its walks), at
  least `MIN_INTERVAL` apart; past a limit it kills every sandbox of the
  attempt (SIGKILL to each sandbox's pid 1: its whole pid namespace goes) and
  tells the attempt, which ends the turn ``failed`` naming the limit. A
  watcher can be outrun for a moment: between two measures a sandbox may grow
  past the budget; the per-sandbox rlimits (``processes`` per sandbox,
  ``memory`` per process) stay the hard bound of that moment.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol

import trio

from governor.policies.limits import Limits, render
from governor.sandbox.host.kernel_memory import KernelReaders, held_in_kernel
from governor.sandbox.host.limits import (
    GROUP_PREFIX,
    JOIN,
    _alive,
    _remove,
    _sweep,
    cgroup2_mount,
    enforcement,
)

MIN_INTERVAL: Final = 1.0
"""Seconds between two measures at least (a /proc walk of a few hundred
processes takes milliseconds; ten times it is far less)."""


class Sandboxed(Protocol):
    """What the budget needs of a started sandbox (`governor.sandbox.run.spawn.Child`)."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    def kill(self, *, hard: bool = False) -> None: ...


@dataclass(frozen=True)
class Usage:
    """What the attempt's sandboxes held at one measure."""

    processes: int
    """Processes and threads, bwrap's own included."""
    memory: int
    """Bytes of private resident memory (RssAnon + RssShmem), and of the
    sandboxes' own tmpfs, overlay upper layers and memfds (`held_in_files`),
    or the attempt's memory group's charge where it is more; and what the
    kernel holds for them (`held_in_kernel`) that the charge leaves out."""
    sandboxes: int
    """Sandboxes running."""
    refused: int = 0
    """Forks the attempt's pids group refused (root with a pids cgroup only)."""


class AttemptBudget:
    """The sandboxes of one attempt, counted together against its limits."""

    def __init__(self, processes: int | None, memory: int | None) -> None:
        self.processes = processes
        self.memory = memory
        self._running: list[Sandboxed] = []
        self.group: str | None = None
        """The attempt's pids group (root, where one can be made): the sandboxes'
        own groups are made below it."""
        self.memory_group: str | None = None
        """The attempt's memory group (where one can be made: `memory_root`):
        every sandbox joins it, and the kernel charges it what they hold."""
        self.readers = KernelReaders()
        """The readers of the sandboxes' namespaces (`held_in_kernel`), ended
        with the budget."""
        self.killed = False
        self._refused_gone = 0
        self._refused_before = 0

    def add(self, child: Sandboxed) -> None:
        """Count ``child`` (a sandbox just started) from now until it is reaped;
        one started after the budget was spent is killed at once."""
        self._running.append(child)
        if self.killed:
            child.kill()

    def running(self) -> list[Sandboxed]:
        """The sandboxes not yet reaped (a reaped one's pid may be anyone's)."""
        self._running = [c for c in self._running if c.returncode is None]
        return list(self._running)

    def measure(self) -> Usage:
        """What the running sandboxes hold now (see the module docstring)."""
        return self.count(self.running())

    def count(self, running: list[Sandboxed]) -> Usage:
        """What ``running`` (some of `running`) hold now: only reads /proc and
        the cgroup files, so a worker thread may call it (the list is the caller's)."""
        processes = memory = 0
        pids: list[int] = []
        for child in running:
            for pid in _tree(child.pid):
                threads, private = _status(pid)
                processes += threads
                memory += private
                pids.append(pid)
        memory += held_in_files(pids) if pids else 0
        if self.memory_group is not None:  # the kernel's charge sees what /proc cannot
            held, kernel = charged(self.memory_group)
            memory = max(memory, held)
            if not kernel and pids:  # cgroup v1: the sockets' buffers read in each sandbox
                memory += held_in_kernel(pids, segments=False, readers=self.readers)
        elif pids:  # no group: the kernel's queues and segments, read in each sandbox
            memory += held_in_kernel(pids, readers=self.readers)
        return Usage(processes, memory, len(running), self.refused())

    def joining(self) -> tuple[str, ...]:
        """The words before a sandbox's launcher that put it (the shell that
        execs the rest, then bwrap and all it starts) in the attempt's memory
        group; () without one."""
        if self.memory_group is None:
            return ()
        return ("/bin/sh", "-c", JOIN, os.path.join(self.memory_group, "cgroup.procs"))

    def group_ending(self, group: str) -> None:
        """A sandbox's pids group below the attempt's, about to be removed:
        the forks the attempt refused in it are kept (`refused`)."""
        self._refused_gone += _refused_by_attempt(group)

    def refused(self) -> int:
        """Forks the attempt's pids group refused so far (0 without one)."""
        if self.group is None:
            return 0
        total = self._refused_gone + _read_count(self.group, "pids.events", "max")
        total -= self._refused_before
        inner = os.path.join(self.group, GROUP_PREFIX)
        with contextlib.suppress(OSError):
            for name in os.listdir(inner):
                with contextlib.suppress(OSError, ValueError):
                    total += _refused_by_attempt(os.path.join(inner, name))
        return total

    def over(self, usage: Usage) -> str | None:
        """The limit ``usage`` is past, in words, or None."""
        where = f" in {usage.sandboxes} sandboxes" if usage.sandboxes else ""
        procs = self.processes
        if procs is not None and (usage.processes > procs or usage.refused):
            held = (
                f"{usage.refused} new processes refused by the attempt's pids group"
                if usage.refused
                else f"{usage.processes} processes and threads"
            )
            return (
                f"processes limit {procs} across its sandboxes "
                f"([limits] attempt_processes: {held}{where})"
            )
        if self.memory is not None and usage.memory > self.memory:
            return (
                f"memory limit {render('attempt_memory', self.memory)} across its sandboxes "
                f"([limits] attempt_memory: {usage.memory} bytes of private memory, "
                f"tmpfs, memfds and kernel memory"
                f"{where})"
            )
        return None

    def settle(self) -> None:
        """The turn's sandboxes are gone: those started from now on (the
        checks') are let run, and counted afresh (the forks refused so far
        were the turn's)."""
        self.killed = False
        self._refused_before += self.refused()

    def kill_all(self) -> None:
        """SIGKILL every running sandbox (each one's pid 1 ends its namespace),
        and every sandbox started after this."""
        self.killed = True
        for child in self.running():
            child.kill()


CURRENT: contextvars.ContextVar[AttemptBudget | None] = contextvars.ContextVar(
    "acp_governor_attempt_budget", default=None
)
"""The budget of the attempt whose task (or a task it started) is running."""


def current() -> AttemptBudget | None:
    """The current attempt's budget, if any (`governor.sandbox.run.launch` asks)."""
    return CURRENT.get()


@contextlib.contextmanager
def attempt_budget(limits: Limits) -> Iterator[AttemptBudget]:
    """An `AttemptBudget` for ``limits``, current inside the block (and in the
    tasks started from it); its pids group, if any, removed at the end."""
    budget = AttemptBudget(limits.attempt_processes, limits.attempt_memory)
    with contextlib.ExitStack() as stack:
        found = enforcement()
        if budget.processes is not None and found.processes == "cgroup":
            assert found.pids_root is not None
            try:
                budget.group = stack.enter_context(
                    _attempt_group(found.pids_root, budget.processes)
                )
            except OSError:  # the probe's group could be made, this one not: watched only
                budget.group = None
        where = memory_root() if budget.memory is not None else None
        if where is not None:
            try:
                budget.memory_group = stack.enter_context(_memory_group(where))
            except OSError:  # the probe's group could be made, this one not: /proc only
                budget.memory_group = None
        stack.callback(budget.readers.close)
        token = CURRENT.set(budget)
        stack.callback(CURRENT.reset, token)
        yield budget


@contextlib.contextmanager
def _attempt_group(root: str, processes: int) -> Iterator[str]:
    """The attempt's pids group under ``root`` (``pids.max`` = ``processes``)."""
    base = os.path.join(root, GROUP_PREFIX)
    os.makedirs(base, exist_ok=True)
    _sweep_attempts(base)
    _sweep(base)
    group = os.path.join(base, f"{os.getpid()}-attempt-{secrets.token_hex(8)}")
    os.mkdir(group)
    try:
        Path(group, "pids.max").write_text(str(processes))
        yield group
    finally:
        inner = os.path.join(group, GROUP_PREFIX)
        with contextlib.suppress(OSError):
            for name in os.listdir(inner):  # the sandboxes' groups, not the control files beside them
                if os.path.isdir(sub := os.path.join(inner, name)) and not os.path.islink(sub):
                    _remove(sub)
        with contextlib.suppress(OSError):
            os.rmdir(inner)
        _remove(group)


MEMORY_V1: Final = "/sys/fs/cgroup/memory"
"""cgroup v1's memory hierarchy, where it is mounted."""


@functools.cache
def memory_root() -> str | None:
    """Where this process can make the attempt's memory group: below its own
    group (never above: that would leave the limits an operator put on the
    governor), in cgroup v1's memory hierarchy, else in its cgroup v2 group
    where memory is delegated to children and pids groups are not made there
    too (a process is in one v2 group only: joining a memory group would take
    it out of its pids group). Tried, not assumed: a group is made, its
    charge read, and removed. None: the watcher counts from /proc alone."""
    own_v1 = _own_group("memory")
    found = enforcement()
    places: list[str] = []
    if own_v1 is not None and os.path.isdir(MEMORY_V1):
        places.append(os.path.join(MEMORY_V1, own_v1.lstrip("/")).rstrip("/"))
    v2 = _own_v2()
    if v2 is not None and not (found.pids_root or "").startswith(v2):
        with contextlib.suppress(OSError):
            if "memory" in Path(v2, "cgroup.subtree_control").read_text().split():
                places.append(v2)
    for where in places:
        if not os.access(where, os.W_OK):
            continue
        with contextlib.suppress(OSError), _memory_group(where) as group:
            charged(group, strict=True)
            return where
    return None


def _own_group(controller: str) -> str | None:
    """This process's group in the cgroup v1 hierarchy of ``controller``."""
    with contextlib.suppress(OSError), open("/proc/self/cgroup") as handle:
        for line in handle:
            parts = line.strip().split(":", 2)
            if len(parts) == 3 and controller in parts[1].split(","):
                return parts[2] or "/"
    return None


def _own_v2() -> str | None:
    """This process's cgroup v2 folder, if a cgroup2 is mounted."""
    mount = cgroup2_mount()
    if mount is None:
        return None
    with contextlib.suppress(OSError), open("/proc/self/cgroup") as handle:
        for line in handle:
            if line.startswith("0::"):
                return os.path.join(mount, line[3:].strip().lstrip("/")).rstrip("/")
    return None


@contextlib.contextmanager
def _memory_group(root: str) -> Iterator[str]:
    """The attempt's memory group under ``root``: no limit of its own (the
    watcher names the limit; the groups above keep theirs); on exit, whatever
    is left in it is killed and the group removed."""
    base = os.path.join(root, GROUP_PREFIX)
    os.makedirs(base, exist_ok=True)
    _sweep(base)
    group = os.path.join(base, f"{os.getpid()}-attempt-memory-{secrets.token_hex(8)}")
    os.mkdir(group)
    try:
        yield group
    finally:
        _remove(group)


def charged(group: str, strict: bool = False) -> tuple[int, bool]:
    """Bytes the kernel charges the memory ``group`` that the machine cannot
    take back without ending a process, and whether kernel memory is among
    them. The page cache of files read or written is left out (the disk
    holds it), and so are the kernel's caches of files' names and inodes
    (an agent that makes 100,000 files is charged some 130 MB of them,
    reclaimable under pressure: counted, a file-heavy build would pass any
    budget). cgroup v2: ``memory.current`` less ``active_file``,
    ``inactive_file`` and ``slab_reclaimable``: anonymous memory, shmem
    (tmpfs, memfds, System V segments) and the rest of kernel memory (socket
    buffers, pipes, page tables); True. cgroup v1, whose ``memory.stat``
    does not tell reclaimable kernel memory apart:
    ``memory.usage_in_bytes`` less the hierarchy's file pages and less
    ``memory.kmem.usage_in_bytes``: anonymous memory and shmem; False (the
    caller reads the sockets' buffers in the sandboxes, `held_in_kernel`).
    (0, True) once unreadable, unless ``strict`` (the probe's)."""
    try:
        stat = {
            key: int(value)
            for key, _, value in (
                line.partition(" ") for line in Path(group, "memory.stat").read_text().splitlines()
            )
            if value.strip().isdigit()
        }
        if "total_active_file" in stat:
            usage = int(Path(group, "memory.usage_in_bytes").read_text())
            kmem = Path(group, "memory.kmem.usage_in_bytes")
            usage -= int(kmem.read_text()) if kmem.exists() else 0
            cache = stat["total_active_file"] + stat["total_inactive_file"]
            kernel = False
        else:
            usage = int(Path(group, "memory.current").read_text())
            cache = sum(stat.get(key, 0) for key in ("active_file", "inactive_file"))
            cache += stat.get("slab_reclaimable", 0)
            kernel = True
    except (OSError, ValueError, KeyError):
        if strict:
            raise OSError(f"{group}: no memory charge to read") from None
        return 0, True
    return max(0, usage - cache), kernel


def _sweep_attempts(base: str) -> None:
    """Empty the attempt groups of governors no longer running of their empty
    sandbox groups, so that `_sweep` can remove them (it removes empty groups)."""
    with contextlib.suppress(OSError):
        for name in os.listdir(base):
            owner, _, rest = name.partition("-")
            if not rest.startswith("attempt-") or not owner.isdigit() or _alive(int(owner)):
                continue
            inner = os.path.join(base, name, GROUP_PREFIX)
            with contextlib.suppress(OSError):
                for left in os.listdir(inner):
                    with contextlib.suppress(OSError):
                        os.rmdir(os.path.join(inner, left))  # only an empty one goes
                os.rmdir(inner)


async def watch(budget: AttemptBudget, over: Callable[[str], None]) -> None:
    """Measure ``budget`` every so often; once past a limit, kill every sandbox
    of the attempt, call ``over`` with the limit in words, and return."""
    if budget.processes is None and budget.memory is None:
        return
    while True:
        started = time.monotonic()
        running = budget.running()  # on the trio thread, where sandboxes are added
        usage = await trio.to_thread.run_sync(budget.count, running, abandon_on_cancel=True)
        limit = budget.over(usage)
        if limit is not None:
            budget.kill_all()
            over(limit)
            return
        await trio.sleep(max(MIN_INTERVAL, 10 * (time.monotonic() - started)))


def processes(running: list[Sandboxed]) -> list[int]:
    """Every process of the sandboxes ``running`` (reads /proc only)."""
    return [pid for child in running for pid in _tree(child.pid)]


def _tree(root: int) -> list[int]:
    """``root`` and every process below it (gone ones left out)."""
    found: list[int] = []
    stack = [root]
    while stack:
        pid = stack.pop()
        found.append(pid)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/children") as f:
                stack.extend(int(c) for c in f.read().split())
    return found


MEMORY_FILESYSTEMS: Final = frozenset({"tmpfs", "overlay"})
"""The filesystems a sandbox mounts whose files are memory: its tmpfs (``--tmpfs``,
``--dev``) and its overlays (``--tmp-overlay``: the upper layer is a tmpfs;
a read-only overlay's ``statfs`` is its lower folder's, so only one with an
``upperdir`` counts)."""


def held_in_files(pids: list[int]) -> int:
    """Bytes held in memory as files by the processes ``pids`` (a measure's
    processes): what the tmpfs and writable overlays of their mount namespaces
    hold, those the governor's own namespace shares left out, each superblock
    once; and the memfds they hold open, each once."""
    own = _superblocks(_mounts("/proc/self/mountinfo"))
    seen_ns: set[str] = set()
    counted: set[str] = set(own)
    memfds: set[tuple[int, int]] = set()
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            namespace = os.readlink(f"/proc/{pid}/ns/mnt")
            if namespace not in seen_ns:
                seen_ns.add(namespace)
                for devices, point in _memory_mounts(f"/proc/{pid}/mountinfo"):
                    if counted.intersection(devices):
                        continue
                    counted.update(devices)
                    with contextlib.suppress(OSError):
                        found = os.statvfs(f"/proc/{pid}/root{point}")
                        total += (found.f_blocks - found.f_bfree) * found.f_frsize
        total += _memfds(pid, memfds)
    return total


def _mounts(path: str) -> list[tuple[str, str, str, str, str]]:
    """(device, root in its filesystem, mount point, filesystem, super options)
    of each line of a ``mountinfo`` (proc(5)); [] once unreadable."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "surrogateescape")
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        fields = line.split(" ")
        with contextlib.suppress(ValueError, IndexError):
            tail = fields.index("-")
            point = fields[4].replace("\\040", " ").replace("\\011", "\t")
            point = point.replace("\\012", "\n").replace("\\134", "\\")
            found.append((fields[2], fields[3], point, fields[tail + 1], fields[tail + 3]))
    return found


def _superblocks(mounts: list[tuple[str, str, str, str, str]]) -> set[str]:
    return {device for device, _, _, kind, _ in mounts if kind in MEMORY_FILESYSTEMS}


TMP_OVERLAY_UPPER: Final = "upperdir=/tmp-overlay-upper-"
"""How bwrap's ``--tmp-overlay`` names its upper layers: folders of the tmpfs
bwrap works in."""


def _memory_mounts(path: str) -> list[tuple[frozenset[str], str]]:
    """The tmpfs and writable overlays in ``path``, as (devices, a mount point
    to measure them through), one entry per tmpfs. bwrap works in a tmpfs of
    its own, which holds the upper layer of every ``--tmp-overlay`` (each
    overlay's ``statfs`` is that tmpfs's) and the files of ``--bind-data``,
    ``--ro-bind-data`` and ``--file`` (bound one by one: a part of it, not its
    root, is mounted): all of those are one tmpfs, counted once."""
    found: list[tuple[frozenset[str], str]] = []
    bwraps: dict[str, str] = {}
    for device, root, point, kind, options in _mounts(path):
        if kind == "tmpfs" and root == "/":
            found.append((frozenset({device}), point))
        elif kind == "tmpfs" or (kind == "overlay" and TMP_OVERLAY_UPPER in options):
            bwraps.setdefault(device, point)
        elif kind == "overlay" and "upperdir=" in options:
            found.append((frozenset({device}), point))
    if bwraps:
        found.append((frozenset(bwraps), next(iter(bwraps.values()))))
    return found


def _memfds(pid: int, seen: set[tuple[int, int]]) -> int:
    """Bytes of the memfds ``pid`` holds open that are not in ``seen`` (added)."""
    total = 0
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return 0
    for fd in fds:
        with contextlib.suppress(OSError):
            if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/memfd:"):
                continue
            info = os.stat(f"/proc/{pid}/fd/{fd}")
            if (key := (info.st_dev, info.st_ino)) not in seen:
                seen.add(key)
                total += info.st_blocks * 512
    return total


def _status(pid: int) -> tuple[int, int]:
    """(threads, bytes of RssAnon + RssShmem) of ``pid``; (0, 0) once gone."""
    threads = private = 0
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            text = f.read()
    except OSError:
        return 0, 0
    for line in text.splitlines():
        if line.startswith(b"Threads:"):
            threads = int(line.split()[1])
        elif line.startswith((b"RssAnon:", b"RssShmem:")):
            private += int(line.split()[1]) * 1024
    return threads, private


def _refused_by_attempt(group: str) -> int:
    """The forks a sandbox's own pids ``group`` saw refused that its own
    ``pids.max`` did not refuse: those the attempt's group above did. Where the
    kernel counts a refusal (``pids.events`` ``max``) differs: cgroup v1 in the
    group of the process that forked (this one), cgroup v2 in the group whose
    limit refused it (the attempt's, read there). A group that reached its own
    ``pids.max`` (``pids.peak``) may have been refused by either: counted as
    its own limit's (the sandbox's ``processes`` names it)."""
    refused = _read_count(group, "pids.events", "max")
    if not refused:
        return 0
    own = Path(group, "pids.max").read_text().strip()
    peak = Path(group, "pids.peak")
    if own != "max" and peak.exists() and int(peak.read_text()) >= int(own):
        return 0
    return refused


def _read_count(group: str, name: str, key: str) -> int:
    with contextlib.suppress(OSError, ValueError):
        for line in Path(group, name).read_text().splitlines():
            found, _, count = line.partition(" ")
            if found == key:
                return int(count)
    return 0
