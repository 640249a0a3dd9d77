"""How an attempt ended, as a value, and the one pure function that judges it.

The attempt fills an `Ending` with what happened -- the facts, in the words of
whoever saw them -- and `judge` turns it into the `Outcome`. Nothing here
reaches back into the connection, the gate or the sandbox: a test builds an
`Ending` by hand and reads the outcome.

Who writes what: each part of an `Ending` has one writer, in one file
(`PARTS`, which a test holds against every assignment in `governor/`), so
whoever asks who set a fact, and when, reads one file:

- the attempt (who and where: agent, preset, ids, log, workspace) and what the
  processes did (started, timed out, interrupted, failed, stopped at a limit,
  their stderr and rejected lines, the connections the proxy refused them):
  `governor.attempt.under_way`;
- what the gate carried out and learnt as it decided (the evidence it carried,
  the ask that paused the attempt, its failing closed, the methods it did not
  know, the agent's ``blocked`` reason): `governor.gate.gatekeeper`, as it happens;
- what the turn said (stop reason, final message, mode, model, options, plan,
  usage, notices): `governor.attempt.agent_session`, at the turn's end;
- what the workspace shows (the diff, the tamper audit, the home folders,
  frozen and held-out files, the checks and their harness):
  `governor.attempt.roots_changes`;
- what the log holds (tally, unasked paths, decisions): `governor.attempt.lifecycle`.

Rules of this file:

- **Precedence is a table** (`PRECEDENCE`): the first row whose fact holds
  decides the status and the reason. In order: a plain command's own exit
  (unless it was stopped), an ask that paused the attempt, the gate failing
  closed, the agent's process stopped at one of its limits, the connection
  giving up on a hopeless agent, the agent's ``blocked`` tool, an interruption, a
  sign-in the agent needs, the timeout, the agent's stop reason (with its final
  message judged: ``BLOCKED:`` / ``FAILED:``), an error talking to the agent,
  and last an agent that ended without an answer.
- **A failure says what the agent said**: the last meaningful lines of its
  stderr (`said`: a line of only punctuation, the ``}`` closing a JSON dump,
  says nothing) are appended to a failed reason that does not hold them
  already; before them the hosts the proxy refused the agent, with the flag
  that would allow one, and the folder variables it was given that its
  sandbox does not show (an agent that cannot reach its API or its cache
  fails in its own words, often vaguely).
- **Masked last**: every text that came from the agent or the environment is
  masked before it leaves (reason, summary, notices, plan, pending request).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from governor.audit.tally import Tally
from governor.boundary.secrets import Masker
from governor.checks.check_values import READ_ONLY_NOTICE, Checks
from governor.confine.workspace import Change
from governor.ending import home_changes as homes
from governor.ending.attribution import Carried
from governor.ending.outcome import AcpReport, Judgement, Outcome, from_stop_reason, judged
from governor.tamper.facts import Finding


@dataclass(frozen=True, slots=True)
class CommandResult:
    """A plain program's end: its exit code (negative for a signal), its stdout
    (the newest bytes kept) and its stderr."""

    code: int | None
    stdout: str
    stderr: str


@dataclass(slots=True)
class Ending:
    """What happened in one attempt: the facts `judge` reads, nothing decided yet.

    Written as the attempt goes, each part by one writer in one file (`PARTS`;
    `tests/governor/test_ending_writers.py` holds it), read by `judge` only. The
    fields without a default come first; then each part's, under its writer."""

    agent: str
    """The agent's name in reasons (as it introduced itself, or its preset's)."""
    preset: str
    """The preset id, or ``acp`` / ``command`` for a program of your own."""
    run_id: str
    elapsed_s: float
    timeout_s: float

    # -- the attempt: governor/attempt/under_way.py --
    sandboxed_agent: bool = True
    log: str | None = None
    workspace: str | None = None
    """The attempt's workspace (its first root), absolute."""
    masker: Masker = field(default_factory=Masker)

    # -- the processes: governor/attempt/under_way.py --
    timed_out: bool = False
    interrupted: bool = False
    """Ended by the caller's `stop` (SIGINT or SIGTERM for `governor run`)."""
    error: str | None = None
    """What went wrong starting or talking to the agent, in its words."""
    sign_in: str | None = None
    """The login command, when the agent said it needs signing in."""
    gave_up: str | None = None
    """Why the connection stopped listening to the agent (what it sent)."""
    broke: str | None = None
    """What failed in the governor itself (one of the attempt's tasks raised): the
    attempt is failed whatever the agent did. The lifecycle writes it."""
    command: CommandResult | None = None
    limit: str | None = None
    """The limit the agent's process stopped at, in words (`governor.sandbox.host.limits.blame`)."""
    stderr_tail: tuple[str, ...] = ()
    unseen_folders: tuple[str, ...] = ()
    """``VAR=path`` for each folder variable the agent was given whose folder its
    sandbox does not show (`governor.confine.sandboxes.unseen_folders`)."""
    rejected_lines: int = 0
    """Lines of the agent rejected at the wire (not a JSON-RPC message the
    governor could read); each is a ``wire`` record of the log."""
    rejected_methods: tuple[str, ...] = ()
    """The methods those lines named, when readable (the first few, in order)."""
    network_refused: tuple[str, ...] = ()
    """The agent's connections the proxy refused by a rule, as ``host:port``,
    first first (an ``--allow-host`` would let them through)."""
    network_unreachable: tuple[str, ...] = ()
    """The agent's connections no rule refused but that could not be made (a
    name that does not resolve): each one's reason, first first."""

    # -- the gate: governor/gate/gatekeeper.py --
    carried: Carried = field(default_factory=Carried)
    """What the gate carried out (writes, reads, terminals, allowed permissions):
    the evidence the attempt explains the workspace's changes with; not judged."""
    pending: dict[str, Any] | None = None
    """The ask that paused the attempt, as the agent sent it (written by the gate)."""
    failure: str | None = None
    """Why the gate failed closed (the audit log or the sandbox broke); the gate
    writes it here when it happens."""
    unknown_requests: dict[str, int] = field(default_factory=dict)
    """Requests the agent made of methods the governor does not know: name -> calls
    (the gate's routes count them here)."""
    blocked: str | None = None
    """The reason the agent gave with the governor's ``blocked`` tool: the task
    cannot be done as specified (written by the tool)."""

    # -- the turn: governor/attempt/agent_session.py --
    stop_reason: str | None = None
    final_message: str = ""
    mode: dict[str, Any] | None = None
    model: str | None = None
    """The model the agent was put on (``--model``), as the agent names it."""
    alone: tuple[str, ...] = ()
    """Config options left letting the agent act without asking (no asking value)."""
    title: str | None = None
    config: dict[str, Any] = field(default_factory=dict)
    """The agent's config options at the end, id -> value."""
    plan: list[dict[str, Any]] = field(default_factory=list)
    usage: dict[str, Any] | None = None
    notices: tuple[str, ...] = ()
    bad_updates: int = 0

    # -- the workspace: governor/attempt/roots_changes.py --
    files_changed: tuple[str, ...] = ()
    """The roots' files created, changed or deleted (the workspace diff)."""
    findings: tuple[Finding, ...] = ()
    """The tamper audit of the diff (`governor.tamper.baseline.audit`)."""
    findings_more: int = 0
    """Findings past those listed (the audit's bound)."""
    audit_skipped: int = 0
    """Files the tamper audit could not cover (past its bounds, unreadable)."""
    home_changes: tuple[Change, ...] = ()
    """What changed in the agent's own home folders (`governor.ending.home_changes`)."""
    home_complete: bool = True
    """Whether the walk of those folders saw all of them."""
    frozen: dict[str, Any] | None = None
    """The frozen files' digest at the attempt's start and end (``start``, ``end``:
    each ``{"sha256", "files"}``); None when nothing is frozen."""
    held_out: dict[str, Any] | None = None
    """The held-out files' digest when held out and when put back for the checks,
    and the held-out paths the agent had made something at (`governor.checks.held_out`)."""
    checks: Checks = field(default_factory=Checks)
    """The job's checks after the attempt; their verdict is the outcome's, apart
    from its status (an agent may report success on a failing test)."""
    harness: dict[str, Any] | None = None
    """The checks' harness set as the job left it (`governor.confine.harness.described`)."""

    # -- the log: governor/attempt/lifecycle.py --
    tally: Tally = field(default_factory=Tally)
    unasked_paths: tuple[str, ...] = ()
    decisions: int = 0
    """How many decision records the attempt wrote to `log` (all but its start
    and end): where its decision log is, with `run_id`, not the records."""


