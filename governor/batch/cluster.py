"""The Ray runner: each job a Ray task; the driver (this process) writes the
results to the output folder exactly as the local pool does.

Rules of this file:

- **Ray schedules, retries and scales; we write no scheduler.** A task
  declares its resources (``num_cpus``, ``memory``), is retried by Ray when its
  worker or node is lost (``max_retries``) and never when it raised
  (``retry_exceptions=False``): an agent that failed is an outcome, returned
  like any other, not an exception.
- **A worker returns values, the driver writes.** The task clones, runs and
  diffs on its node (`governor.batch.work.run_job`) and returns the
  `JobResult` (outcome, patch bytes, log bytes); only the driver touches the
  output folder, so its commit point (`governor.batch.output`) holds on a
  cluster too.
- **Each node's sandbox is checked once**, by one task pinned to it
  (`governor.sandbox.run.preflight`) before any job is sent; a node that cannot sandbox
  refuses its jobs with the reason in their outcomes (a full-access job needs
  no sandbox and still runs). The attempt's own preflight stays: it is the
  one that fails closed.
- **Ctrl-C cancels** (`ray.cancel`): each running task gets a
  KeyboardInterrupt, which ends its attempt the way trio ends one (the
  agent's tree killed, the workspace removed); results already back are kept.

Ray is an optional extra (``pip install 'acp-governor[ray]'``), imported only
here and only when ``--ray`` is given.
"""

from __future__ import annotations

import logging
import socket
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

import trio

from governor.batch.jobs import Job
from governor.batch.output import Output
from governor.batch.results import Event, OnProgress
from governor.batch.work import JobResult, failed, run_job
from governor.policies.capability import Capability
from governor.policies.ceiling import Ceiling
from governor.policies.policy import Policy

INSTALL: Final = "pip install 'acp-governor[ray]'"
TASK_PREFIX: Final = "governor-batch:"
"""Each task's name (and its worker's process title, ``ray::governor-batch:ID``)."""
CANCEL_WAIT: Final = 30.0
"""Seconds the driver waits after Ctrl-C for the cancelled tasks to wind down."""


class RayUnavailable(Exception):
    """Ray is not installed, or the cluster cannot be reached."""


@dataclass(frozen=True, slots=True)
class RayOptions:
    """How each job's task is declared to Ray."""

    num_cpus: float = 1.0
    memory: int = 2**30
    """Bytes of Ray's ``memory`` resource per task (a scheduling reservation)."""
    max_retries: int = 3
    """Times a task is run again when its worker or node is lost."""
    runtime_env: dict[str, Any] | None = None
    """Ray's runtime environment for the tasks (e.g. ``{"pip": ["acp-governor"]}``
    on a cluster whose nodes do not have the package)."""
    in_flight: int | None = None
    """Tasks submitted at once (default: as many as the cluster has room for)."""


def import_ray() -> Any:
    """The ``ray`` module, or `RayUnavailable` saying how to install it."""
    try:
        import ray
    except ImportError:
        raise RayUnavailable(f"--ray needs Ray, which is not installed here: {INSTALL}") from None
    return ray


# -- on the workers ---------------------------------------------------------------------


def check_node() -> tuple[str, str | None, str]:
    """A task pinned to one node: its id, why it cannot sandbox (None when it
    can), and what it runs (host, bwrap version)."""
    import ray

    from governor.confine.sandboxes import configured_bwrap
    from governor.sandbox import BwrapUnavailable
    from governor.sandbox.run.preflight import preflight

    node = ray.get_runtime_context().get_node_id()
    host = socket.gethostname()
    try:
        bwrap = trio.run(preflight, configured_bwrap())
    except BwrapUnavailable as e:
        return node, f"node {host} cannot sandbox: {e}", host
    return node, None, f"{host}: bwrap {bwrap.version}"


def job_task(
    job: Job, ceiling: Ceiling, refused: dict[str, str], conceal: Sequence[str] = ()
) -> JobResult:
    """One job on a worker: refused when its node cannot sandbox, else cloned,
    run and diffed there (`run_job`), the batch's own paths (``conceal``, the
    driver's: where a node shares its file system they are there too)
    hidden from its sandboxes."""
    import ray

    reason = refused.get(ray.get_runtime_context().get_node_id())
    if reason is not None and _sandboxed(job):
        outcome = failed(job, f"refused before start: {reason}")
        outcome["host"] = socket.gethostname()
        return JobResult(job.id, outcome, b"", b"")
    return trio.run(partial(run_job, job, ceiling=ceiling, conceal=conceal))


def _sandboxed(job: Job) -> bool:
    if job.capability is not None:
        capability = Capability.parse(job.capability)
    elif isinstance(job.policy, Policy):
        capability = job.policy.capability
    else:
        capability = Capability.READ_ONLY
    return capability < Capability.FULL_ACCESS


# -- the driver -------------------------------------------------------------------------


