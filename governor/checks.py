"""Checks after the attempt: the job's commands run over the workspace as the
agent left it, and the verdict they come to.

A loop judges an attempt by its acceptance tests; run in the attempt's own
sandbox, or with the workspace writable, a check could be what changes the
result it reports (a test that rewrites its fixture, a build that regenerates
the file under review). So each check runs in a fresh sandbox of its own:

- **it cannot change the workspace**: the roots are overlays whose writes are
  thrown away with the sandbox (``--tmp-overlay``, so tests may still write
  their caches and reports), or, where this bwrap has no ``--tmp-overlay``, the
  roots bound read-only (`Checks.workspace` says which; a check that must
  write then fails, and the outcome says why);
- the policy's frozen paths, protected paths and hidden files hold as they
  did for the agent (pinned read-only over the overlay);
- **network off**: a network namespace of its own with no way out, whatever
  the attempt's network was (a check that downloads is not a check of the
  workspace);
- its own limits: the policy's ``[limits]`` per sandbox, and ``[checks]
  timeout`` seconds, after which its whole tree is killed and it fails.

Each check is sandboxed even at full-access: a check is the job's command, not
the agent's, and nothing in it was asked for. Its output is kept as a bounded
tail, masked, since a test run prints the environment it was given.

`run_checks` is the library's step: a loop that owns its retries calls it with
the workspace and the policy, without the command line.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal

from governor.secrets import Masker, forwarding_problems
from policies.capability import Capability
from policies.policy import Policy

if TYPE_CHECKING:  # the outcome holds a CheckRun: reading one needs no sandbox
    from governor.audit.log import AuditLog
    from sandbox import Profile

TAIL_CHARS: Final = 4000
"""Characters of a check's output kept (its newest): what says why a test failed."""
OUTPUT_LIMIT: Final = 256 * 1024
"""Bytes of a check's output the sandbox keeps while it runs (the newest)."""

WorkspaceMode = Literal["overlay", "read-only"]
Verdict = Literal["passed", "failed"]
"""The checks' verdict: ``passed`` when every check passed, else ``failed``."""

READ_ONLY_NOTICE: Final = (
    "the checks ran on the workspace bound read-only (this bwrap has no --tmp-overlay, "
    "bubblewrap 0.10 or newer has it): a check that writes in the workspace fails there"
)


@dataclass(frozen=True, slots=True)
class CheckRun:
    """One check's end: its command, exit status (None: it could not start or
    was killed at its timeout), duration and the masked tail of its output."""

    command: str
    exit: int | None
    duration_s: float
    tail: str
    timed_out: bool = False
    error: str | None = None
    """Why the check could not run (the sandbox could not be built), in words."""

    @property
    def passed(self) -> bool:
        """Exit status 0, within its timeout."""
        return self.exit == 0 and not self.timed_out

    def to_json(self) -> dict[str, Any]:
        """The run as plain JSON values (``timed_out`` and ``error`` only when set)."""
        out: dict[str, Any] = {
            "command": self.command,
            "exit": self.exit,
            "duration_s": self.duration_s,
            "tail": self.tail,
        }
        if self.timed_out:
            out["timed_out"] = True
        if self.error is not None:
            out["error"] = self.error
        return out


@dataclass(frozen=True, slots=True)
class Checks:
    """Every check of a job, in order, and how the workspace was shown to them."""

    runs: tuple[CheckRun, ...] = ()
    workspace: WorkspaceMode = "overlay"

    @property
    def verdict(self) -> Verdict | None:
        """``passed`` when every check passed, ``failed`` otherwise; None without checks."""
        if not self.runs:
            return None
        return "passed" if all(r.passed for r in self.runs) else "failed"


