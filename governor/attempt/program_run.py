"""A plain program's steps: the prompt on its stdin, its output kept, its end recorded.

The program is spawned in the agent's sandbox like an ACP agent, given the
prompt on stdin (`governor.attempt.command_agent`), and its exit code, newest
stdout bytes and stderr tail go into the `Ending` as a `CommandResult`; its
changes in the roots are its work (`UnderWay.program_ran`).
"""

from __future__ import annotations

import time
from typing import Any

from governor.agents import npm_installs as installs
from governor.attempt import command_agent as plain
from governor.attempt.under_way import UnderWay, terminate
from governor.confine import sandboxes as confine
from governor.ending.how_it_ended import CommandResult


class ProgramRun(UnderWay):
    """The steps of a plain program as the agent."""

    async def _drive_command(self) -> None:
        """A plain program: prompt on stdin, stdout kept (newest bytes), stderr tail."""
        p = self.prepared
        stdout = bytearray()
        stderr = bytearray()
        try:
            await self._fetch_for_npx()
            profile = confine.agent_profile(
                p.executor.argv, p.policy, None, p.env, sandbox=p.spec.sandbox_agent,
                via_npx=p.executor.via_npx,
            )  # fmt: skip
            began = time.time_ns()
            try:
                async with confine.spawn_agent(profile, p.executor.argv, self.proxy) as process:
                    self.emit("spawned", {"agent": self.name, "pid": process.pid})
                    await self._feed_command(process, stdout, stderr)
            finally:  # its sandbox is gone: nothing of it writes after this
                self.program_ran = (began, time.time_ns())
        except (OSError, confine.SandboxUnavailable, installs.InstallError) as e:
            self._failed(
                f"{self.name} could not be started: {getattr(e, 'strerror', None) or e}"
            )
            return
        self._blame_limit(process.returncode, stderr.decode("utf-8", errors="replace"))
        self._program_ended(CommandResult(
            process.returncode,
            stdout.decode("utf-8", errors="replace"),
            stderr.decode("utf-8", errors="replace"),
        ))

    async def _feed_command(self, process: Any, stdout: bytearray, stderr: bytearray) -> None:
        with self._deadline() as deadline:
            await plain.converse(process, self.prepared.spec.prompt.encode(), stdout, stderr)
        if deadline.cancelled_caught:
            self._timed_out_or_interrupted()
            await terminate(process)