PARTS: Final[tuple[tuple[str, str, tuple[str, ...]], ...]] = (
    (
        "the attempt",
        "governor/attempt/under_way.py",
        ("agent", "preset", "run_id", "timeout_s", "sandboxed_agent", "log", "workspace", "masker",),
    ),
    (
        "the processes",
        "governor/attempt/under_way.py",
        ("elapsed_s", "timed_out", "interrupted", "error", "sign_in", "gave_up", "broke", "command", "limit", "stderr_tail", "unseen_folders", "rejected_lines", "rejected_methods", "network_refused", "network_unreachable",),
    ),
    (
        "the gate",
        "governor/gate/gatekeeper.py",
        ("carried", "pending", "failure", "unknown_requests", "blocked",),
    ),
    (
        "the turn",
        "governor/attempt/agent_session.py",
        ("stop_reason", "final_message", "mode", "model", "alone", "title", "config", "plan", "usage", "notices", "bad_updates",),
    ),
    (
        "the workspace",
        "governor/attempt/roots_changes.py",
        ("files_changed", "findings", "findings_more", "audit_skipped", "home_changes", "home_complete", "frozen", "held_out", "checks", "harness",),
    ),
    (
        "the log",
        "governor/attempt/lifecycle.py",
        ("tally", "unasked_paths", "decisions",),
    ),
)
"""Each part of an `Ending`: its name, the one file that writes its fields, and
the fields. Nothing else assigns them (a test holds it): who set a fact, and
when, is read in one file, never found with a grep."""


