"""Checks after the attempt: the job's commands run over the workspace as the
agent left it, and the verdict they come to.

A loop judges an attempt by its acceptance tests; run in the attempt's own
sandbox, or with the workspace writable, a check could be what changes the
result it reports (a test that rewrites its fixture, a build that regenerates
the file under review). So each check runs in a fresh sandbox of its own:

- **it cannot change the workspace**: the roots are a copy made for it and
  thrown away after it, whose reads show (`governor.checks.observed`: what it
  read is `Checks.read`, its harness observed, not parsed), or, where no copy
  can be made (`Checks.unobserved` says why), overlays whose writes are
  thrown away with the sandbox (``--tmp-overlay``); tests may still write
  their caches and reports. Where this bwrap has no ``--tmp-overlay``, the
  roots are bound read-only (`Checks.workspace` says which; a check that must
  write then fails, and the outcome says why);
- the policy's frozen paths, protected paths and hidden files hold as they
  did for the agent (pinned read-only over the overlay);
- **network off**: a network namespace of its own with no way out, whatever
  the attempt's network was (a check that downloads is not a check of the
  workspace);
- its own limits: the policy's ``[limits]`` per sandbox, and ``[checks]
  timeout`` seconds, after which its whole tree is killed and it fails.

Each check is sandboxed even at full-access: a check is the job's command, not
the agent's, and nothing in it was asked for.

**The harness is the loop's** (`check_environment`, `check_path`): a check's
interpreters run with the workspace off their module path
(``PYTHONSAFEPATH``: ``python -m pytest`` no longer finds a ``pytest.py`` at
the root), pytest's plugin autoload off (``PYTEST_DISABLE_PLUGIN_AUTOLOAD``:
a plugin the job wants is named with ``-p``), no bytecode the attempt wrote
(every ``__pycache__`` and ``.pytest_cache`` swept from the overlay before
the command, `cache_sweep`; where the roots are bound read-only instead,
``PYTHONPYCACHEPREFIX`` on the sandbox's fresh ``/tmp``) and no
``.pytest_cache`` (``-p no:cacheprovider``), and its ``PATH`` without
an entry in a root (a workspace ``.venv/bin`` is no ``python3`` of a check's
unless the check names it). The files that decide what a check runs are the
harness set (`governor.policies.harness`, `governor.confine.harness`).

**Judged by results** (`governor.checks.test_results`): each check gets a report
folder outside the workspace where its runners write JUnit XML (pytest's
``--junitxml``, ``node --test``'s junit reporter, unittest through
`governor.checks.unittest_report`, and any file the job's own command writes into
``$GOVERNOR_CHECK_REPORTS``), and the verdict is ``passed`` only when every check
exited 0 *and* every acceptance test ran and passed. Its output is kept as a bounded
tail, masked, since a test run prints the environment it was given.

**Believed only when its runner tells the truth about its canaries**
(`governor.checks.canaries`): each check sees its own copy of the acceptance test
files with tests the agent could not know appended, some that must fail and
some that must pass; a check that misreports one fails (``runner-lied``),
and one whose only failures are its must-fail canaries counts as exited 0.
Its copies of the files' own tests (an expected value changed) run in **a
second run of the same command**, in a fresh sandbox of its own where their
twins never ran (`_with_copies`): at most two runs a check, the second only
when a copy's twin passed.

**Nothing a check's processes see names a check** where it can be helped:
code under test that keys on such a word fixes itself for the check only.
No variable says it (the unittest reporter finds its report folder from
where it lies; ``$GOVERNOR_CHECK_REPORTS`` is a shell variable of the job's
command line, set, unexported, only when the line names it), and the cache
sweep's shell ``exec``s the job's line (`_script`), so the check's shell's
command line is the job's own. The reporter's and the report folders are
bound on the sandbox's fresh ``/tmp`` under a random name, so no path a
check's process is given names the governor's state folder. What cannot be
hidden (the runners' report options; the mount table, which names where a
bind comes from; ``PYTHONSAFEPATH``; the held-out files appearing; a sandbox's mounts,
no network) is a residual of docs/loops.md.

**Held-out tests stay held out** (`governor.checks.held_out`): a check run while
the job has held-out files keeps its words to itself. Its output and its
per-test report can quote a held-out test (a traceback prints the failing
line, a test's message its inputs), and every way a check's words leave the
governor leads to an agent sooner or later: the outcome a loop hands on, the
events, the audit record, a next try's prompt (`governor.attempt.tries.digest`), a
batch's tries. So one rule at the source, `CheckRun` itself: its ``tail`` is
`WITHHELD` and its per-test results only counted; what is left is what
cannot reveal a held-out test (the command, the exit status, the duration,
the visible acceptance tests not passed by name and the held-out ones
counted, `governor.checks.test_results.Judgement`). A loop that wants the held-out
output runs its held-out tests itself.

`run_checks` is the library's step: a loop that owns its retries calls it with
the workspace and the policy, without the command line.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import trio

from governor.boundary.secrets import Masker, forwarding_problems
from governor.checks import canaries, observed, test_results
from governor.checks.check_values import CheckRun, Checks, WorkspaceMode
from governor.checks.test_results import Acceptance, CaseResult
from governor.policies.capability import Capability
from governor.policies.policy import Policy

if TYPE_CHECKING:  # the outcome holds a CheckRun: reading one needs no sandbox
    from governor.audit.log import AuditLog
    from governor.sandbox import Profile

TAIL_CHARS: Final = 4000
"""Characters of a check's output kept (its newest): what says why a test failed."""
OUTPUT_LIMIT: Final = 256 * 1024
"""Bytes of a check's output the sandbox keeps while it runs (the newest)."""

