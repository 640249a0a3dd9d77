"""The jobs file: one JSON object per line, each a `Job`, every bad line named.

Rules of this file:

- **Every problem at once, before anything runs.** `parse_jobs` reads the
  whole file and raises `BadJobs` listing every bad line (its number, the key,
  why); `check_jobs` then puts each job through the same `prepare` a run
  would (policy file, capability, ceiling, agent installed, variables set,
  repository and ref found) and adds what it refuses. A batch with one bad
  line runs nothing.
- **The keys are a table.** `KEYS` says, for each key a line may hold, what
  its value must be; `OWNED` names the keys the batch decides for every job
  (the workspace is a fresh clone, the log goes to the output, the ceiling is
  the operator's), so a job that names one is told why, not silently
  overridden.
- **Pure where it can be.** Parsing touches no file; only `check_jobs` looks
  at the file system (policy files, local repositories) and runs ``git``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Final, Literal

from governor.audit.record_shape import JOB_ID
from governor.boundary.person_files import read_input_text
from governor.job.policy_files import read_policy, shipped_name
from governor.job.spec import AttemptSpec, RefusedBeforeStart, prepare
from governor.policies import config_values as values
from governor.policies.capability import CAPABILITY_NAMES
from governor.policies.ceiling import Ceiling
from governor.policies.errors import ConfigError, closest
from governor.policies.policy import Policy
from governor.sandbox.host import processes
from governor.sandbox.host.processes import written_places

ID_PATTERN: Final = JOB_ID
"""A job's id names its folder in the output: letters, digits, ``.``, ``_``, ``-``
(`governor.audit.record_shape.JOB_ID`, the check the readers of the output use too)."""


class BadJobs(Exception):
    """Every bad line of a jobs file, one problem per entry (exit code 2)."""

    def __init__(self, problems: Sequence[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class Job:
    """One attempt of a batch: a task, an agent, a repository at a ref, and the
    `AttemptSpec` fields a job may set. ``repo`` is a local path or a git URL;
    ``ref`` defaults to the repository's ``HEAD``."""

    id: str
    prompt: str
    repo: str
    agent: str | None = None
    argv: tuple[str, ...] | None = None
    ref: str | None = None
    kind: Literal["acp", "command"] = "acp"
    policy: Policy | str | None = None
    capability: str | None = None
    model: str | None = None
    mode: str | None = None
    timeout: float | None = None
    """Seconds for the attempt; None: the policy's ``[limits] wall``."""
    env: tuple[str, ...] = ()
    extra_dirs: tuple[str, ...] = ()
    sandbox_agent: bool = True
    agent_args: tuple[str, ...] = ()
    append_rules: bool = False
    approvals: Literal["unattended", "pause"] | None = None
    durability: Literal["batch", "always"] = "batch"
    checks: tuple[str, ...] = ()
    """Shell lines run after the attempt, after the policy's ``[checks] commands``
    (`governor.checks.check_runs`): the job's verdict."""
    held_out: tuple[str, ...] = ()
    """Globs of tests the agent never sees, put back only for the checks
    (`governor.checks.held_out`), besides the policy's ``[sandbox] held_out``."""
    tries: int = 1
    """Attempts at most while the verdict is ``failed`` (`governor.attempt.tries`): each
    in a fresh copy of the clone, told the failed checks' digest."""
    line: int | None = field(default=None, compare=False)
    """The line of the jobs file it came from, for messages."""

    @property
    def where(self) -> str:
        """How messages name this job: its line and id."""
        return f"line {self.line} ({self.id})" if self.line is not None else f"job {self.id}"

    def spec(
        self,
        workspace: str | Path,
        log: str | Path,
        *,
        ceiling: Ceiling | str | Path | None = None,
        on_event: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> AttemptSpec:
        """The job's attempt in ``workspace``, logging to ``log``."""
        from governor.gate.approver import Pause, Unattended

        approver = {None: None, "unattended": Unattended(), "pause": Pause()}[self.approvals]
        return AttemptSpec(
            prompt=self.prompt,
            agent=self.agent,
            argv=list(self.argv) if self.argv is not None else None,
            workspace=workspace,
            extra_dirs=list(self.extra_dirs),
            policy=self.policy,
            capability=self.capability,
            ceiling=ceiling,
            approver=approver,
            timeout=self.timeout,
            log=log,
            sandbox_agent=self.sandbox_agent,
            env=list(self.env),
            model=self.model,
            mode=self.mode,
            agent_args=list(self.agent_args),
            append_rules=self.append_rules,
            durability=self.durability,
            kind=self.kind,
            checks=list(self.checks),
            held_out=list(self.held_out),
            on_event=on_event,
        )

    def to_json(self) -> dict[str, Any]:
        """The job as a jobs-file line would give it (defaults left out)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "line" or value == f.default:
                continue
            if isinstance(value, Policy):
                value = value.source
            out[f.name] = list(value) if isinstance(value, tuple) else value
        return out


# -- the keys ----------------------------------------------------------------------------

# A key's check is `governor.policies.config_values`'s (``check(source, key,
# value)``, one wording with the policy and the presets); a line's problems are
# the errors' ``problem``s, each after its line and key.


def _optional(check: values.Check[Any]) -> values.Check[Any]:
    """``check``, or null (the key left to its default)."""

    def optional(source: str, key: str, value: Any) -> Any:
        return None if value is None else check(source, key, value)

    return optional


def _ref(source: str, key: str, value: Any) -> str | None:
    if value is None:
        return None
    ref = values.text(source, key, value)
    if ref.startswith("-"):
        raise values.expected(source, key, "a ref that does not start with '-'", values.shown(ref))
    return ref


def _seconds(source: str, key: str, value: Any) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        number = isinstance(value, int | float) and not isinstance(value, bool)
        got = values.shown(value) if number else values.type_name(value)
        raise values.expected(source, key, "a number of seconds greater than 0", got)
    return float(value)


def _tries(source: str, key: str, value: Any) -> int:
    from governor.attempt.tries import MAX_TRIES

    if type(value) is not int or not 1 <= value <= MAX_TRIES:
        got = values.shown(value) if type(value) is int else values.type_name(value)
        raise values.expected(source, key, f"a whole number from 1 to {MAX_TRIES}", got)
    return value


def _job_id(source: str, key: str, value: Any) -> str:
    if isinstance(value, str) and ID_PATTERN.fullmatch(value):
        return value
    what = (
        "1 to 128 letters, digits, '.', '_' or '-', starting with a letter or a digit "
        "(it names the job's folder in the output)"
    )
    got = values.shown(value) if isinstance(value, str) else values.type_name(value)
    raise values.expected(source, key, what, got)


KEYS: Final[Mapping[str, values.Check[Any]]] = {
    "id": _job_id,
    "prompt": values.text,
    "repo": values.text,
    "ref": _ref,
    "agent": _optional(values.text),
    "argv": values.argv,
    "kind": values.one_of("acp", "command"),
    "policy": _optional(values.text),
    "capability": values.one_of(*CAPABILITY_NAMES),
    "model": _optional(values.text),
    "mode": _optional(values.text),
    "timeout": _seconds,
    "env": values.text_list,
    "extra_dirs": values.text_list,
    "sandbox_agent": values.boolean,
    "agent_args": values.text_list,
    "append_rules": values.boolean,
    "approvals": values.one_of("unattended", "pause"),
    "durability": values.one_of("batch", "always"),
    "checks": values.text_list,
    "held_out": values.text_list,
    "tries": _tries,
}
"""Every key a job may hold, with its value's check."""

REQUIRED: Final = ("id", "prompt", "repo")

JOBS_FILE: Final = "the jobs file"
"""The ``source`` a key's check is given (a problem is told by its line and key)."""

OWNED: Final[Mapping[str, str]] = {
    "workspace": "the batch makes each job's workspace: a fresh clone of `repo` at `ref`",
    "log": "the batch writes each job's audit log to OUT/<id>/audit.jsonl",
    "ceiling": "the ceiling is the operator's, not a job's: give --ceiling to governor batch",
    "approver": "a batch runs unattended: use `approvals` (unattended or pause)",
    "on_event": "the batch shows its own progress",
    "environ": "the agent's variables come from the governor's environment: name them in `env`",
    "max_line_bytes": "not settable per job",
}
"""`AttemptSpec` fields the batch decides for every job, with the reason a job may not."""

_TUPLES: Final = ("argv", "env", "extra_dirs", "agent_args", "checks", "held_out")


def parse_job(value: Any, line: int | None = None) -> tuple[Job | None, list[str]]:
    """One job from its JSON value: the `Job`, or None and every problem
    (each naming the line and the key)."""
    at = f"line {line}: " if line is not None else ""
    if not isinstance(value, dict):
        return None, [f"{at}a job is a JSON object, not {values.type_name(value)}"]
    problems: list[str] = []
    for key in value:
        if key in KEYS:
            continue
        if key in OWNED:
            problems.append(f"{at}key {key!r}: {OWNED[key]}")
        else:
            hint = closest(key, KEYS)
            problems.append(
                f"{at}unknown key {key!r}" + (f" (did you mean {hint!r}?)" if hint else "")
            )
    for key in REQUIRED:
        if key not in value:
            problems.append(f"{at}key {key!r}: missing")
    for key, check in KEYS.items():
        if key not in value:
            continue
        try:
            check(JOBS_FILE, key, value[key])
        except ConfigError as e:
            problems.append(f"{at}key {key!r}: {e.problem}")
    has_agent, has_argv = value.get("agent") is not None, value.get("argv") is not None
    if has_agent == has_argv:
        problems.append(
            f"{at}key 'agent': give either `agent` (a preset id) or `argv` (an ACP command of "
            "your own), " + ("not both" if has_agent else "one of them")
        )
    tries = value.get("tries", 1)
    if not problems and tries != 1 and not value.get("checks") and value.get("policy") is None:
        problems.append(
            f"{at}key 'tries': a try follows only a failed verdict, and this job has no "
            "checks: give it `checks` (or a policy with [checks] commands)"
        )
    if problems:
        return None, problems
    kw: dict[str, Any] = {k: tuple(v) if k in _TUPLES else v for k, v in value.items()}
    if "timeout" in kw:
        kw["timeout"] = float(kw["timeout"])
    return Job(**kw, line=line), []


def parse_lines(text: str) -> tuple[list[Job], list[str]]:
    """The good jobs of a jobs file's text and every problem of the bad lines
    (blank lines are skipped; a duplicate id is a bad line)."""
    jobs: list[Job] = []
    problems: list[str] = []
    first_line: dict[str, int] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError as e:
            problems.append(f"line {n}: not JSON: {e}")
            continue
        job, found = parse_job(value, n)
        problems.extend(found)
        if isinstance(value, dict) and isinstance(value.get("id"), str):
            job_id = value["id"]
            if job_id in first_line:
                problems.append(
                    f"line {n}: key 'id': {job_id!r} is already the id of line {first_line[job_id]}"
                )
                continue
            first_line[job_id] = n
        if job is not None:
            jobs.append(job)
    if not jobs and not problems:
        problems.append("the jobs file holds no job (one JSON object per line)")
    return jobs, problems


def parse_jobs(text: str) -> list[Job]:
    """Every job of a jobs file's text; `BadJobs` with every bad line."""
    jobs, problems = parse_lines(text)
    if problems:
        raise BadJobs(problems)
    return jobs


def read_jobs(path: str | Path) -> tuple[list[Job], list[str]]:
    """`parse_lines` of a file, with relative ``repo`` and ``policy`` paths taken
    from the file's folder."""
    path = Path(path)
    try:  # never through a link an attempt could have made out of its folders
        text = read_input_text(path, written=written_places())
    except OSError as e:
        return [], [f"{path}: cannot read the jobs file: {e.strerror}"]
    except UnicodeDecodeError as e:
        return [], [f"{path}: not UTF-8 text: {e}"]
    jobs, problems = parse_lines(text)
    return [anchored(j, path.parent) for j in jobs], problems


def as_jobs(items: Iterable[Job | Mapping[str, Any]]) -> list[Job]:
    """Jobs given as `Job`s or as dicts (a jobs-file line each), with every problem
    of the dicts at once (named by their position, from 1)."""
    jobs: list[Job] = []
    problems: list[str] = []
    seen: dict[str, int] = {}
    for n, item in enumerate(items, 1):
        if isinstance(item, Job):
            job: Job | None = item
        else:
            job, found = parse_job(dict(item), None)
            problems.extend(f"job {n}: {p}" for p in found)
        if job is None:
            continue
        if job.id in seen:
            problems.append(
                f"job {n}: key 'id': {job.id!r} is already the id of job {seen[job.id]}"
            )
            continue
        seen[job.id] = n
        jobs.append(job)
    if problems:
        raise BadJobs(problems)
    return jobs


def anchored(job: Job, base: Path) -> Job:
    """The job with its relative local paths (``repo``, ``policy``, ``extra_dirs``)
    taken from ``base``."""
    changes: dict[str, Any] = {}
    if any(not os.path.isabs(os.path.expanduser(d)) for d in job.extra_dirs):
        changes["extra_dirs"] = tuple(
            d if os.path.isabs(os.path.expanduser(d)) else str((base / d).resolve())
            for d in job.extra_dirs
        )
    if not is_url(job.repo) and not os.path.isabs(os.path.expanduser(job.repo)):
        changes["repo"] = str((base / job.repo).resolve())
    policy = job.policy
    relative = isinstance(policy, str) and not os.path.isabs(os.path.expanduser(policy))
    if relative and shipped_name(str(policy)) is None:  # a shipped name stays a name
        changes["policy"] = str((base / str(policy)).resolve())
    return replace(job, **changes) if changes else job


_SCP_LIKE: Final = re.compile(r"[A-Za-z0-9_.-]+@[A-Za-z0-9_.-]+:")


def is_url(repo: str) -> bool:
    """Whether ``repo`` is a git URL (``scheme://...`` or ``user@host:path``), not a path."""
    return "://" in repo or bool(_SCP_LIKE.match(repo))


# -- checking against the world ------------------------------------------------------------


def check_jobs(jobs: Sequence[Job], ceiling: Ceiling) -> list[Job]:
    """Every job put through what a run would check before it starts: its policy
    file loaded (the job then carries the `Policy`, so a Ray worker needs no
    copy of the file), `prepare` (capability, ceiling, agent installed,
    variables set), its local repository and ref found. `BadJobs` with every
    problem of every job; nothing is started."""
    problems: list[str] = []
    checked: list[Job] = []
    with tempfile.TemporaryDirectory(prefix="governor-batch-check-") as scratch:
        workspace = Path(scratch) / "workspace"
        workspace.mkdir()
        log = Path(scratch) / "audit.jsonl"
        for job in jobs:
            found: list[str] = []
            job = _with_policy(job, found)
            trial = replace(job, policy=None) if found else job  # the rest of it still checked
            try:
                prepare(trial.spec(workspace, log, ceiling=ceiling))
            except RefusedBeforeStart as e:
                found.extend(p for p in e.problems if not _about_the_clone(p))
            found.extend(_repo_problems(job))
            problems.extend(f"{job.where}: {p}" for p in found)
            checked.append(job)
    if problems:
        raise BadJobs(problems)
    return checked


_LINE: Final = re.compile(r"line (\d+)\b")


def by_line(problems: Iterable[str]) -> list[str]:
    """Problems in the order of the lines they name (those naming none first)."""

    def line(problem: str) -> int:
        m = _LINE.search(problem)
        return int(m.group(1)) if m else 0

    return sorted(problems, key=line)


def _with_policy(job: Job, problems: list[str]) -> Job:
    if not isinstance(job.policy, str):
        return job
    try:
        policy = read_policy(job.policy)
    except ConfigError as e:  # a file's several problems are one line each
        problems.extend(f"key 'policy': {one}" for one in getattr(e, "errors", [e]))
        return job
    return replace(job, policy=policy)


def _about_the_clone(problem: str) -> bool:
    """Problems of the stand-in workspace the check uses, not of the job: the
    policy's extra directories are looked for again beside the real clone, and
    the frozen and held-out globs matched against it."""
    return problem.startswith("an extra directory of the policy does not exist") or (
        problem.startswith("[sandbox] ") and " matches nothing in " in problem
    )  # the frozen and held-out globs are matched against the real clone when the job runs


def _repo_problems(job: Job) -> list[str]:
    """A local repository that is not there, or a ref it does not have (a URL is
    only reached when its job runs)."""
    if is_url(job.repo):
        return []
    repo = Path(job.repo).expanduser()
    if not repo.is_dir():
        return [f"key 'repo': {repo} is not a directory (give a path to a git repository or a URL)"]
    done = _git(repo, "rev-parse", "--git-dir")
    if done.returncode != 0:
        return [f"key 'repo': {repo} is not a git repository"]
    if job.ref is None:
        return []
    done = _git(
        repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{job.ref}^{{commit}}"
    )
    if done.returncode != 0:
        return [f"key 'ref': {repo} has no commit {job.ref!r}"]
    return []


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``git -C repo ARGS`` through `governor.sandbox.host.processes` (a failure to start
    is a non-zero exit, as git's own would be)."""
    program = processes.find_program("git") or "/usr/bin/git"
    try:
        host = processes.command(
            [program, "-C", str(repo), *args], env={**os.environ, "GIT_TERMINAL_PROMPT": "0"}
        )
        return processes.run(host, timeout=60)
    except (OSError, processes.HostProcessRefused) as e:
        return subprocess.CompletedProcess([program, *args], 127, "", str(e))
