"""Many attempts: a jobs file in, an output folder out, on a local pool or on Ray.

Rooms (each module opens with its rules):

- `jobs`: the jobs file, every bad line named before anything runs;
- `clone`: a job's workspace (a fresh clone at its ref) and its diff;
- `work`: one job start to end, wherever it runs, as plain values;
- `output`: the output folder and its commit point (resume after a crash);
- `local`: the local pool (trio, one process);
- `cluster`: Ray (an optional extra);
- `runner`: `run_batch`, which puts them together;
- `results`: what a batch reports and returns.

For loop authors::

    from governor.batch import run_batch

    result = run_batch("jobs.jsonl", "out/", parallel=4)
    for job in result.results:
        print(job.job, job.status, job.changes)

Names are imported lazily, so that `governor batch` and the Ray workers import
only what they use.

May import: every room below it and the face; never the command line (which
imports it: its exit codes come from `governor.ending.exit_codes`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "BadJobs",
    "BatchResult",
    "Event",
    "Job",
    "JobOutcome",
    "RayOptions",
    "RayUnavailable",
    "run_batch",
    "run_batch_async",
]

if TYPE_CHECKING:
    from governor.batch.cluster import RayOptions, RayUnavailable
    from governor.batch.jobs import BadJobs, Job
    from governor.batch.results import BatchResult, Event, JobOutcome
    from governor.batch.runner import run_batch, run_batch_async

_LAZY = {
    "BadJobs": "governor.batch.jobs",
    "Job": "governor.batch.jobs",
    "BatchResult": "governor.batch.results",
    "Event": "governor.batch.results",
    "JobOutcome": "governor.batch.results",
    "RayOptions": "governor.batch.cluster",
    "RayUnavailable": "governor.batch.cluster",
    "run_batch": "governor.batch.runner",
    "run_batch_async": "governor.batch.runner",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'governor.batch' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
