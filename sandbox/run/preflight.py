"""Preflight: prove once per process (per bwrap binary) that the sandbox works.

Locating a binary is not enough: user namespaces may be disabled, AppArmor may
block them, a container may forbid mounting ``/proc``. So the preflight runs
the *full* edit-workspace profile once on a scratch workspace and checks from
inside that the filter is installed (``Seccomp: 2``), privileges are gone
(``NoNewPrivs: 1``, ``CapEff: 0``). Any failure raises `BwrapUnavailable` with
the operator's next step; callers refuse to run sandboxed commands, never run
them bare.

A passed test run is remembered for an hour in the governor's state directory
(hidden from every sandbox), keyed by what decides it: the binary (path,
device, inode, size, times), the kernel (boot id, release), the user-namespace
sysctls and our uid. Every `governor run` in a loop or CI job otherwise paid
the test run again (about 45 ms of a 0.55 s start, `bench/startup.py`). Only
that it passed is remembered: the binary's features are probed every run, so
a memo written by someone else can at most skip a test the same binary and
kernel passed, never drop an option (``--disable-userns``). A failure is
never remembered; a sandbox that stops working within the hour
fails at its own start, and what it would have run is refused, as before.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Final

import trio

from governor.policies.capability import Capability
from governor.sandbox.host.bwrap import (
    Bwrap,
    BwrapUnavailable,
    SandboxStartFailed,
    advice_for,
    bwrap_line,
    failure_of,
    locate,
    probe,
)
from governor.sandbox.host.concealed import state_dir
from governor.sandbox.plan.profile import Profile, ProfileError
from governor.sandbox.run.execution import start_launch
from governor.sandbox.run.launch import launched, prepare

_CACHE: dict[str, Bwrap | BwrapUnavailable] = {}
_LOCK_BY_PATH: dict[str, trio.Lock] = {}
_LOCATED: dict[str | None, str] = {}
PROBE_TIMEOUT = 20.0

EXPECTED_STATUS = {
    "Seccomp": "2",
    "NoNewPrivs": "1",
    "CapEff": "0000000000000000",
}


async def preflight(
    configured: str | os.PathLike[str] | None = None, *, recall: bool = True
) -> Bwrap:
    """The probed bwrap, after one successful test run; cached per path.

    Raises `BwrapUnavailable` (also cached: the machine will not change its mind
    within one run). ``recall=False`` runs the test even when a passed one is
    remembered (`governor doctor`: a diagnosis looks, it does not remember).
    A `SandboxStartFailed` (bwrap's own line, when the machine can but the
    test sandbox's mounts could not be made: a host path changed meanwhile)
    is not cached.
    """
    key = None if configured is None else os.fspath(configured)
    path = _LOCATED.get(key)
    if path is None:
        path = _LOCATED[key] = locate(configured)
    cached = _CACHE.get(path)
    if cached is None:
        lock = _LOCK_BY_PATH.setdefault(path, trio.Lock())
        async with lock:
            cached = _CACHE.get(path)
            if cached is None:
                try:
                    cached = await _check(path, recall)
                except SandboxStartFailed:
                    raise  # this sandbox, not the machine: the next run tries again
                except BwrapUnavailable as exc:
                    cached = exc
                _CACHE[path] = cached
    if isinstance(cached, BwrapUnavailable):
        raise cached
    return cached


def forget() -> None:
    """Drop the cache (tests that swap binaries)."""
    _CACHE.clear()
    _LOCATED.clear()


MEMO_SECONDS: Final = 3600
"""How long a passed test run is remembered (see the module docstring)."""
_MEMO_FORMAT: Final = 1
_SYSCTLS: Final = (
    "/proc/sys/kernel/unprivileged_userns_clone",
    "/proc/sys/user/max_user_namespaces",
    "/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
)


async def _check(path: str, recall: bool = True) -> Bwrap:
    key = _memo_key(path)
    if recall and _passed(key):
        # what the binary offers is asked of it again (~4 ms): only that the test
        # passed is taken from the memo, never a feature a forged one could drop
        return await trio.to_thread.run_sync(probe, path)
    bwrap = await _test_run(path)
    _remember(key)
    return bwrap


def _memo_key(path: str) -> dict[str, Any] | None:
    """What a remembered test run is valid for; None when it cannot be told."""
    try:
        st = os.stat(path)
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            boot = f.read().strip()
    except OSError:
        return None
    sysctls: dict[str, str | None] = {}
    for name in _SYSCTLS:
        try:
            with open(name, encoding="ascii") as f:
                sysctls[name] = f.read().strip()
        except OSError:
            sysctls[name] = None
    return {
        "format": _MEMO_FORMAT,
        "bwrap": [
            os.path.realpath(path),
            *(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns),
        ],
        "boot": boot,
        "kernel": os.uname().release,
        "sysctls": sysctls,
        "uid": os.geteuid(),
        "expected": EXPECTED_STATUS,
    }


def _memo_path() -> Path:
    return state_dir() / "preflight.json"


def _passed(key: dict[str, Any] | None) -> bool:
    """Whether a test run for ``key`` passed less than an hour ago."""
    if key is None:
        return False
    try:
        memo = json.loads(_memo_path().read_text(encoding="utf-8"))
        return bool(memo["key"] == key and 0 <= time.time() - memo["passed_at"] < MEMO_SECONDS)
    except (OSError, ValueError, KeyError, TypeError):
        return False  # none yet, or not ours to trust: test again


def _remember(key: dict[str, Any] | None) -> None:
    """Write the passed test run down (atomically; a state dir we cannot write
    just means the next run tests again)."""
    if key is None:
        return
    folder = _memo_path().parent
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, scratch = tempfile.mkstemp(prefix=".preflight-", dir=folder)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"key": key, "passed_at": time.time()}, f)
        os.replace(scratch, _memo_path())
    except OSError:
        return


async def _test_run(path: str) -> Bwrap:
    bwrap = await trio.to_thread.run_sync(probe, path)
    scratch = tempfile.mkdtemp(prefix="governor-preflight-")
    try:
        profile = Profile(capability=Capability.EDIT_WORKSPACE, workspace=Path(scratch))
        try:
            with ExitStack() as stack:
                execution = await launched(
                    stack,
                    lambda: prepare(profile, ("/bin/cat", "/proc/self/status"), bwrap),
                    functools.partial(start_launch, output_limit=64 * 1024),
                )
                try:
                    with trio.move_on_after(PROBE_TIMEOUT):
                        await execution.finish()
                finally:
                    await execution.reap()
        except ProfileError as exc:
            raise BwrapUnavailable(f"bwrap test run could not be prepared: {exc}") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    text, _ = execution.ring.text(final=True)
    status = execution.status
    if status is None or status.exit_code != 0:
        if status is not None and bwrap_line(text) is not None:
            raise failure_of(text, f"the test sandbox of bwrap {bwrap.version} at {path}")
        first = next((line for line in text.splitlines() if line.strip()), "no output")
        raise BwrapUnavailable(
            f"bwrap {bwrap.version} at {path} failed its test run ({first.strip()}); "
            f"{advice_for(text)}"
        )
    fields = dict(
        line.split(":", 1) for line in text.splitlines() if ":" in line
    )
    for name, expected in EXPECTED_STATUS.items():
        if fields.get(name, "").strip() != expected:
            raise BwrapUnavailable(
                f"bwrap {bwrap.version} at {path} ran, but inside the sandbox {name} is "
                f"{fields.get(name, '?').strip()!r}, expected {expected!r}; refusing to sandbox with it"
            )
    return bwrap
