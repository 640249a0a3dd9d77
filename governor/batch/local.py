"""The local pool: up to N jobs at once, in this process, under one trio nursery.

Each job is its own attempt with its own sandbox; they share the process, the
preflight and the startup costs (imports, the schema's validators), which is
most of why N attempts here are cheaper than N `governor run`s. Attempts
mostly wait (on the model, on their agent), so N may exceed the cores.

A job whose run raises (a bug, a host out of descriptors) is written
``failed`` naming the error (`governor.batch.work.died`), and the pool goes
on: one job never loses the others.

Stopping (``stop`` set, e.g. by Ctrl-C): no job starts any more, each running
attempt is ended the way a timeout ends it (cancel, grace, its agent's tree
killed), and its result is thrown away (`JobResult.interrupted`): the job is
not finished and a rerun runs it again.

The pool's size (`default_parallel`) is in ``governor batch --help``: trio and
the attempt are imported by `run_local`, not with this module.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import trio

    from governor.batch.jobs import Job
    from governor.batch.output import Output
    from governor.batch.results import OnProgress
    from governor.policies.ceiling import Ceiling

PER_CORE: Final = 2
"""Attempts at once per core: an attempt mostly waits on its agent and the model."""
MEMORY_PER_ATTEMPT: Final = 2**30
"""Memory set aside for one attempt (a real agent is a Node.js process of a few
hundred MB; the governor's part is tens of MB)."""
MOST: Final = 32


def default_parallel() -> int:
    """The default ``--jobs``: `PER_CORE` per core, at most one per `MEMORY_PER_ATTEMPT`
    of available memory, at most `MOST`, at least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    by_cpu = PER_CORE * (cores or 1)
    available = _available_memory()
    by_memory = by_cpu if available is None else available // MEMORY_PER_ATTEMPT
    return max(1, min(by_cpu, by_memory, MOST))


def _available_memory() -> int | None:
    """``MemAvailable`` from ``/proc/meminfo``, in bytes (None where there is none)."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


async def run_local(
    jobs: Sequence[Job],
    output: Output,
    *,
    parallel: int,
    ceiling: Ceiling,
    stop: trio.Event,
    on_progress: OnProgress,
    conceal: Sequence[str] = (),
) -> None:
    """Run every job not yet finished in ``output``, ``parallel`` at a time,
    writing each result as it comes; returns when all are done or, after
    ``stop``, when the running ones have wound down. ``conceal``: the batch's
    own host paths, hidden from every job's sandboxes (`run_job`)."""
    import trio

    from governor.batch.results import Event
    from governor.batch.work import died, run_job

    waiting = iter([j for j in jobs if j.id not in output.finished])

    async def worker() -> None:
        for job in waiting:  # one iterator shared by the workers: each job taken once
            if stop.is_set():
                return
            on_progress(Event("started", job.id))
            # the patch is streamed into the output's file as git makes it, never held
            patch = await trio.to_thread.run_sync(output.patch_file, job.id)
            try:
                try:
                    result = await run_job(
                        job, ceiling=ceiling, stop=stop, patch_to=patch, conceal=conceal
                    )
                except Exception as e:  # this job's end, never the pool's: the others go on
                    result = died(job, e)
                if result.interrupted:
                    on_progress(Event("interrupted", job.id))
                    continue
                streamed = patch if result.patch_streamed else None
                line = await trio.to_thread.run_sync(output.write, result, streamed)
            finally:
                os.close(patch)
                output.drop_patch(job.id)
            on_progress(Event("finished", job.id, line))

    async with trio.open_nursery() as nursery:
        for _ in range(max(1, parallel)):
            nursery.start_soon(worker)