async def run_checks(
    policy: Policy,
    *,
    commands: tuple[str, ...] | None = None,
    environ: Mapping[str, str] | None = None,
    masker: Masker | None = None,
    on_check: Callable[[CheckRun], None] | None = None,
    acceptance: Acceptance | None = None,
) -> Checks:
    """Run the checks (``commands``, default the policy's ``[checks] commands``)
    one after the other over the bound ``policy``'s roots, each in a fresh
    sandbox that cannot change them (see the module's header), and call
    ``on_check`` after each. Every check runs, whatever the ones before it came
    to: a loop wants every failing check at once.

    A check gets the policy's ``env`` names from ``environ`` (default
    ``os.environ``), the governor's ``PATH`` (none of its entries in a root) and
    ``$HOME`` shown empty, and the harness's variables (`check_environment`). Its
    tail is masked with ``masker`` (default: the secret-looking variables of
    ``environ``). The verdict needs ``acceptance`` passed (default: the
    policy's, `governor.checks.test_results.acceptance_of`, read now: an attempt
    passes the ones it read at its start).
    """
    from governor.confine.sandboxes import configured_bwrap
    from governor.sandbox import BwrapUnavailable, ProfileError, SandboxStartFailed
    from governor.sandbox.run.preflight import preflight

    chosen = policy.checks if commands is None else commands
    if not chosen:
        return Checks()
    env_from = os.environ if environ is None else environ
    masked = masker if masker is not None else Masker.from_environ(env_from)
    workspace: WorkspaceMode = "overlay"
    try:
        probed = await preflight(configured_bwrap())
        if not probed.features.tmp_overlay:
            workspace = "read-only"
        failure = None
    except SandboxStartFailed as e:  # bwrap's own line names the path
        failure = f"the check's sandbox could not be started: {e}"
    except (BwrapUnavailable, ProfileError) as e:
        failure = f"the check's sandbox cannot work here: {e}"
    wanted = acceptance if acceptance is not None else test_results.acceptance_of(policy)
    # a library call reaches here without `governor.job.spec.prepare`: the same one check
    refused = forwarding_problems((n, env_from.get(n), "the policy's env (a check's)") for n in policy.env)
    if refused:
        failure = "refused before the check: " + "; ".join(refused)
    declared = {n: env_from[n] for n in policy.env if n in env_from and not refused}
    runs = []
    with _Folders() as folders:
        try:  # the pins' walk is bounded: past it no check runs, and each says why
            shared: Profile | None = check_profile(policy, workspace, {})
            built = failure
        except ProfileError as e:
            shared, built = None, failure or f"the check's sandbox cannot be built: {e}"
        results: list[CaseResult] = []
        carrying = canaries.carriers(policy, wanted)
        read: set[str] = set()
        unobserved = None
        if workspace == "overlay" and shared is not None and not observed.atime_moves(folders.top):
            unobserved = (
                f"the file system of {folders.top} does not update access times (noatime): "
                "what the checks read was not observed"
            )

        async def once(command: str, planted: canaries.Planted) -> tuple[CheckRun, str]:
            """One run of ``command`` in a fresh sandbox showing ``planted``, over a
            copy of the roots whose reads show where one can be made
            (`governor.checks.observed`): what each run read is the harness's."""
            nonlocal unobserved
            lib, reports = folders.one()
            # bound on the sandbox's fresh /tmp under a name of no meaning: no
            # path a check's process is given names the governor's state folder
            inside = f"/tmp/{secrets.token_hex(6)}"
            env = check_environment(
                declared, f"{inside}/lib", f"{inside}/reports", pycache_prefix=workspace == "read-only"
            )
            profile = None if shared is None else replace(
                shared,
                env=env,
                inputs=(Path(lib),),
                outputs=(Path(reports),),
                bound_at=Path(inside),
                shown_as=tuple((Path(a), Path(b)) for a, b in planted.shown_as),
            )
            sweep = cache_sweep(policy) if workspace == "overlay" else None
            copied = None
            if profile is not None and workspace == "overlay" and unobserved is None:
                try:  # over a copy whose reads show (`governor.checks.observed`)
                    copied = await trio.to_thread.run_sync(
                        observed.copy_roots, policy.roots, folders.copies()
                    )
                    profile = replace(
                        profile, scratch_copies=tuple((Path(c), Path(r)) for c, r in copied.pairs)
                    )
                except observed.Unobserved as e:
                    unobserved = f"{e}: what the checks read was not observed"
            try:
                ran = await _one(
                    command,
                    profile,
                    policy.check_timeout,
                    masked,
                    built,
                    sweep,
                    f"{inside}/reports",
                    planted,
                )
                if copied is not None:
                    read.update(await trio.to_thread.run_sync(copied.read))
            finally:
                if copied is not None:
                    await trio.to_thread.run_sync(copied.remove)
            return ran, reports

        for command in chosen:
            # fresh for each check, made now: the agent and all it started are gone
            planted = canaries.plant(carrying, policy.roots, folders.canaries())
            ran, reports = await once(command, planted)
            ran, believed = _with_reports(
                ran, reports, masked, planted, carrying, withheld=bool(policy.held_out)
            )
            copies = canaries.plant(carrying, policy.roots, folders.canaries(), copies=True)
            if ran.error is None and not ran.timed_out and _twin_passed(copies, believed):
                ran = _with_copies(ran, *await once(command, copies), copies, carrying, believed)
            results += believed
            runs.append(ran)
            if on_check is not None:
                on_check(ran)
    unfinished = sum(r.unfinished for r in runs)
    judgement = test_results.judge(wanted, results, unfinished)
    return Checks(tuple(runs), workspace, judgement, tuple(sorted(read)), unobserved)


