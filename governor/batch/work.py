"""One job, start to end, wherever it runs (the local pool or a Ray worker):
clone, attempt, diff, and the result as plain values.

Rules of this file:

- **A job always ends as a `JobResult`.** A clone that fails, an attempt
  refused before start (a node that cannot sandbox included), a diff that
  cannot be taken: each is a ``failed`` outcome whose reason names the step.
  Only an interruption (`stop` set, Ctrl-C) makes a result the caller must
  not record, flagged `JobResult.interrupted`.
- **Nothing is left behind.** The workspace and the log are made in a fresh
  folder of the job's own (never inside the batch's output, where a half-made
  job could be mistaken for a finished one) and removed however the job ends;
  what outlives it is in the result: the outcome, the patch and the log's
  bytes, for the caller to write.
- **No job sees another's, nor its source.** That folder is the governor's
  (`governor.confine.attempt_folders`), hidden from every sandbox whatever
  ``TMPDIR`` is: a job's sandboxes get back its workspace only, never another
  job's workspace, live log or tries copy. A local source repository (and
  its git dir, for a worktree) is masked in every sandbox of the job
  (`governor.job.spec.AttemptSpec.concealed`): the agent clones nothing and
  finds nothing of the source, its later commits included. What the
  batch reads and writes for the operator (``conceal``: its output folder,
  the jobs file, the policy and ceiling files it names,
  `governor.batch.runner.operator_paths`) is masked the same way: a later
  job reads no earlier job's patch, log or outcome, nor any job's prompt,
  argv or checks.
- **The patch is streamed**, a chunk at a time, into the caller's file
  (``patch_to``: the output's, on the local pool) or, on a Ray worker, into
  bytes it returns; either way bounded by the job's ``[limits] patch``:
  past it the job is ``failed``, saying so, with an empty patch.
"""

from __future__ import annotations

import functools
import os
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import structlog
import trio

from governor.attempt.tries import run_tries, try_log
from governor.batch.clone import GitFailed, PatchTooLarge, changes_into, clone, git, shown_url
from governor.batch.jobs import Job, is_url
from governor.boundary import folders
from governor.confine.attempt_folders import NoAttemptFolder, attempt_folder
from governor.ending.exit_codes import REFUSED_BEFORE_START, exit_code_of
from governor.ending.outcome import Outcome
from governor.job.spec import RefusedBeforeStart
from governor.policies.ceiling import Ceiling
from governor.policies.limits import DEFAULTS, Limits, size_text
from governor.policies.policy import Policy

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
    patch_streamed: bool = False
    """The patch went to the caller's ``patch_to`` (``patch`` is empty): the
    writer commits that file instead."""

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
    patch_to: int | None = None,
    conceal: Sequence[str] = (),
) -> JobResult:
    """Clone the job's repository at its ref into a fresh workspace, run its
    attempt, take the diff, and return everything as a `JobResult`; the
    workspace is removed. ``patch_to``: a descriptor open for writing (an
    empty file) that the patch is streamed into; None: it comes back as
    bytes (bounded all the same). ``conceal``: the batch's own host paths
    (`governor.batch.runner.operator_paths`), masked in every sandbox of
    the job besides its source repository."""
    started = time.monotonic()
    try:
        folder = attempt_folder(f"batch-{job.id}-")
    except NoAttemptFolder as e:
        return JobResult(job.id, failed(job, str(e)), b"", b"")
    log_path = folder / "audit.jsonl"
    with structlog.contextvars.bound_contextvars(job=job.id):
        try:
            outcome, patch = await _run(
                job, folder, log_path, ceiling, stop, on_event, patch_to, conceal
            )
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
    return JobResult(job.id, outcome, patch, log, interrupted, later, patch_to is not None)


async def _run(
    job: Job,
    folder: Path,
    log_path: Path,
    ceiling: Ceiling | None,
    stop: trio.Event | None,
    on_event: Callable[[str, dict[str, Any]], None] | None,
    patch_to: int | None,
    conceal: Sequence[str],
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
    hidden = (*spec.concealed, *conceal, *await sources(job.repo))
    spec = replace(spec, concealed=tuple(dict.fromkeys(hidden)))
    refused = False
    try:
        outcome = (await run_tries(spec, job.tries, stop=stop, scratch=folder)).to_json()
    except RefusedBeforeStart as e:
        outcome = failed(job, "refused before start: " + "; ".join(e.problems))
        refused = True
    outcome.update(facts)
    most = patch_bound(job, ceiling)
    kept = bytearray()
    write = kept.extend if patch_to is None else functools.partial(_write_all, patch_to)
    done = f" (the attempt was {outcome['status']})" if outcome["status"] != "failed" else ""
    try:
        outcome["patch_bytes"] = await changes_into(workspace, write, most)
    except PatchTooLarge:
        outcome["status"] = "failed"
        outcome["reason"] = (
            f"its changes make a patch over the patch limit {size_text(most)}{done}; "
            "no patch kept (raise [limits] patch to keep one)"
        )
        kept.clear()
        _empty(patch_to)
    except GitFailed as e:
        outcome["status"] = "failed"
        outcome["reason"] = f"the workspace's changes could not be taken{done}: {e}"
        kept.clear()
        _empty(patch_to)
    patch = bytes(kept)
    # the code `governor run` would exit with for this job
    code = exit_code_of(outcome["status"], outcome.get("verdict"))
    outcome["exit_code"] = REFUSED_BEFORE_START if refused else code
    return outcome, patch


def patch_bound(job: Job, ceiling: Ceiling | None) -> int:
    """The bytes the job's patch may take: its ``[limits] patch``, else the
    default lowered to the ceiling's ``max_patch``."""
    limits = job.policy.limits if isinstance(job.policy, Policy) else Limits()
    bound = limits.effective(None if ceiling is None else ceiling.max_limits).patch
    return bound if bound is not None else int(DEFAULTS.patch or 0)


async def sources(repo: str) -> tuple[str, ...]:
    """The host folders a job's local repository ``repo`` lives in (none for a
    URL): the folder, and its git dir's common folder when that lies outside it
    (a linked worktree's repository), each resolved."""
    if is_url(repo) and not repo.startswith("file://"):
        return ()
    path = os.path.realpath(os.path.expanduser(repo.removeprefix("file://")))
    if not os.path.isdir(path):
        return ()
    found = [path]
    try:
        said = await git("rev-parse", "--path-format=absolute", "--git-common-dir", cwd=Path(path))
    except GitFailed:
        return tuple(found)  # not a repository git knows: the clone says why
    common = os.path.realpath(said.strip())
    if said.strip() and not common.startswith(path + os.sep):
        found.append(common)
    return tuple(found)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _empty(fd: int | None) -> None:
    """Cut the streamed patch back to nothing (a cut patch would apply half)."""
    if fd is not None:
        os.ftruncate(fd, 0)


def _remove(folder: Path) -> None:
    """The job's folder gone, folders the agent locked included (the tries'
    delete); one that still cannot go is said, never silently left."""
    try:
        folders.remove(folder)
    except OSError as e:
        logger.warning("cannot remove a job's folder", folder=str(folder), error=str(e))