async def run_checks(
    policy: Policy,
    *,
    commands: tuple[str, ...] | None = None,
    environ: Mapping[str, str] | None = None,
    masker: Masker | None = None,
    on_check: Callable[[CheckRun], None] | None = None,
) -> Checks:
    """Run the checks (``commands``, default the policy's ``[checks] commands``)
    one after the other over the bound ``policy``'s roots, each in a fresh
    sandbox that cannot change them (see the module's header), and call
    ``on_check`` after each. Every check runs, whatever the ones before it came
    to: a loop wants every failing check at once.

    A check gets the policy's ``env`` names from ``environ`` (default
    ``os.environ``), the governor's ``PATH`` and ``$HOME`` shown empty. Its tail is
    masked with ``masker`` (default: the secret-looking variables of ``environ``).
    """
    from governor.confine import configured_bwrap
    from sandbox import BwrapUnavailable, ProfileError, SandboxStartFailed
    from sandbox.run.preflight import preflight

    chosen = policy.checks if commands is None else commands
    if not chosen:
        return Checks()
    env_from = os.environ if environ is None else environ
    masked = masker if masker is not None else Masker.from_environ(env_from)
    workspace: WorkspaceMode = "overlay"
    try:
        probed = await preflight(configured_bwrap())
        if not probed.features.tmp_overlay:
            workspace = "read-only"
        failure = None
    except SandboxStartFailed as e:  # bwrap's own line names the path
        failure = f"the check's sandbox could not be started: {e}"
    except (BwrapUnavailable, ProfileError) as e:
        failure = f"the check's sandbox cannot work here: {e}"
    # a library call reaches here without `governor.spec.prepare`: the same one check
    refused = forwarding_problems((n, env_from.get(n), "the policy's env (a check's)") for n in policy.env)
    if refused:
        failure = "refused before the check: " + "; ".join(refused)
    profile = check_profile(
        policy, workspace, {n: env_from[n] for n in policy.env if n in env_from and not refused}
    )
    runs = []
    for command in chosen:
        ran = await _one(command, profile, policy.check_timeout, masked, failure)
        runs.append(ran)
        if on_check is not None:
            on_check(ran)
    return Checks(tuple(runs), workspace)


def report(audit: AuditLog, emit: Callable[[str, dict[str, Any]], None], ran: CheckRun) -> None:
    """An attempt's record (kind ``check``) and event of one check, as it ends;
    a log that cannot take the record leaves the check in the outcome only."""
    from governor.audit.log import AuditUnavailable

    verdict = "passed" if ran.passed else "failed"
    emit("check", {"verdict": verdict, **ran.to_json()})
    fields = {k: v for k, v in ran.to_json().items() if k != "command"}
    with contextlib.suppress(AuditUnavailable):
        audit.record("check", subject={"command": ran.command}, verdict=verdict, **fields)


def check_profile(policy: Policy, workspace: WorkspaceMode, env: Mapping[str, str]) -> Profile:
    """The profile of one check: the commands' (`governor.confine.command_profile`:
    roots, pins, frozen paths, hidden files, limits) with the roots as thrown-away
    overlays (or read-only), sandboxed at any capability, and no network."""
    from governor.confine import command_profile

    base = command_profile(policy)
    scratch = workspace == "overlay"
    return replace(
        base,
        capability=Capability.EDIT_WORKSPACE if scratch else Capability.READ_ONLY,
        scratch=scratch,
        network=False,
        egress=None,
        env=dict(env),
        cwd=Path(policy.workspace),
    )


async def _one(
    command: str, profile: Profile, timeout: float, masker: Masker, failure: str | None
) -> CheckRun:
    from governor.confine import configured_bwrap
    from sandbox import BwrapUnavailable, ProfileError
    from sandbox.run.runner import Command, run

    started = time.monotonic()
    if failure is not None:
        return CheckRun(command, None, 0.0, "", error=masker.text(failure))
    try:
        result = await run(
            Command.shell(command),
            profile,
            timeout=timeout,
            output_limit=OUTPUT_LIMIT,
            bwrap=configured_bwrap(),
        )
    except (BwrapUnavailable, ProfileError, OSError) as e:
        error = f"the check's sandbox could not be started: {e}"
        return CheckRun(
            command, None, round(time.monotonic() - started, 3), "", error=masker.text(error)
        )
    text = result.text
    tail = text[-TAIL_CHARS:] if len(text) > TAIL_CHARS else text
    return CheckRun(
        command=command,
        exit=None if result.timed_out else result.status.shell_code,
        duration_s=round(time.monotonic() - started, 3),
        tail=masker.text(tail),
        timed_out=result.timed_out,
    )