REPORTS_VARIABLE: Final = "GOVERNOR_CHECK_REPORTS"
"""The shell variable naming a check's report folder in the job's command line
(never exported: `_script`): a job's own command writes its JUnit XML there
(``JEST_JUNIT_OUTPUT_DIR="$GOVERNOR_CHECK_REPORTS" jest --reporters=jest-junit``,
``go-junit-report > "$GOVERNOR_CHECK_REPORTS/go.xml"``)."""
PYCACHE_INSIDE: Final = "/tmp/.pycache"
"""Where a check's interpreters keep bytecode: on its sandbox's fresh ``/tmp``."""
WITHHELD: Final = (
    "(the output is withheld: the checks ran the job's held-out tests, and it could "
    "quote them; the verdict and the acceptance tests say what failed)"
)
"""A check's ``tail`` when the job holds tests out (see the module's header)."""


def check_environment(
    declared: Mapping[str, str], lib: str, reports: str, *, pycache_prefix: bool = False
) -> dict[str, str]:
    """A check's variables: the job's declared ones, then the harness's, which
    win (a job names a pytest plugin with ``-p``, not by turning autoload on).
    ``lib`` holds the unittest reporter (first on ``PYTHONPATH``), ``reports``
    is where the runners write their JUnit XML. ``pycache_prefix``: bytecode
    under the sandbox's fresh ``/tmp`` (where the workspace's caches cannot be
    swept away, `cache_sweep`: every module, the standard library's too, is
    then compiled afresh by each interpreter, some 0.5 s a run)."""
    env = dict(declared)
    extra_path = declared.get("PYTHONPATH")
    pytest_opts = declared.get("PYTEST_ADDOPTS")
    node_opts = declared.get("NODE_OPTIONS")
    if pycache_prefix:
        env["PYTHONPYCACHEPREFIX"] = PYCACHE_INSIDE
    env.update(
        PYTHONSAFEPATH="1",
        PYTEST_DISABLE_PLUGIN_AUTOLOAD="1",
        PYTHONPATH=lib + (f":{extra_path}" if extra_path else ""),
        # both read their options with quotes: a state folder may hold a space
        PYTEST_ADDOPTS="-p no:cacheprovider --junitxml="
        + shlex.quote(f"{reports}/pytest.xml")
        + (f" {pytest_opts}" if pytest_opts else ""),
        NODE_OPTIONS="--test-reporter=spec --test-reporter-destination=stdout "
        f'--test-reporter=junit --test-reporter-destination="{reports}/node.xml"'
        + (f" {node_opts}" if node_opts else ""),
    )
    env.pop(REPORTS_VARIABLE, None)  # no variable names a check (see the module's header)
    return env


