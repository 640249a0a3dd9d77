"""`run_batch`: a jobs file (or jobs) in, an output folder and a `BatchResult` out.

The order is fixed: the jobs are read and every one checked (`BadJobs`,
nothing started), the output folder is opened (what an earlier run finished
is skipped), then the jobs run on the local pool or on Ray.

What the batch reads and writes on the host for the operator (`operator_paths`:
the output folder, the jobs file, the policy and ceiling files it names) is
hidden from every sandbox of every job, on the pool and on Ray alike, as the
job's source repository is: where it lay outside the homes, a later job read
the earlier jobs' patches, logs and outcomes and every job's prompt and checks.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import trio

from governor.batch.jobs import BadJobs, Job, as_jobs, by_line, check_jobs, read_jobs
from governor.batch.local import default_parallel, run_local
from governor.batch.output import Output
from governor.batch.results import BatchResult, Event, JobOutcome, OnProgress
from governor.policies.ceiling import Ceiling

Jobs = str | Path | Iterable[Job | Mapping[str, Any]]


def prepare_jobs(
    jobs: Jobs, ceiling: Ceiling | str | Path | None = None
) -> tuple[list[Job], Ceiling]:
    """The jobs read (a jobs file's path, or `Job`s and dicts) and checked
    against the ceiling in force, with that ceiling; `BadJobs` with every
    problem of every job."""
    if isinstance(jobs, str | Path):
        loaded, problems = read_jobs(jobs)
    else:
        try:
            loaded, problems = as_jobs(jobs), []
        except BadJobs as e:
            raise BadJobs(e.problems) from None
    bound = _ceiling(ceiling)
    try:
        checked = check_jobs(loaded, bound)
    except BadJobs as e:
        problems += e.problems
    if problems:
        where = f"{jobs}: " if isinstance(jobs, str | Path) else ""
        raise BadJobs([where + p for p in by_line(problems)])
    return checked, bound


def _ceiling(value: Ceiling | str | Path | None) -> Ceiling:
    from governor.job.ceiling_source import load_ceiling
    from governor.policies.errors import ConfigError

    if isinstance(value, Ceiling):
        return value
    try:
        return load_ceiling(None if value is None else str(value))
    except ConfigError as e:
        raise BadJobs([str(e)]) from None


def run_batch(
    jobs: Jobs,
    out: str | Path,
    *,
    parallel: int | None = None,
    ray: str | None = None,
    ray_options: Any = None,
    ceiling: Ceiling | str | Path | None = None,
    on_progress: OnProgress | None = None,
    handle_signals: bool = False,
) -> BatchResult:
    """Run a batch: every job not yet finished in ``out``, ``parallel`` at a time
    in this process (default: `default_parallel`), or as tasks on the Ray
    cluster at ``ray`` (``"auto"`` or ``"127.0.0.1:6379"``; `ray_options`, a
    `governor.batch.cluster.RayOptions`, declares their resources).

    Raises `BadJobs` (nothing started) when a job is bad. With
    ``handle_signals`` (main thread only), SIGINT and SIGTERM stop the batch
    cleanly: no job starts, running attempts are ended and thrown away, and
    the result says ``interrupted``; a rerun with the same ``out`` resumes.
    """
    checked, bound = prepare_jobs(jobs, ceiling)
    report = on_progress or _nobody
    with Output(out) as output:
        earlier = _skip(checked, output, report)
        conceal = operator_paths(jobs, output.root, checked, ceiling)
        _refuse_hidden_needs(checked, conceal)
        if ray is not None:
            interrupted = _on_ray(
                checked, output, ray, bound, ray_options, report, handle_signals, conceal
            )
        else:
            interrupted = trio.run(
                _local,
                checked,
                output,
                parallel or default_parallel(),
                bound,
                report,
                handle_signals,
                conceal,
            )
        return _result(checked, output, earlier, interrupted)


async def run_batch_async(
    jobs: Jobs,
    out: str | Path,
    *,
    parallel: int | None = None,
    ceiling: Ceiling | str | Path | None = None,
    on_progress: OnProgress | None = None,
    stop: trio.Event | None = None,
) -> BatchResult:
    """`run_batch` on the local pool, under trio; setting ``stop`` interrupts it."""
    checked, bound = prepare_jobs(jobs, ceiling)
    report = on_progress or _nobody
    with Output(out) as output:
        earlier = _skip(checked, output, report)
        stop = stop or trio.Event()
        conceal = operator_paths(jobs, output.root, checked, ceiling)
        _refuse_hidden_needs(checked, conceal)
        await run_local(
            checked,
            output,
            parallel=parallel or default_parallel(),
            ceiling=bound,
            stop=stop,
            on_progress=report,
            conceal=conceal,
        )
        return _result(checked, output, earlier, stop.is_set())


async def _local(
    jobs: list[Job],
    output: Output,
    parallel: int,
    ceiling: Ceiling,
    report: OnProgress,
    handle_signals: bool,
    conceal: tuple[str, ...],
) -> bool:
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        if handle_signals:
            nursery.start_soon(_stop_on_signal, stop, report)
        await run_local(
            jobs,
            output,
            parallel=parallel,
            ceiling=ceiling,
            stop=stop,
            on_progress=report,
            conceal=conceal,
        )
        nursery.cancel_scope.cancel()
    return stop.is_set()


async def _stop_on_signal(stop: trio.Event, report: OnProgress) -> None:
    """The first SIGINT or SIGTERM sets ``stop``; later ones are ignored (the
    running attempts' shutdown is bounded)."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async for signum in signals:
            if not stop.is_set():
                report(Event("interrupted", info=signal.Signals(signum).name))
                stop.set()


def _on_ray(
    jobs: list[Job],
    output: Output,
    address: str,
    ceiling: Ceiling,
    options: Any,
    report: OnProgress,
    handle_signals: bool,
    conceal: tuple[str, ...],
) -> bool:
    from governor.batch.cluster import RayOptions, run_on_ray

    previous = None
    if handle_signals:  # SIGTERM as Ctrl-C: the tasks are cancelled, not orphaned
        previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        return run_on_ray(
            jobs,
            output,
            address=address,
            ceiling=ceiling,
            options=options or RayOptions(),
            on_progress=report,
            conceal=conceal,
        )
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)


def operator_paths(
    jobs: Jobs, out: Path, checked: Iterable[Job], ceiling: Ceiling | str | Path | None
) -> tuple[str, ...]:
    """The host paths a batch reads or writes for its operator, never for a
    job: the output folder (every finished job's patch, log and outcome line),
    the jobs file (every job's prompt, argv and checks), each policy file a job
    names (not a shipped one, which is the governor's) and the ceiling file;
    each resolved. The jobs' sandboxes mask them (`run_job`'s ``conceal``);
    one inside a job's workspace is left to the workspace's rules, and one
    that does not exist is skipped by the survey."""
    from governor.job.policy_files import shipped_policies
    from governor.policies.policy import Policy

    shipped = {os.path.realpath(p) for p in shipped_policies().values()}
    found = [out]
    if isinstance(jobs, str | Path):
        found.append(Path(jobs))
    for job in checked:
        if isinstance(job.policy, Policy) and os.path.isfile(job.policy.source):
            found.append(Path(job.policy.source))
    if isinstance(ceiling, str | Path):
        found.append(Path(ceiling))
    resolved = (os.path.realpath(os.path.expanduser(p)) for p in found)
    return tuple(dict.fromkeys(p for p in resolved if p not in shipped))


def _refuse_hidden_needs(jobs: Iterable[Job], conceal: tuple[str, ...]) -> None:
    """`BadJobs` naming each job whose agent program (an ``argv`` entry that is a
    file or folder) lies inside a path the batch hides from its sandboxes
    (``--out DIR`` holding the agent's script): the job would fail inside
    with a file that is not there, not say why."""
    problems = []
    for job in jobs:
        for arg in job.argv or ():
            if not os.path.isabs(arg) or not os.path.exists(arg):
                continue
            real = os.path.realpath(arg)
            hiding = next((c for c in conceal if real == c or real.startswith(c + os.sep)), None)
            if hiding is not None:
                problems.append(
                    f"{job.where}: key 'argv': {arg} is inside {hiding}, which every job's "
                    "sandbox hides (the batch's output folder, jobs, policy or ceiling "
                    "file): keep the agent elsewhere"
                )
    if problems:
        raise BadJobs(problems)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _result(jobs: list[Job], output: Output, earlier: set[str], interrupted: bool) -> BatchResult:
    result = BatchResult(output.root, interrupted=interrupted)
    for job in jobs:
        line = output.finished.get(job.id)
        if line is None:
            result.not_run.append(job.id)
        else:
            result.results.append(JobOutcome(job.id, line, earlier=job.id in earlier))
    return result


def _skip(jobs: list[Job], output: Output, report: OnProgress) -> set[str]:
    """Report the jobs an earlier run finished, then how many are left; the
    finished ids."""
    earlier = set(output.finished)
    for job in jobs:
        if job.id in earlier:
            report(Event("skipped", job.id, output.finished[job.id]))
    report(Event("queued", count=sum(1 for j in jobs if j.id not in earlier)))
    return earlier


def _nobody(event: Event) -> None:
    pass
