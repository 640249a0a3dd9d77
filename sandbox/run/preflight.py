"""Preflight: prove once per process (per bwrap binary) that the sandbox works.

Locating a binary is not enough: user namespaces may be disabled, AppArmor may
block them, a container may forbid mounting ``/proc``. So the preflight runs
the *full* edit-workspace profile once on a scratch workspace and checks from
inside that the filter is installed (``Seccomp: 2``), privileges are gone
(``NoNewPrivs: 1``, ``CapEff: 0``). Any failure raises `BwrapUnavailable` with
the operator's next step; callers refuse to run sandboxed commands, never run
them bare.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import trio

from policies.capability import Capability
from sandbox.host.bwrap import Bwrap, BwrapUnavailable, advice_for, locate, probe
from sandbox.plan.profile import Profile, ProfileError
from sandbox.run.execution import start_launch
from sandbox.run.launch import prepare

_CACHE: dict[str, Bwrap | BwrapUnavailable] = {}
_LOCK_BY_PATH: dict[str, trio.Lock] = {}
_LOCATED: dict[str | None, str] = {}
PROBE_TIMEOUT = 20.0

EXPECTED_STATUS = {
    "Seccomp": "2",
    "NoNewPrivs": "1",
    "CapEff": "0000000000000000",
}


async def preflight(configured: str | os.PathLike[str] | None = None) -> Bwrap:
    """The probed bwrap, after one successful test run; cached per path.

    Raises `BwrapUnavailable` (also cached: the machine will not change its mind
    within one run).
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
                    cached = await _check(path)
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


async def _check(path: str) -> Bwrap:
    bwrap = await trio.to_thread.run_sync(probe, path)
    scratch = tempfile.mkdtemp(prefix="governor-preflight-")
    try:
        profile = Profile(capability=Capability.EDIT_WORKSPACE, workspace=Path(scratch))
        try:
            with prepare(profile, ("/bin/cat", "/proc/self/status"), bwrap) as launch:
                execution = await start_launch(launch, output_limit=64 * 1024)
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