def _command(e: Ending) -> Judgement | None:
    result = e.command
    if result is None or e.timed_out or e.interrupted:
        return None
    if result.code == 0:
        return judged(result.stdout)
    why = result.stdout.strip() or " | ".join(
        line for line in result.stderr.splitlines()[-5:] if line.strip()
    )
    how = "by a signal" if result.code is not None and result.code < 0 else str(result.code)
    if e.limit is not None:
        how += f", stopped at its {e.limit}"
    return Judgement("failed", f"{e.agent} exited {how}: {why[:500]}")


def _paused(e: Ending) -> Judgement | None:
    if e.pending is None:
        return None
    return Judgement("needs_approval", str(e.pending.get("reason")))


def _blocked(e: Ending) -> Judgement | None:
    """The agent called the governor's ``blocked`` tool (the turn was then ended
    for it: its stop reason is the cancel's, not its word)."""
    return Judgement("blocked", e.blocked) if e.blocked is not None else None


def _failed_closed(e: Ending) -> Judgement | None:
    return Judgement("failed", e.failure) if e.failure else None


def _broke(e: Ending) -> Judgement | None:
    return Judgement("failed", e.broke) if e.broke else None


def _limit(e: Ending) -> Judgement | None:
    if e.limit is None:
        return None
    return Judgement("failed", f"{e.agent} was stopped at its {e.limit}")


def _gave_up(e: Ending) -> Judgement | None:
    if e.gave_up is None:
        return None
    return Judgement("failed", f"{e.agent} {e.gave_up}; the governor stopped listening to it")


def _interrupted(e: Ending) -> Judgement | None:
    if not e.interrupted:
        return None
    return Judgement(
        "failed",
        f"the governor was interrupted after {e.elapsed_s:.0f} s; {e.agent}'s turn was cancelled",
    )


def _sign_in(e: Ending) -> Judgement | None:
    return Judgement("failed", e.error) if e.sign_in is not None else None


def _timed_out(e: Ending) -> Judgement | None:
    if not e.timed_out:
        return None
    return Judgement(
        "failed",
        f"{e.agent} did not finish within {e.timeout_s:g} s (the wall limit); "
        "its turn was cancelled",
    )


def _stopped(e: Ending) -> Judgement | None:
    if e.stop_reason is None:
        return None
    return from_stop_reason(e.stop_reason, e.final_message, e.agent)