def _script(command: str, reports: str, sweep: str | None) -> str:
    """The check's shell text: the cache sweep, then ``exec`` of a shell running
    the job's ``command`` alone, so the shell every process of the check sees
    as its parent has the job's line for its command line, not the sweep's.
    ``$GOVERNOR_CHECK_REPORTS``, when the line names it, is a variable of that
    line only (assigned, not exported: the programs it starts see none)."""
    line = command
    if REPORTS_VARIABLE in command:
        line = f"{REPORTS_VARIABLE}={shlex.quote(reports)}\n{command}"
    if sweep is None:
        return line
    return f"{sweep}\nexec /bin/sh -c {shlex.quote(line)}"


def cache_sweep(policy: Policy) -> str:
    """The shell line a check runs before its command over overlay roots: every
    ``__pycache__`` and ``.pytest_cache`` in the roots removed from the
    overlay (the host's stay), so no bytecode the attempt left is loaded (a
    ``.pyc`` of the fix stamped with the unchanged source's mtime and size,
    pytest's assertion-rewrite cache) and the check's interpreters compile
    the workspace's sources afresh, while the standard library's and the
    installed packages' own caches are used. Not swept: ``.git``,
    ``node_modules``, and the virtualenvs a check runs (in the harness set:
    pinned, or their changes found). A pinned cache (under a frozen folder,
    which the attempt could not write) stays. Each cache is made the
    owner's to list and write first: a ``__pycache__`` the attempt left at
    mode 0311 cannot be emptied by an unprivileged ``rm -rf``, yet Python
    opens the ``.pyc`` in it by name."""
    pruned = " -o ".join(
        ["-name .git", "-name node_modules", *(f"-path {shlex.quote(p)}" for p in policy.harness_named)]
    )
    roots = " ".join(shlex.quote(r) for r in policy.roots)
    return (
        f"find {roots} \\( {pruned} \\) -prune -o \\( -name __pycache__ -o -name .pytest_cache \\) "
        "-prune -exec chmod -R u+rwx {} + -exec rm -rf {} + 2>/dev/null"
    )


