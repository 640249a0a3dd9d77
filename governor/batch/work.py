"""One job, start to end, wherever it runs (the local pool or a Ray worker):
clone, attempt, diff, and the result as plain values.

Rules of this file:

- **A job always ends as a `JobResult`.** A clone that fails, an attempt
  refused before start (a node that cannot sandbox included), a diff that
  cannot be taken: each is a ``failed`` outcome whose reason names the step.
  Only an interruption (`stop` set, Ctrl-C) makes a result the caller must
  not record, flagged `JobResult.interrupted`.
- **Nothing is left behind.** The workspace and the log are made in a fresh
  temporary folder (never inside the batch's output, where a half-made job
  could be mistaken for a finished one) and removed however the job ends;
  what outlives it is in the result: the outcome, the patch and the log's
  bytes, for the caller to write.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog
import trio

from governor.batch.clone import GitFailed, changes, clone, shown_url
from governor.batch.jobs import Job
from governor.cli import REFUSED_BEFORE_START, exit_code_of
from governor.outcome import Outcome
from governor.spec import RefusedBeforeStart
from governor.tries import run_tries, try_log
from policies.ceiling import Ceiling

logger = structlog.get_logger("governor.batch")


@dataclass(slots=True)
class JobResult:
    """What a job came to: its outcome line (without the job's paths in the
    output, which the writer adds), its patch and its audit log's bytes."""

    job: str
    outcome: dict[str, Any]
    patch: bytes
    log: bytes
    interrupted: bool = False
    """The job was stopped before its end (Ctrl-C): not to be recorded."""
    try_logs: dict[str, bytes] = field(default_factory=dict)
    """With ``tries``: the later tries' audit logs by file name (``audit.try2.jsonl``
    ...); ``log`` is the first try's, and the outcome's ``log`` names the last's."""

    @property
    def status(self) -> str:
        """The outcome's status."""
        return str(self.outcome["status"])


def failed(job: Job, reason: str, **facts: Any) -> dict[str, Any]:
    """The outcome line of a job that ended ``failed`` without an attempt's outcome."""
    return {**Outcome("failed", reason).to_json(), "exit_code": exit_code_of("failed", None),
            **_facts(job), **facts}  # fmt: skip


def died(job: Job, error: Exception) -> JobResult:
    """The result of a job whose run raised instead of returning: ``failed``,
    naming the error's type and first words (the traceback goes to the
    operational log), so the batch writes it and goes on."""
    logger.error("a job failed in the governor", job=job.id, exc_info=error)
    first: BaseException = error
    while isinstance(first, BaseExceptionGroup) and first.exceptions:
        first = first.exceptions[0]
    words = f"{type(first).__name__}: {first}"[:300]
    outcome = failed(job, f"the governor failed while running this job: {words}")
    outcome["host"], outcome["pid"] = socket.gethostname(), os.getpid()
    return JobResult(job.id, outcome, b"", b"", False, {})


def _facts(job: Job) -> dict[str, Any]:
    return {"repo": shown_url(job.repo), "ref": job.ref}


async def run_job(
    job: Job,
    *,
    ceiling: Ceiling | None = None,
    stop: trio.Event | None = None,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    scratch: str | Path | None = None,
) -> JobResult:
    """Clone the job's repository at its ref into a fresh workspace, run its
    attempt, take the diff, and return everything as a `JobResult`; the
    workspace is removed. ``scratch`` is where the temporary folder goes
    (default: the system's)."""
    started = time.monotonic()
    folder = Path(tempfile.mkdtemp(prefix=f"governor-batch-{job.id}-", dir=scratch))
    log_path = folder / "audit.jsonl"
    with structlog.contextvars.bound_contextvars(job=job.id):
        try:
            outcome, patch = await _run(job, folder, log_path, ceiling, stop, on_event)
        finally:
            log = log_path.read_bytes() if log_path.exists() else b""
            later = {
                p.name: p.read_bytes()
                for n in range(2, job.tries + 1)
                if (p := try_log(log_path, n)) is not None and p.exists()
            }
            with trio.CancelScope(shield=True):  # removed even when the job is cancelled
                await trio.to_thread.run_sync(_remove, folder)
    outcome["host"], outcome["pid"] = socket.gethostname(), os.getpid()
    outcome["job_s"] = round(time.monotonic() - started, 3)
    interrupted = stop is not None and stop.is_set()
    return JobResult(job.id, outcome, patch, log, interrupted, later)


async def _run(
    job: Job,
    folder: Path,
    log_path: Path,
    ceiling: Ceiling | None,
    stop: trio.Event | None,
    on_event: Callable[[str, dict[str, Any]], None] | None,
) -> tuple[dict[str, Any], bytes]:
    at = f" at {job.ref}" if job.ref else ""
    try:
        workspace = await clone(job.repo, job.ref, folder / job.id)
    except GitFailed as e:
        words = str(e).replace(job.repo, shown_url(job.repo))
        return failed(job, f"could not clone {shown_url(job.repo)}{at}: {words}"), b""
    facts = {**_facts(job), "commit": workspace.commit}
    if stop is not None and stop.is_set():  # stopped while cloning: start no agent
        return {**failed(job, "interrupted before its attempt"), **facts}, b""
    spec = job.spec(workspace.path, log_path, ceiling=ceiling, on_event=on_event)
    refused = False
    try:
        outcome = (await run_tries(spec, job.tries, stop=stop, scratch=folder)).to_json()
    except RefusedBeforeStart as e:
        outcome = failed(job, "refused before start: " + "; ".join(e.problems))
        refused = True
    outcome.update(facts)
    try:
        patch = await changes(workspace)
    except (GitFailed, trio.TooSlowError) as e:
        done = f" (the attempt was {outcome['status']})" if outcome["status"] != "failed" else ""
        outcome["status"] = "failed"
        outcome["reason"] = f"the workspace's changes could not be taken{done}: {e}"
        patch = b""
    # the code `governor run` would exit with for this job
    code = exit_code_of(outcome["status"], outcome.get("verdict"))
    outcome["exit_code"] = REFUSED_BEFORE_START if refused else code
    return outcome, patch


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
