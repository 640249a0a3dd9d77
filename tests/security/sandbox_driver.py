"""Runs sandboxed commands for the escape suite as an unprivileged user.

Started once per test session as that user (``runuser``/``setpriv``) with the
repository and the venv's site-packages on ``PYTHONPATH``; reads one JSON
request per line on stdin and answers one JSON line on stdout. It builds the
same `Profile` and runs the command the same way as the root half of the suite
does in-process, so both halves exercise one code path: through a bwrap of its
own (`governor.sandbox.run.runner.start`, ``"via": "command"``, what ``governor sandbox``
does) or through a session's sandbox and its fork server
(`governor.sandbox.run.session.SandboxSession`, ``"via": "session"``, what ACP terminals do).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import resource
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import trio

from governor.policies.capability import Capability
from governor.policies.limits import Limits
from governor.sandbox.host.bwrap import BwrapUnavailable
from governor.sandbox.plan.profile import HomeFolder, HostFacts, Profile, ProfileError
from governor.sandbox.run import launch
from governor.sandbox.run import session as session_module
from governor.sandbox.run.execution import Execution, ExitStatus
from governor.sandbox.run.runner import Command, start
from governor.sandbox.run.session import SandboxSession


def build_profile(spec: dict[str, Any]) -> Profile:
    return Profile(
        capability=Capability.parse(spec["capability"]),
        workspace=Path(spec["workspace"]),
        extra_roots=tuple(Path(p) for p in spec.get("extra_roots", ())),
        network=spec.get("network", False),
        env=spec.get("env", {}),
        home=Path(spec["home"]) if spec.get("home") else None,
        home_folders=tuple(HomeFolder(n, w) for n, w in spec.get("home_folders", ())),
        cwd=Path(spec["cwd"]) if spec.get("cwd") else None,
        path=spec.get("path"),
        keep=tuple(Path(p) for p in spec.get("keep", ())),
        toolchains=spec.get("toolchains", True),
        git_read_only=spec.get("git_read_only", False),
        unprotected=tuple(spec.get("unprotected", ())),
        limits=Limits(**spec["limits"]) if spec.get("limits") else None,
        read_only=tuple(Path(p) for p in spec.get("read_only", ())),
    )


PAUSE_TIMEOUT = 60.0


@contextlib.contextmanager
def paused_after_survey(pause: dict[str, str] | None, workspace: str) -> Iterator[None]:
    """The seam of the start-up race: after the survey of this request's own
    sandbox (not the preflight's, whose workspace is a scratch folder) and
    before its bwrap starts, make the file ``marker`` and wait until the path
    ``gone`` no longer exists (the test removes it, as root). Once: a
    session's later commands survey again, unpaused. With ``"at": "spawn"``
    the pause is later, at that bwrap's spawn, after `governor.sandbox.run.launch.prepare`
    checked the survey's sockets and built bwrap's arguments: the window that
    check cannot close."""
    if pause is None:
        yield
        return
    real, real_spawn = launch.survey, launch.spawn
    at_spawn = pause.get("at") == "spawn"
    armed = done = False

    def wait() -> None:
        Path(pause["marker"]).write_text("surveyed\n")
        deadline = time.monotonic() + PAUSE_TIMEOUT
        while os.path.lexists(pause["gone"]):
            if time.monotonic() > deadline:
                raise ProfileError(f"{pause['gone']} was not removed after the survey")
            time.sleep(0.01)

    def survey(profile: Profile, **kw: Any) -> HostFacts:
        nonlocal armed, done
        facts = real(profile, **kw)
        if not done and str(profile.workspace) == workspace:
            if at_spawn:
                armed = True
            else:
                done = True
                wait()
        return facts

    def spawn(*args: Any, **kw: Any) -> Any:
        nonlocal armed, done
        if armed and not done:
            done = True
            wait()
        return real_spawn(*args, **kw)

    launch.survey = survey  # type: ignore[assignment]
    session_module.survey = survey  # type: ignore[assignment]
    launch.spawn = spawn
    try:
        yield
    finally:
        launch.survey = real
        session_module.survey = real
        launch.spawn = real_spawn


async def _finish(execution: Execution, timeout: float | None) -> tuple[ExitStatus, bool]:
    with trio.move_on_after(timeout if timeout is not None else 60) as scope:
        await execution.finish()
    if scope.cancelled_caught:
        execution.kill()
        with trio.CancelScope(shield=True):
            await execution.finish()
    return await execution.wait(), scope.cancelled_caught


async def execute(request: dict[str, Any]) -> dict[str, Any]:
    """Run one request; the answer shape is the same for root and the driver.

    ``then`` (optional) is a second argv run after the first, in the same
    session's sandbox or in a bwrap of its own; the answer is the second's."""
    saved = {name: os.environ.get(name) for name in request.get("environ", {})}
    for name, value in request.get("environ", {}).items():
        os.environ[name] = value
    try:
        profile = build_profile(request["profile"])
        limit = request["output_limit"]
        argvs = [request["argv"], *([request["then"]] if request.get("then") else [])]
        async with contextlib.AsyncExitStack() as stack:
            stack.enter_context(paused_after_survey(request.get("pause"), str(profile.workspace)))
            session = None
            if request.get("via", "command") == "session":
                session = await stack.enter_async_context(SandboxSession(profile))
            for argv in argvs:
                command = Command.of(argv)
                async with contextlib.AsyncExitStack() as one:
                    if session is not None:
                        starting = session.start(command.argv, profile, output_limit=limit)
                    else:
                        starting = start(command, profile, output_limit=limit)
                    execution = await one.enter_async_context(starting)
                    status, timed_out = await _finish(execution, request.get("timeout"))
    except (ProfileError, BwrapUnavailable) as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    finally:
        for name, old in saved.items():  # as it was: HOME, for the next request
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old
    output, truncated = execution.ring.snapshot()
    return {
        "error": None,
        "exit_code": status.exit_code,
        "signal": status.signal,
        "limit": status.limit,
        "output": base64.b64encode(output).decode(),
        "truncated": truncated,
        "timed_out": timed_out,
        "total": execution.ring.total,
        "peak": execution.ring.peak,
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }


def main() -> None:
    print(json.dumps({"ready": os.getuid()}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        answer = trio.run(execute, request)
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