def check_path(path: str | None, roots: tuple[str, ...]) -> str | None:
    """``path`` without the entries a workspace could choose: relative or empty
    ones (the check's working directory) and those in a root (a ``.venv/bin``
    the governor was started from). None stays None (the sandbox's default)."""
    if path is None:
        return None
    from governor.policies.paths import is_under, normalize

    kept = [
        entry
        for entry in path.split(":")
        if entry.startswith("/") and not any(is_under(normalize(entry), r) for r in roots)
    ]
    return ":".join(kept)


class _Folders:
    """One run of checks' folders outside every root, under the governor's state
    (which no other sandbox shows): per check, ``lib`` (the reporter,
    read-only to the check) and ``reports`` beside it, where the reporter
    finds it (`governor.checks.unittest_report`); removed at the end."""

    def __init__(self) -> None:
        from governor.sandbox.host.concealed import state_dir

        under = state_dir() / "checks"
        under.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.top = tempfile.mkdtemp(prefix="run-", dir=under)
        self.made: list[str] = []

    def one(self) -> tuple[str, str]:
        """A fresh ``(lib, reports)`` pair for the next check."""
        # named at random, as the canaries' folder: a bind's source is in the
        # mount table, and no count may tell a check's own run from its copies'
        folder = os.path.join(self.top, secrets.token_hex(6))
        lib, reports = os.path.join(folder, "lib"), os.path.join(folder, "reports")
        for made in (folder, lib, reports):
            os.mkdir(made)
        here = os.path.dirname(os.path.abspath(__file__))
        shutil.copyfile(os.path.join(here, "unittest_report.py"), os.path.join(lib, "sitecustomize.py"))
        self.made.append(reports)
        return lib, reports

    def copies(self) -> str:
        """A fresh folder for one run's copy of the roots."""
        folder = os.path.join(self.top, secrets.token_hex(6))
        os.mkdir(folder, 0o700)
        return folder

    def canaries(self) -> str:
        """A fresh folder for one run's canary copies (never shown to it as a folder)."""
        folder = os.path.join(self.top, secrets.token_hex(6))
        os.mkdir(folder)
        return folder

    def __enter__(self) -> _Folders:
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.top, ignore_errors=True)


def _with_reports(
    ran: CheckRun,
    folder: str,
    masker: Masker,
    planted: canaries.Planted,
    acceptance: Acceptance,
    *,
    withheld: bool = False,
) -> tuple[CheckRun, tuple[CaseResult, ...]]:
    """The check with what its reports say of each test (masked: a test's
    message may print what it was given), its canaries taken out and judged
    (`governor.checks.canaries.judge`); and its results without the canaries.
    ``withheld`` (the job holds tests out): its output and per-test results
    only counted, `WITHHELD`."""
    read = test_results.read_reports(folder)
    judged = canaries.judge(planted, read.results, acceptance)
    if withheld:
        ran = replace(
            ran,
            tail=WITHHELD if ran.tail else "",
            tests=(),
            tests_more=len(judged.results),
            unfinished=read.unfinished,
            lie=judged.lie,
            explained=judged.explained,
        )
        return ran, judged.results
    shown = test_results.kept(judged.results)
    tests = tuple(replace(t, id=masker.text(t.id), detail=masker.text(t.detail)) for t in shown.shown)
    ran = replace(
        ran,
        tests=tests,
        tests_more=shown.more,
        unfinished=read.unfinished,
        lie=judged.lie,
        explained=judged.explained,
    )
    return ran, judged.results


def _twin_passed(copies: canaries.Planted, results: tuple[CaseResult, ...]) -> bool:
    """Whether a copy of ``copies`` has a twin that passed in ``results`` (the
    check's own run): a copy whose twin did not pass says nothing, and a
    check with none needs no run of its copies."""
    for copy in copies.canaries:
        if copy.twin is None:
            continue
        twins = [r for r in results if copy.matches(r)]  # a copy is named as its twin
        if twins and all(t.outcome == "passed" for t in twins):
            return True
    return False