def run_on_ray(
    jobs: Sequence[Job],
    output: Output,
    *,
    address: str,
    ceiling: Ceiling,
    options: RayOptions,
    on_progress: OnProgress,
    conceal: Sequence[str] = (),
) -> bool:
    """Run every job not yet finished in ``output`` as a Ray task on the cluster
    at ``address``, writing each result as it comes back; ``conceal``: the
    batch's own host paths, hidden from every job's sandboxes. Returns whether the
    batch was interrupted (KeyboardInterrupt: the tasks still running are
    cancelled; results already back are written)."""
    ray = import_ray()
    try:
        ray.init(
            address=address,
            namespace="acp-governor",
            log_to_driver=False,
            logging_level=logging.WARNING,
            runtime_env=options.runtime_env,
        )
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise RayUnavailable(f"cannot reach the Ray cluster at {address}: {e}") from None
    try:
        return _drive(ray, jobs, output, ceiling, options, on_progress, conceal)
    finally:
        ray.shutdown()


def _drive(
    ray: Any,
    jobs: Sequence[Job],
    output: Output,
    ceiling: Ceiling,
    options: RayOptions,
    on_progress: OnProgress,
    conceal: Sequence[str],
) -> bool:
    task = ray.remote(
        num_cpus=options.num_cpus,
        memory=options.memory,
        max_retries=options.max_retries,
        retry_exceptions=False,
    )(job_task)
    waiting = deque(j for j in jobs if j.id not in output.finished)
    pending: dict[Any, Job] = {}
    refused: dict[str, str] = {}

    def submit() -> None:
        room = options.in_flight or _room(ray, options.num_cpus)
        while waiting and len(pending) < room:
            job = waiting.popleft()
            ref = task.options(name=f"{TASK_PREFIX}{job.id}").remote(
                job, ceiling, refused, tuple(conceal)
            )
            pending[ref] = job
            on_progress(Event("started", job.id))

    def collect(ready: list[Any]) -> None:
        for ref in ready:
            job = pending.pop(ref)
            line = output.write(_result(ray, ref, job))
            on_progress(Event("finished", job.id, line))

    try:
        refused = _check_nodes(ray, on_progress)
        submit()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            if ready:  # and whatever else is back by now
                ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0)
            collect(ready)
            submit()
    except KeyboardInterrupt:
        on_progress(Event("interrupted", info="interrupted"))
        _cancel(ray, pending, output, on_progress)
        return True
    return False


def _room(ray: Any, num_cpus: float) -> int:
    """How many tasks the cluster can run at once now (at least 1)."""
    cpus = float(ray.cluster_resources().get("CPU", 0))
    return max(1, int(cpus // num_cpus) if num_cpus > 0 else len(ray.nodes()))


def _check_nodes(ray: Any, on_progress: OnProgress) -> dict[str, str]:
    """Run `check_node` once on every live node; node id -> why it refuses."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    check = ray.remote(check_node)
    refs = [
        check.options(
            num_cpus=0,
            name=f"{TASK_PREFIX}check-node",
            scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False),
        ).remote()
        for node in ray.nodes()
        if node.get("Alive")
    ]
    refused: dict[str, str] = {}
    for node, reason, what in ray.get(refs):
        if reason is not None:
            refused[node] = reason
        on_progress(Event("node", info=reason or f"{what}: sandbox ok"))
    return refused


def _result(ray: Any, ref: Any, job: Job) -> JobResult:
    """The task's `JobResult`, or a ``failed`` one naming what Ray reported (a
    worker lost more often than ``max_retries``, a task that raised)."""
    try:
        result: JobResult = ray.get(ref)
        return result
    except ray.exceptions.RayTaskError as e:
        reason = f"the job raised on its Ray worker: {str(e).strip().splitlines()[-1][:500]}"
    except ray.exceptions.RayError as e:
        first = str(e).strip().splitlines()[0][:500] if str(e).strip() else type(e).__name__
        reason = f"Ray could not run the job ({type(e).__name__}): {first}"
    return JobResult(job.id, failed(job, reason), b"", b"")


def _cancel(ray: Any, pending: dict[Any, Job], output: Output, on_progress: OnProgress) -> None:
    """Cancel what is still running, keep what finished meanwhile, and give the
    cancelled tasks a bounded time to end their attempts (a second Ctrl-C
    stops waiting)."""
    for ref in pending:
        ray.cancel(ref)
    deadline = time.monotonic() + CANCEL_WAIT
    try:
        while pending and time.monotonic() < deadline:
            ready, _ = ray.wait(list(pending), num_returns=len(pending), timeout=0.5)
            for ref in ready:
                job = pending.pop(ref)
                try:
                    result: JobResult = ray.get(ref)
                except ray.exceptions.RayError:
                    result = JobResult(job.id, {}, b"", b"", interrupted=True)
                if result.interrupted:
                    on_progress(Event("interrupted", job.id))
                else:  # it was done before the cancel reached it
                    on_progress(Event("finished", job.id, output.write(result)))
    except KeyboardInterrupt:
        pass
    for job in pending.values():
        on_progress(Event("interrupted", job.id))