def _error(e: Ending) -> Judgement | None:
    return Judgement("failed", e.error) if e.error is not None else None


def _no_answer(e: Ending) -> Judgement:
    return Judgement("failed", f"{e.agent} ended without an answer")


PRECEDENCE: Final[tuple[tuple[str, Callable[[Ending], Judgement | None]], ...]] = (
    ("a plain command's exit", _command),
    ("an ask paused the attempt", _paused),
    ("the gate failed closed", _failed_closed),
    ("the governor itself failed", _broke),
    ("the agent stopped at a limit", _limit),
    ("the connection gave up on the agent", _gave_up),
    ("the agent said it is blocked", _blocked),
    ("the governor was interrupted", _interrupted),
    ("the agent needs signing in", _sign_in),
    ("the attempt timed out", _timed_out),
    ("the agent ended its turn", _stopped),
    ("an error talking to the agent", _error),
    ("no answer", _no_answer),
)
"""The first row whose fact holds decides; the last always does."""


def judgement(e: Ending) -> Judgement:
    """The status, reason and summary the facts come to (`PRECEDENCE`), with the
    agent's last meaningful stderr lines added to a failure (`said`)."""
    found = next(j for _, row in PRECEDENCE if (j := row(e)) is not None)
    # A limit says why by itself, as does a failure the gate closed on (the model
    # API that cannot be reached names its host): a refused host or a hidden
    # folder did not cause it.
    hints = found.status == "failed" and e.limit is None and not e.failure
    if hints and e.network_refused and found.reason is not None:
        hosts = e.network_refused[:3]
        more = f" and {len(e.network_refused) - 3} more" if len(e.network_refused) > 3 else ""
        found.reason = (
            f"{found.reason} -- the proxy refused {e.agent}'s connection to "
            f"{', '.join(hosts)}{more} (--allow-host {hosts[0]} would allow it)"
        )
    if hints and e.network_unreachable and found.reason is not None:
        # No rule refused these: a flag would change nothing; the machine's resolver might.
        found.reason = (
            f"{found.reason} -- {e.agent} could not reach {e.network_unreachable[0]} "
            "(no rule refused it: check this machine's DNS and network)"
        )
    if hints and e.unseen_folders and found.reason is not None:
        found.reason = (
            f"{found.reason} -- {e.agent} was given {', '.join(e.unseen_folders)}, "
            f"{'a folder' if len(e.unseen_folders) == 1 else 'folders'} its sandbox does "
            "not show (keep one with the policy's [sandbox] keep, or point the variable "
            "inside the workspace)"
        )
    words = said(e.stderr_tail)
    if found.status == "failed" and words and found.reason and words not in found.reason:
        found.reason = f"{found.reason} -- {e.agent} said: {words}"
    return found


SAID_LINES: Final = 3
SAID_CHARS: Final = 500


def said(tail: Sequence[str]) -> str | None:
    """The agent's last `SAID_LINES` meaningful stderr lines, oldest first, joined
    with `` | `` and cut to the newest `SAID_CHARS`; None when none is.

    A line with no letter or digit (``}``, ``]``, ``---``) is skipped: an agent
    that dies dumping a JSON object would otherwise be quoted saying ``}``.
    """
    lines = [line.strip() for line in tail if any(c.isalnum() for c in line)]
    if not lines:
        return None
    text = " | ".join(lines[-SAID_LINES:])
    return text if len(text) <= SAID_CHARS else "..." + text[-SAID_CHARS:]


