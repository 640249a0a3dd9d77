"""A bwrap that works on this machine but could not build one sandbox says so
with its own line (the path it could not mount), never "the sandbox cannot
work here", and the preflight does not cache it: the next run tries again.

The failure is made real: the survey's facts get a home of their own that is
not there (as a home removed after the survey once was), and real bwrap fails
to make its mount point on the read-only ``/``.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from governor.confine.sandboxes import SandboxUnavailable, check
from governor.policies.capability import Capability
from governor.sandbox.host.bwrap import (
    PROC_ADVICE,
    USERNS_ADVICE,
    BwrapUnavailable,
    SandboxStartFailed,
    failure_of,
)
from governor.sandbox.plan.profile import HostFacts, Profile
from governor.sandbox.run import launch
from governor.sandbox.run import session as session_module
from governor.sandbox.run.preflight import forget, preflight
from governor.sandbox.run.session import SandboxSession

GONE = f"/govtest-gone-{secrets.token_hex(4)}"
"""A home under ``/`` (its own tmpfs, as ``/root`` has) that does not exist."""


@pytest.mark.parametrize(
    ("stderr", "advice"),
    [
        ("bwrap: No permissions to creating new namespace, likely because the kernel "
         "does not allow non-privileged user namespaces.\n", USERNS_ADVICE),
        ("bwrap: setting up uid map: Permission denied\n", USERNS_ADVICE),
        ("bwrap: Can't mount proc on /newroot/proc: Operation not permitted\n", PROC_ADVICE),
    ],
)  # fmt: skip
def test_a_machine_that_cannot_sandbox_still_gets_the_operators_next_step(
    stderr: str, advice: str
) -> None:
    error = failure_of(stderr, "the sandbox")
    assert not isinstance(error, SandboxStartFailed)
    assert advice in str(error) and stderr.strip() in str(error)


def test_a_mount_that_failed_is_named_by_bwraps_own_line() -> None:
    error = failure_of(
        "some noise\nbwrap: Can't mkdir /home/x: Read-only file system\n", "the sandbox"
    )
    assert isinstance(error, SandboxStartFailed) and isinstance(error, BwrapUnavailable)
    assert str(error) == "the sandbox could not be built: bwrap: Can't mkdir /home/x: Read-only file system"


def report_gone(monkeypatch: pytest.MonkeyPatch, module: Any) -> None:
    """``module``'s survey (the preflight's in `launch`, a session's in
    `session_module`) reports the missing `GONE` as someone else's home."""
    assert not os.path.lexists(GONE)
    real = module.survey

    def survey(profile: Profile, **kw: Any) -> HostFacts:
        facts = real(profile, **kw)
        return replace(facts, foreign_homes=(*facts.foreign_homes, GONE))

    monkeypatch.setattr(module, "survey", survey)


@pytest.fixture
def fresh_preflight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No test run remembered, in this process or in a state directory."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    forget()
    yield
    forget()


async def test_a_failed_test_sandbox_names_the_path_and_is_not_cached(
    fresh_preflight: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    report_gone(monkeypatch, launch)
    with pytest.raises(SandboxStartFailed) as failed:
        await preflight()
    assert f"bwrap: Can't mkdir {GONE}" in str(failed.value)
    with pytest.raises(SandboxUnavailable) as refused:
        await check(SimpleNamespace(capability=Capability.EDIT_WORKSPACE))  # type: ignore[arg-type]
    assert f"Can't mkdir {GONE}" in str(refused.value)
    assert "cannot work here" not in str(refused.value)
    monkeypatch.undo()  # the host as it is: the same process's next preflight passes
    assert (await preflight()).version


async def test_a_sessions_sandbox_that_failed_to_start_names_the_path(
    fresh_preflight: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    await preflight()  # passes: the session's own survey is the one told of GONE
    report_gone(monkeypatch, session_module)
    profile = Profile(capability=Capability.EDIT_WORKSPACE, workspace=tmp_path)
    with pytest.raises(SandboxStartFailed) as failed:
        async with SandboxSession(profile):
            pass
    assert str(failed.value).startswith("the session's sandbox could not be built: ")
    assert f"bwrap: Can't mkdir {GONE}" in str(failed.value)
