"""`governor batch`: a jobs file run on a local pool or a Ray cluster, with a live
progress display and a summary table (`governor.batch` does the work)."""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from collections import Counter
from typing import Any, Final, TextIO

from governor.cli import REFUSED_BEFORE_START
from governor.policies.limits import parse_size

EXIT: Final = """exit codes:
  0  every job completed
  1  a job did not complete (failed, blocked, incomplete, needs approval), or the
     batch was interrupted (rerun the same command to resume)
  2  refused before start: a bad jobs line (every one is named), the ceiling, an
     output folder in use, Ray missing or unreachable (nothing ran)
"""

JOB_FORMAT: Final = """A job is one JSON object per line: id, prompt, agent (a preset) or argv
(your ACP command), repo (a path, relative to the jobs file, or a git URL),
optional ref, and any of: policy, capability, model, mode, timeout, env,
extra_dirs, sandbox_agent, agent_args, append_rules, kind, approvals
(unattended|pause), durability, checks (shell lines run after the attempt: the verdict), tries (attempts at most while the verdict is failed).

Output: DIR/outcomes.jsonl (one outcome per finished job, with "job"),
DIR/<id>/audit.jsonl, DIR/<id>/changes.patch (the diff against ref, new files
included; git apply it to a clone at ref). A rerun with the same --out skips
finished jobs."""


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `batch` subcommand."""
    from governor.batch.local import MEMORY_PER_ATTEMPT, MOST, PER_CORE, default_parallel

    p = sub.add_parser(
        "batch",
        help="run a jobs file: one governed attempt per job, on a local pool or Ray",
        description="Run every job of JOBS.jsonl: each in a fresh clone of its repository at "
        "its ref, governed, sandboxed and logged like `governor run`.\n\n" + JOB_FORMAT,
        usage="governor batch JOBS.jsonl --out DIR [--jobs N] [--ray ADDRESS] [OPTIONS]",
        epilog=EXIT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("jobs_file", metavar="JOBS.jsonl", help="the jobs, one JSON object per line")
    p.add_argument(
        "--out", metavar="DIR", required=True, help="the output folder (made if missing)"
    )
    p.add_argument(
        "--jobs",
        metavar="N",
        type=_positive,
        help=f"attempts at once (default: {PER_CORE} per core, at most one per "
        f"{MEMORY_PER_ATTEMPT // 2**30} GiB of available memory, at most {MOST}: "
        f"{default_parallel()} here); with --ray, tasks in flight (default: what the "
        "cluster has room for)",
    )
    p.add_argument(
        "--ray",
        metavar="ADDRESS",
        help="run each job as a task on this Ray cluster (`auto`, or HOST:PORT of the head); "
        "needs pip install 'acp-governor[ray]'",
    )
    p.add_argument("--ceiling", metavar="FILE", help="the operator's ceiling for every job")
    p.add_argument(
        "--ray-cpus",
        metavar="C",
        type=float,
        default=1.0,
        help="CPUs each task declares (default 1)",
    )
    p.add_argument(
        "--ray-memory",
        metavar="SIZE",
        default="1G",
        help="memory each task declares to Ray's scheduler, e.g. 512M, 2G (default 1G)",
    )
    p.add_argument(
        "--ray-retries",
        metavar="N",
        type=int,
        default=3,
        help="times a task is rerun when its worker or node is lost (default 3; never when the "
        "agent failed)",
    )
    p.add_argument(
        "--ray-runtime-env",
        metavar="JSON",
        help='Ray runtime environment for the tasks, e.g. \'{"pip": ["acp-governor"]}\' when the '
        "nodes do not have the package",
    )
    p.add_argument("--json", action="store_true", help="print the per-job results as JSON")
    p.set_defaults(func=main)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def main(args: argparse.Namespace) -> int:
    """Check every job, run the batch, print the summary; the exit code."""
    from governor.batch.cluster import RayOptions, RayUnavailable, import_ray
    from governor.batch.jobs import BadJobs
    from governor.batch.output import OutputBusy, OutputUnsafe
    from governor.batch.runner import run_batch
    from governor.boundary import spelling
    from governor.cli.run import freeze_startup_heap
    from governor.observe import logs

    logs.configure(json_lines=not sys.stderr.isatty())
    options = None
    try:
        if args.ray is not None:
            import_ray()  # before anything else: say how to install it
            options = RayOptions(
                num_cpus=args.ray_cpus,
                memory=parse_size(args.ray_memory),
                max_retries=args.ray_retries,
                runtime_env=json.loads(args.ray_runtime_env) if args.ray_runtime_env else None,
                in_flight=args.jobs,
            )
        progress = BatchProgress(sys.stderr)
        freeze_startup_heap()
        result = run_batch(
            args.jobs_file,
            args.out,
            parallel=args.jobs,
            ray=args.ray,
            ray_options=options,
            ceiling=args.ceiling,
            on_progress=progress,
            handle_signals=True,
        )
    except BadJobs as e:
        for problem in e.problems:
            print(f"governor batch: {problem}", file=sys.stderr)
        print("governor batch: nothing was run", file=sys.stderr)
        return REFUSED_BEFORE_START
    except (RayUnavailable, OutputBusy, OutputUnsafe, ValueError) as e:
        print(f"governor batch: {e}", file=sys.stderr)
        return REFUSED_BEFORE_START
    progress.close()
    if args.json:
        status = (
            "interrupted" if result.not_run
            else "completed" if all(r.line.get("status") == "completed" for r in result.results)
            else "failed"
        )  # fmt: skip
        doc = {"status": status, "exit_code": result.exit_code, "jobs": [r.line for r in result.results]}
        print(spelling.dumps(doc, indent=1))
    else:
        from governor.cli.audit import print_batch

        print_batch(result.out)
    if result.not_run:
        print(
            f"governor batch: interrupted: {len(result.not_run)} job(s) not finished; run the "
            "same command again to resume",
            file=sys.stderr,
        )
    return result.exit_code


class BatchProgress:
    """An ``on_progress`` callback: a line per job started and finished, and in a
    terminal a status line kept at the bottom (done / running / failed, counts
    by status, elapsed, ETA), redrawn twice a second."""

    def __init__(self, out: TextIO, *, tty: bool | None = None) -> None:
        self.out = out
        self.tty = out.isatty() if tty is None else tty
        self.started = time.monotonic()
        self.skipped = 0
        self.running: set[str] = set()
        self.statuses: Counter[str] = Counter()
        self.queued: int | None = None
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._ticker: threading.Thread | None = None
        if self.tty:
            self._ticker = threading.Thread(target=self._tick, daemon=True)
            self._ticker.start()

    @property
    def done(self) -> int:
        """Jobs finished in this run."""
        return sum(self.statuses.values())

    def __call__(self, event: Any) -> None:
        with self._lock:
            self._handle(event)

    def _handle(self, event: Any) -> None:
        kind, job = event.kind, event.job
        if kind == "skipped":
            self.skipped += 1
            return
        if kind == "queued":
            self.queued = event.count
            earlier = (
                f"; {self.skipped} finished by an earlier run, skipped" if self.skipped else ""
            )
            self._line(f"{event.count} job(s) to run{earlier}")
        elif kind == "node":
            self._line(f"ray: {event.info}")
        elif kind == "started" and job is not None:
            self.running.add(job)
            if not self.tty:
                self._line(f"{job}: started ({self._counts()})")
        elif kind == "finished" and job is not None and event.line is not None:
            self.running.discard(job)
            status = str(event.line.get("status"))
            self.statuses[status] += 1
            reason = event.line.get("reason")
            why = f": {reason}" if reason and status != "completed" else ""
            self._line(f"{job}: {status}{why[:200]} ({self._counts()})")
        elif kind == "interrupted" and job is not None:
            self.running.discard(job)
            self._line(f"{job}: interrupted, runs again on a rerun")
        elif kind == "interrupted":
            self._line(
                f"{event.info}: stopping: no new job starts; the running attempts are ended "
                "and run again on a rerun (their results are not kept)"
            )

    def _counts(self) -> str:
        failed = self.done - self.statuses["completed"]
        elapsed = time.monotonic() - self.started
        of = f"/{self.queued}" if self.queued is not None else ""
        parts = [f"{self.done}{of} done", f"{len(self.running)} running", f"{failed} not completed"]
        by_status = ", ".join(f"{n} {s}" for s, n in sorted(self.statuses.items()))
        return "; ".join(parts) + (f" [{by_status}]" if by_status else "") + self._eta(elapsed)

    def _eta(self, elapsed: float) -> str:
        if not self.done or self.queued is None:
            return ""
        remaining = self.queued - self.done
        return f"; ETA {remaining * elapsed / self.done:.0f}s" if remaining > 0 else ""

    def _line(self, text: str) -> None:
        elapsed = time.monotonic() - self.started
        clear = "\r\x1b[K" if self.tty else ""
        print(f"{clear}[{elapsed:6.1f}s] {text}", file=self.out, flush=True)
        if self.tty:
            self._status()

    def _status(self) -> None:
        elapsed = time.monotonic() - self.started
        self.out.write(f"\r\x1b[K{self._counts()}; {elapsed:.0f}s elapsed")
        self.out.flush()

    def _tick(self) -> None:
        while not self._closed.wait(0.5):
            with self._lock:
                self._status()

    def close(self) -> None:
        """Stop redrawing and clear the status line."""
        self._closed.set()
        if self._ticker is not None:
            self._ticker.join()
            self.out.write("\r\x1b[K")
            self.out.flush()