def judge(e: Ending) -> Outcome:
    """The outcome of an attempt that ended as `e`; every text masked."""
    j = judgement(e)
    t = e.tally
    notices = list(e.notices)
    if t.unasked:
        notices.append(
            f"{e.agent} did {t.unasked} thing(s) without asking: {', '.join(e.unasked_paths) or 'see the log'}"
        )
    if not e.sandboxed_agent:
        notices.append(
            f"{e.agent} ran without the agent sandbox: what it did without asking was not confined"
        )
    if e.bad_updates:
        notices.append(
            f"{e.agent} sent {e.bad_updates} malformed session update(s); they were logged and ignored"
        )
    if e.rejected_lines:
        named = f" (naming {', '.join(e.rejected_methods)})" if e.rejected_methods else ""
        notices.append(
            f"{e.agent} sent {e.rejected_lines} line(s) rejected at the wire{named}: not a "
            "JSON-RPC message the governor could read, answered with an error and "
            "recorded as wire records"
        )
    for method, calls in e.unknown_requests.items():
        notices.append(
            f"{e.agent} sent {calls} request(s) of {method}, a method the governor does not "
            "know; each was answered -32601"
        )
    home = homes.notice(e.agent, e.home_changes, e.home_complete)
    if home is not None:
        notices.append(home)
    if e.alone:
        notices.append(
            f"{e.agent} decides alone: its {', '.join(e.alone)} cannot be set to a value that asks"
        )
    notices.extend(_tamper_notices(e))
    if e.checks.runs and e.checks.workspace == "read-only":
        notices.append(READ_ONLY_NOTICE)
    asks = None if e.mode is None else e.mode.get("asks")
    masked = e.masker
    acp = AcpReport(
        agent=e.agent,
        preset=e.preset,
        mode=e.mode,
        decides_alone=asks is False or t.unasked > 0 or bool(e.alone),
        known=asks is not None,
        unasked=t.unasked,
        unasked_paths=list(e.unasked_paths),
        tally=t,
        rejected_lines=e.rejected_lines,
        plan=masked.json(e.plan),  # the agent's words
        notices=[masked.text(n) for n in notices],
        sandboxed_agent=e.sandboxed_agent,
        model=e.model,
        title=masked.text(e.title) if e.title else None,
        config=masked.json(e.config),
    )
    return Outcome(
        status=j.status,
        reason=masked.text(j.reason) if j.reason else None,
        summary=masked.text(j.summary) if j.summary else None,
        run_id=e.run_id,
        decisions=e.decisions,
        usage=e.usage,
        acp=acp,
        pending=masked.json(e.pending),  # the request as the agent sent it
        log=e.log,
        workspace=masked.text(e.workspace) if e.workspace else None,
        duration_s=round(e.elapsed_s, 3),
        sign_in=e.sign_in,
        findings=[
            replace(f, path=masked.text(f.path), detail=masked.text(f.detail))
            for f in (*e.findings, *_lies(e.checks))
        ],
        files_changed=[masked.text(p) for p in e.files_changed],
        home_changed=[masked.text(c.path) for c in e.home_changes],
        checks_run=[
            replace(c, command=masked.text(c.command), tail=masked.text(c.tail))
            for c in e.checks.runs
        ],
        verdict=e.checks.verdict,
        frozen=e.frozen,
        held_out=e.held_out,
        tests=_tests(e.checks, masked),
        harness=e.harness,
    )


def _tests(checks: Checks, masked: Masker) -> dict[str, Any] | None:
    """The acceptance tests' judgement, as the outcome holds it (None without checks)."""
    if not checks.runs or checks.judgement is None:
        return None
    out: dict[str, Any] = masked.json(checks.judgement.to_json())
    return out


def _lies(checks: Checks) -> list[Finding]:
    """A ``runner-lied`` finding for each check whose runner misreported its
    canaries (`governor.checks.canaries`), naming the check (its command as the path)."""
    return [
        Finding(run.command, None, "runner-lied", f"check {n}: {run.lie.detail()}")
        for n, run in checks.lies()
        if run.lie is not None
    ]


def _tamper_notices(e: Ending) -> list[str]:
    """What a loop must know before it trusts its checks: the diff weakens the
    tests, or the audit did not cover every file."""
    out = []
    if e.findings:
        count = len(e.findings) + e.findings_more
        rules = sorted({f.rule for f in e.findings})
        first = e.findings[0]
        where = f"{first.path}:{first.line}" if first.line is not None else first.path
        out.append(
            f"the tamper audit found {count} change(s) that weaken the tests "
            f"({', '.join(rules)}), first {where}: {first.detail}"
        )
    if e.audit_skipped:
        out.append(
            f"the tamper audit did not cover {e.audit_skipped} file(s) (past its bounds, "
            "links or unreadable)"
        )
    return out