def _with_copies(
    ran: CheckRun,
    copied: CheckRun,
    reports: str,
    copies: canaries.Planted,
    acceptance: Acceptance,
    twins: tuple[CaseResult, ...],
) -> CheckRun:
    """The check ``ran`` with its copies' run (``copied``, whose reports are in
    ``reports``) judged: every copy against its twin's result in the check's
    own run (``twins``), the templates as in any run. Only what the canaries
    say is taken from it (its other results are the same tests on the same
    code, already counted); its time counts. A copies' run that timed out or
    could not start fails the check as such, not as a lie."""
    duration = round(ran.duration_s + copied.duration_s, 3)
    if copied.timed_out or copied.exit is None:
        why = "timed out" if copied.timed_out else f"could not run: {copied.error}"
        return replace(
            ran,
            duration_s=duration,
            timed_out=ran.timed_out or copied.timed_out,
            error=ran.error
            or f"its second run, over copies of the acceptance tests (docs/loops.md), {why}",
        )
    read = test_results.read_reports(reports)
    lie = canaries.judge(copies, read.results, acceptance, twins=twins).lie
    if lie is not None:
        lie = canaries.Lie((*(ran.lie.misreported if ran.lie else ()), *lie.misreported))
    return replace(ran, duration_s=duration, lie=lie or ran.lie)


def report(audit: AuditLog, emit: Callable[[str, dict[str, Any]], None], ran: CheckRun) -> None:
    """An attempt's record (kind ``check``) and event of one check, as it ends;
    a log that cannot take the record leaves the check in the outcome only."""
    from governor.audit.log import AuditUnavailable

    verdict = "passed" if ran.passed else "failed"
    emit("check", {"verdict": verdict, **ran.to_json()})
    fields = {k: v for k, v in ran.to_json().items() if k != "command"}
    with contextlib.suppress(AuditUnavailable):
        audit.record("check", subject={"command": ran.command}, verdict=verdict, **fields)


def check_profile(
    policy: Policy,
    workspace: WorkspaceMode,
    env: Mapping[str, str],
    *,
    folders: tuple[str, str] | None = None,
) -> Profile:
    """The profile of one check: the commands' (`governor.confine.sandboxes.command_profile`:
    roots, pins, frozen paths, hidden files, limits) with the roots as thrown-away
    overlays (or read-only), sandboxed at any capability, no network, its
    ``PATH`` out of the roots (`check_path`) and, with ``folders``, its
    reporter's folder shown read-only and its report folder writable."""
    from governor.confine.sandboxes import command_profile

    base = command_profile(policy)
    scratch = workspace == "overlay"
    return replace(
        base,
        capability=Capability.EDIT_WORKSPACE if scratch else Capability.READ_ONLY,
        scratch=scratch,
        network=False,
        egress=None,
        env=dict(env),
        cwd=Path(policy.workspace),
        path=check_path(base.path, policy.roots),
        inputs=(Path(folders[0]),) if folders else (),
        outputs=(Path(folders[1]),) if folders else (),
    )


async def _one(
    command: str,
    profile: Profile | None,
    timeout: float,
    masker: Masker,
    failure: str | None,
    sweep: str | None = None,
    reports: str = "",
    planted: canaries.Planted | None = None,
) -> CheckRun:
    from governor.confine.sandboxes import configured_bwrap
    from governor.sandbox import BwrapUnavailable, ProfileError
    from governor.sandbox.run.runner import Command, run

    started = time.monotonic()
    if failure is not None or profile is None:
        why = failure or "the check's sandbox cannot be built"
        return CheckRun(command, None, 0.0, "", error=masker.text(why))
    try:
        result = await run(
            Command.shell(_script(command, reports, sweep)),
            profile,
            timeout=timeout,
            output_limit=OUTPUT_LIMIT,
            bwrap=configured_bwrap(),
        )
    except (BwrapUnavailable, ProfileError, OSError) as e:
        error = f"the check's sandbox could not be started: {e}"
        return CheckRun(
            command, None, round(time.monotonic() - started, 3), "", error=masker.text(error)
        )
    text = result.text if planted is None else canaries.scrub(result.text, planted)
    tail = text[-TAIL_CHARS:] if len(text) > TAIL_CHARS else text
    return CheckRun(
        command=command,
        exit=None if result.timed_out else result.status.shell_code,
        duration_s=round(time.monotonic() - started, 3),
        tail=masker.text(tail),
        timed_out=result.timed_out,
    )
