"""`governor run`: the main job -- one governed attempt of an agent at a task.

The attempt's machinery (trio, the ACP schema, the sandbox) is imported when
`main` runs, not with this module: `governor --help` and every other command
build this parser too, and must not wait half a second for what they never use.
"""

from __future__ import annotations

import argparse
import gc
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from governor.boundary.person_files import link_out, open_output, read_input_text
from governor.cli import EXIT_CODES, FAILED_ON, REFUSED_BEFORE_START, exit_code
from governor.policies.capability import CAPABILITY_NAMES, Capability

if TYPE_CHECKING:
    from governor.ending.outcome import Outcome
    from governor.job.spec import AttemptSpec, Prepared
    from governor.sandbox.host.processes import WrittenPlaces


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `run` subcommand."""
    p = sub.add_parser(
        "run",
        help="run one governed attempt of an agent at a task",
        description="Run an ACP agent at one task under the policy engine, the sandbox and the "
        "audit log. The agent is a preset (--agent ID) or the ACP command after --.",
        usage="governor run [OPTIONS] PROMPT [-- AGENT_COMMAND ARG ...]",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("prompt", nargs="?", help="the task; '-' reads it from stdin")
    p.add_argument(
        "--agent", metavar="ID", help="a preset from presets.toml (see `governor presets`)"
    )
    p.add_argument(
        "--kind",
        choices=("acp", "command"),
        default="acp",
        help="the command after -- speaks ACP (default), or is a plain program that gets the "
        "prompt on stdin and is judged by its exit status, last output and the workspace diff",
    )
    p.add_argument("--prompt-file", metavar="FILE", help="read the task from a file")
    p.add_argument(
        "--workspace",
        metavar="DIR",
        help="where the agent works (default: .; with --clone, where the clone goes: a "
        "folder that does not exist yet, or an empty one)",
    )
    p.add_argument(
        "--clone",
        metavar="URL@REF",
        help="work in a fresh clone of URL at REF (default: its HEAD) holding only the ref's "
        "history, its remote pointing nowhere; made in a folder of its own under "
        "$XDG_STATE_HOME/acp-governor/attempts/ (hidden from every other attempt's sandbox, "
        "whatever $TMPDIR is) unless --workspace says where, and kept (see docs/loops.md)",
    )
    p.add_argument(
        "--add-dir", metavar="DIR", action="append", default=[], help="another root (repeatable)"
    )
    p.add_argument(
        "--policy",
        metavar="FILE|NAME",
        help="the job's policy: a TOML file, or a shipped policy by name (read-only, "
        "edit-workspace, ci, full-access); default: the least authority (read-only)",
    )
    p.add_argument(
        "--capability", choices=CAPABILITY_NAMES, help="override the policy's capability"
    )
    p.add_argument(
        "--ceiling", metavar="FILE", help="the operator's ceiling (see `governor check`)"
    )
    p.add_argument("--model", metavar="M", help="the agent's model, where it offers a choice")
    p.add_argument(
        "--mode", metavar="MODE", help="the agent's session mode (default: one in which it asks)"
    )
    p.add_argument(
        "--timeout",
        metavar="S",
        type=float,
        default=None,
        help="seconds for the attempt: wins over the policy's [limits] wall (default 1800)",
    )
    p.add_argument(
        "--approvals",
        choices=("unattended", "person", "pause"),
        default=None,
        help="who answers an ask: nobody (refuse), a person at this terminal, or pause the "
        "attempt as needs_approval (default: the policy's on_ask)",
    )
    p.add_argument(
        "--no-sandbox-agent",
        action="store_true",
        help="do not sandbox the agent process itself (recorded)",
    )
    p.add_argument(
        "--env",
        metavar="NAME",
        action="append",
        default=[],
        help="pass this variable to the agent (names only)",
    )
    p.add_argument(
        "--allow-host",
        metavar="HOST[:PORT]",
        action="append",
        default=[],
        help="a host the agent's sandbox may reach through the proxy, besides its model API "
        "(repeatable; no port: 443 and 80; loopback and private addresses need the port)",
    )
    p.add_argument(
        "--agent-arg",
        metavar="ARG",
        action="append",
        default=[],
        help="a raw argument appended to a preset's argv, written --agent-arg=ARG when it starts with - (needs the ceiling's allow_agent_args; its value is never shown)",
    )
    p.add_argument(
        "--check",
        metavar="CMD",
        action="append",
        default=[],
        help="a shell line run after the attempt in a fresh sandbox (network off, the "
        "workspace unchangeable), after the policy's [checks] commands; the verdict is "
        "passed when every check exits 0 (repeatable)",
    )
    p.add_argument(
        "--held-out",
        metavar="GLOB",
        action="append",
        default=[],
        help="tests the agent never sees (a glob relative to the workspace, as the policy's "
        "[sandbox] held_out): moved out of every sandbox before the agent starts, put back "
        "only for the checks; a glob that matches nothing is refused (repeatable)",
    )
    p.add_argument(
        "--tries",
        metavar="N",
        type=int,
        default=1,
        help="while the checks' verdict is failed, up to N attempts in all, each in a fresh "
        "copy of the starting workspace, told the failed checks' digest; each try its own "
        "log, the outcome lists them in 'tries' (default 1)",
    )
    p.add_argument(
        "--append-rules", action="store_true", help="append the governor's rules to the prompt"
    )
    p.add_argument(
        "--governor-tools",
        action="store_true",
        help="offer the agent the governor's own run, read and write tools as the MCP server "
        "'governor', as the policy's [mcp] governor_tools does (docs/mcp.md)",
    )
    p.add_argument(
        "--log",
        metavar="FILE",
        help="the audit log (default: a new file under $XDG_STATE_HOME/acp-governor/)",
    )
    p.add_argument(
        "--fsync",
        choices=("batch", "always"),
        default="batch",
        help="audit durability (default batch)",
    )
    p.add_argument(
        "--fail-on",
        metavar="WHAT",
        default="",
        help="refused, unasked or both (refused,unasked): exit 6 when an attempt that "
        "completed had a refusal or a change made without asking (default: exit 0)",
    )
    p.add_argument(
        "--json",
        action="store_true",
        help="print only the outcome JSON on stdout (a refusal before start too)",
    )
    talk = p.add_mutually_exclusive_group()
    talk.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no line per event on stderr: only the summary (and errors)",
    )
    talk.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="with the line per event, what the agent says and each tool call it reports",
    )
    p.add_argument(
        "--events",
        metavar="FILE",
        help="write every event as a JSON line to FILE as it happens ('-': stdout, which "
        "then holds only the events, the outcome last); the format is in docs/cli.md",
    )
    p.add_argument(
        "--annotate",
        action="store_true",
        help="print GitHub Actions ::error/::warning lines for refusals and unasked changes "
        "(the job summary is written whenever $GITHUB_STEP_SUMMARY is set)",
    )
    p.add_argument(
        "--otel",
        action="store_true",
        help="export the attempt's trace and metrics over OTLP/HTTP (on too when "
        "$OTEL_EXPORTER_OTLP_ENDPOINT is set; needs pip install 'acp-governor[otel]')",
    )
    p.set_defaults(func=main, command=[])


def _written(args: argparse.Namespace) -> WrittenPlaces:
    """The folders an attempt could write, this run's workspace among them: a
    file the person names is not reached through a link out of one
    (`governor.boundary.person_files`)."""
    from governor.sandbox.host.processes import written_places

    return written_places(*([] if args.clone else [args.workspace or "."]))


def _prompt(args: argparse.Namespace, problems: list[str]) -> str:
    """The task, or "" with what is wrong with it added to `problems`, named by
    where it came from (an argument, a file, stdin)."""
    if args.prompt_file and args.prompt is not None:
        problems.append(
            "give the task once: a PROMPT argument or --prompt-file FILE, not both"
        )
        return ""
    if args.prompt_file:
        try:
            text = read_input_text(args.prompt_file, written=_written(args))
        except (OSError, UnicodeDecodeError) as e:
            why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
            problems.append(f"{args.prompt_file}: cannot read the prompt: {why}")
            return ""
        where = f"the prompt file {args.prompt_file}"
    elif args.prompt == "-":
        text, where = sys.stdin.read(), "the prompt read from stdin (-)"
    elif args.prompt is None:
        problems.append(
            "give the task: governor run [OPTIONS] PROMPT (or --prompt-file FILE, or - for stdin)"
        )
        return ""
    else:
        text, where = str(args.prompt), "the PROMPT argument"
    if not text.strip():
        problems.append(f"{where} is empty or only whitespace: give the agent a task")
    return text


FAIL_ON: Final = ("refused", "unasked")
"""What ``--fail-on`` may name: a CI job's own bar for an attempt that completed."""


def _fail_on(value: str, problems: list[str]) -> frozenset[str]:
    """The words of ``--fail-on``, each one of `FAIL_ON`."""
    words = [w.strip() for w in value.split(",") if w.strip()]
    wrong = [w for w in words if w not in FAIL_ON]
    if wrong or (value and not words):
        problems.append(
            f"--fail-on {value!r}: {', '.join(map(repr, wrong)) or 'nothing'} is not accepted "
            f"(accepted: {', '.join(FAIL_ON)}, comma-separated)"
        )
    return frozenset(words) - set(wrong)


def _conflicts(args: argparse.Namespace) -> list[str]:
    """Flags that cannot both hold: one would be dropped without a word."""
    problems = []
    if args.json and args.events == "-":
        problems.append(
            "--json and --events - both want stdout: give --events a file (--events FILE) "
            "or drop --json"
        )
    if args.kind == "command" and args.agent is None and args.model is not None:
        problems.append("--model is for an ACP agent: a plain program (--kind command) has none")
    if args.kind == "command" and args.agent is None and args.mode is not None:
        problems.append("--mode is for an ACP agent: a plain program (--kind command) has none")
    if args.approvals == "person" and not _has_terminal():
        problems.append(
            "--approvals person needs a terminal to ask at, and this process has none: "
            "use --approvals pause (end the attempt needs_approval) or unattended (refuse)"
        )
    return problems


def _has_terminal(tty: str = "/dev/tty") -> bool:
    """Whether a person could be asked: the controlling terminal opens (the
    approver reads it, not stdin, which may carry the prompt)."""
    try:
        os.close(os.open(tty, os.O_RDWR | os.O_NOCTTY))
    except OSError:
        return False
    return True


def failed_on(outcome: Outcome, fail_on: frozenset[str]) -> list[str]:
    """What of `fail_on` the attempt had: ``refused`` when the policy refused the
    agent anything (a rule, the capability, the ceiling, a person: never a
    failure, `governor.audit.tally`'s ``failed``: a name that does not resolve, a
    host that does not answer, a request after the turn was over), ``unasked``
    when it changed something without asking."""
    acp = outcome.acp
    if acp is None:
        return []
    had = {
        "refused": acp.tally.refused > 0,
        "unasked": acp.tally.unasked > 0 or bool(acp.unasked_paths),
    }
    return [word for word in FAIL_ON if word in fail_on and had[word]]


def main(args: argparse.Namespace) -> int:
    """Run the attempt and map its status to the exit code."""
    # No collections until the attempt starts (`freeze_startup_heap` collects once):
    # the imports and the schema's models make little garbage, and each collection
    # on the way walked the whole growing heap again for it.
    gc.disable()
    import trio

    from governor.cli import ci, cloning
    from governor.job.spec import AttemptSpec, RefusedBeforeStart
    from governor.observe import logs

    logs.configure(json_lines=args.json or not sys.stderr.isatty())
    command = list(args.command)
    problems = _conflicts(args)
    fail_on = _fail_on(args.fail_on, problems)
    events, sink = _events(args, problems)
    if args.log and (why := link_out(os.path.dirname(args.log) or ".", _written(args))):
        problems.append(f"--log {args.log}: cannot write the audit log: {why}")
    progress = None if args.json or args.quiet or args.events == "-" else _progress(args)
    trace = cloned = None
    try:
        trace = _trace(args)
        # --json and --events - keep stdout for themselves: a first npx start's
        # fetch (a minute of nothing) is still said, on stderr
        fetching = _fetching if progress is None and not args.quiet else None
        on_event = _both(progress, events, trace, fetching)
        prompt = _prompt(args, problems)
        approver = _approver(args.approvals)
        cloned = cloning.make(args, problems) if args.clone else None
        spec = AttemptSpec(
            prompt=prompt,
            agent=args.agent,
            argv=command or None,
            workspace=cloned.path if cloned else args.workspace or ".",
            extra_dirs=args.add_dir,
            policy=args.policy,
            capability=Capability.parse(args.capability) if args.capability else None,
            ceiling=args.ceiling,
            approver=approver,
            timeout=args.timeout,
            log=args.log,
            sandbox_agent=not args.no_sandbox_agent,
            env=args.env,
            allow_hosts=args.allow_host,
            model=args.model,
            mode=args.mode,
            agent_args=args.agent_arg,
            append_rules=args.append_rules,
            governor_tools=args.governor_tools,
            durability=args.fsync,
            kind=args.kind,
            checks=args.check,
            held_out=args.held_out,
            on_event=on_event,
            trace_id=trace.trace_id if trace is not None else None,
            concealed=_operator_files(args),
        )
        prepared = _prepared(spec, problems, args.tries)
        import governor.attempt.lifecycle  # noqa: F401  (the ACP schema's models: frozen with the rest)

        freeze_startup_heap()
        gc.enable()
        caught: list[int] = []
        outcome = trio.run(run_until_signalled, prepared, args.tries, caught)
        if progress is not None:
            progress.said()  # the agent's last words have no event after them
        matched = failed_on(outcome, fail_on) if exit_code(outcome) == 0 else []
        code = FAILED_ON if matched else exit_code(outcome)
        if caught:  # as a shell expects of a command a signal ended: 130 for Ctrl-C
            code = 128 + caught[0]
        if trace is not None:
            trace.ended(outcome)
        if events is not None:
            events.outcome(outcome, code)
        ci.report(outcome, annotate=args.annotate)
    except RefusedBeforeStart as e:
        if cloned is not None:
            cloned.discard()  # nothing ran in it
        if trace is not None:
            trace.refused(e.problems)
        for problem in e.problems:
            print(f"governor: {problem}", file=sys.stderr)
        if args.json:
            _print_refusal(e.problems)
        return REFUSED_BEFORE_START
    except KeyboardInterrupt:
        print("governor: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    finally:
        if sink is not None and sink is not sys.stdout:
            sink.close()
        if trace is not None and (failed := trace.telemetry.shutdown()) is not None:
            print(f"governor: {trace.masker.text(failed)}", file=sys.stderr)
    if args.events == "-":
        pass  # stdout holds only the events; the outcome was the last
    elif args.json:
        from governor.audit.reading import LogUnreadable
        from governor.cli.outcome_json import document, write_json

        try:
            write_json(document(outcome, code), sys.stdout, indent=2)
        except LogUnreadable as e:
            print(f"\ngovernor: the decision log cannot be printed: {e}", file=sys.stderr)
            return 1
        print()
    else:
        print_summary(outcome)
    if outcome.status == "needs_approval":
        print_pause(outcome, sys.stderr if args.json or args.events == "-" else sys.stdout)
    if matched:
        t = outcome.acp.tally if outcome.acp is not None else None
        counts = {
            "refused": f"{t.refused if t else 0} request(s) refused",
            "unasked": f"{t.unasked if t else 0} change(s) made without asking",
        }
        said = " and ".join(counts[word] for word in matched)
        if "refused" in matched and t is not None and t.failed:
            said += f" ({t.failed} more failed: no rule refused those)"
        print(f"governor: --fail-on {','.join(matched)}: the attempt completed with {said}", file=sys.stderr)
    return code


def _prepared(spec: AttemptSpec, problems: list[str], tries: int = 1) -> Prepared:
    """The spec prepared, or `RefusedBeforeStart` with the command line's problems
    and the spec's together: an operator fixes the whole command in one round."""
    from governor.attempt.tries import tries_problems
    from governor.job.spec import EMPTY_PROMPT, RefusedBeforeStart, prepare

    problems = [*problems, *tries_problems("--tries", tries)]
    try:
        prepared = prepare(spec)
        if tries > 1 and not prepared.policy.checks:
            problems.append(
                f"--tries {tries}: a try follows only a failed verdict, and this job has no "
                "checks: give --check CMD or the policy's [checks] commands"
            )
    except RefusedBeforeStart as e:
        # the command line named the prompt's source; the spec's own words would repeat it
        found = [p for p in e.problems if not (p == EMPTY_PROMPT and problems)]
        problems = [*problems, *found]
    if problems:
        raise RefusedBeforeStart(list(dict.fromkeys(problems)))
    return prepared


def _print_refusal(problems: Sequence[str]) -> None:
    """The ``--json`` document of a run refused before start: stdout always holds
    one object, so a program reading it never parses nothing."""
    import json

    doc = {
        "status": "refused_before_start",
        "refused_before_start": True,
        "exit_code": REFUSED_BEFORE_START,
        "problems": list(problems),
    }
    print(json.dumps(doc, indent=2))


def _operator_files(args: argparse.Namespace) -> tuple[str, ...]:
    """The files this run reads or writes for the person, never for the agent:
    the ``--events`` stream, the ``--prompt-file``, the ``--policy`` file (not a
    shipped name) and the ``--ceiling``; masked in every sandbox of the attempt
    (`governor.job.spec.AttemptSpec.concealed`), as the audit log is. Outside the
    homes they were readable there: the live event stream of the attempt, and
    with ``--tries`` what the checks printed."""
    from governor.job.policy_files import shipped_name

    named = [args.events if args.events != "-" else None, args.prompt_file, args.ceiling]
    if args.policy is not None and shipped_name(args.policy) is None:
        named.append(args.policy)
    return tuple(str(Path(n).expanduser().resolve()) for n in named if n)


def _events(args: argparse.Namespace, problems: list[str]) -> tuple[Any, Any]:
    """The event stream of ``--events`` and the file it writes (None, None without,
    or when it cannot be opened: then the reason is added to `problems`)."""
    if not args.events:
        return None, None
    from governor.boundary.secrets import Masker
    from governor.cli.events import Events

    try:
        if args.events == "-":
            sink = sys.stdout
        else:
            fd, _ = open_output(args.events, written=_written(args))
            sink = os.fdopen(fd, "w", encoding="utf-8")
    except OSError as e:
        problems.append(f"--events {args.events}: cannot write the events: {e.strerror}")
        return None, None
    return Events(sink, Masker.from_environ(os.environ, args.agent_arg)), sink


def _trace(args: argparse.Namespace) -> Any:
    """The attempt's OpenTelemetry trace (``--otel`` or $OTEL_EXPORTER_OTLP_ENDPOINT),
    or None; `governor.observe.otel` is the only module that imports the extra, and loading
    it costs a tenth of a second: not for a run that exports nothing."""
    if not (args.otel or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")):
        return None
    from governor.boundary.secrets import Masker
    from governor.observe import otel

    return otel.for_run(args.otel, Masker.from_environ(os.environ, args.agent_arg))


def _fetching(kind: str, info: dict[str, Any]) -> None:
    """Say a first npx start's fetch on stderr when no progress lines are printed."""
    if kind == "fetching":
        from governor.cli.progress import fetching_line

        print(f"governor: {fetching_line(info)}", file=sys.stderr, flush=True)


def _both(*listeners: Any) -> Any:
    """One ``on_event`` callback for the listeners given (None: nobody listens)."""
    chosen = [listener for listener in listeners if listener is not None]
    if not chosen:
        return None
    if len(chosen) == 1:
        return chosen[0]

    def call(kind: str, info: dict[str, Any]) -> None:
        for listener in chosen:
            listener(kind, info)

    return call


def freeze_startup_heap() -> None:
    """Move every object alive (modules, the schema's models and validators) out
    of the garbage collector's sight (`gc.freeze`), once, before the attempt.

    A chatty agent makes the collector run full collections often, and each
    would walk that whole startup heap again. Reference counting still frees
    frozen objects; only reference cycles among them would stay. No collection
    first: the imports' cyclic garbage is some 2,400 objects (of 108,000), and
    a collection to free it walked the whole heap (35 ms, most of a run's
    margin over the SDK client's start). Done here, in the `governor` process,
    and never by the library: freezing a host application's heap is not ours
    to do.
    """
    gc.freeze()


STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


async def run_until_signalled(
    spec: AttemptSpec | Prepared, tries: int = 1, caught: list[int] | None = None
) -> Outcome:
    """The attempt, ended cleanly by SIGINT or SIGTERM: the turn is cancelled, the
    agent shut down, and the outcome and the log's end record are still written.

    Left to trio's default, SIGINT raises KeyboardInterrupt wherever the attempt
    happens to be (wrapped in exception groups by the nurseries it crosses):
    no outcome, no end record, a traceback. SIGTERM would kill the governor
    outright. A second signal while the attempt winds down is ignored: the
    shutdown is bounded (cancel, grace, SIGTERM, SIGKILL of the agent's tree).
    With ``tries`` above 1, the tries of `governor.attempt.tries.run_tries`; a signal
    ends the try under way and starts no other. The signal that stopped it is
    appended to ``caught``: the command's exit code is then 128 + its number.
    """
    import trio

    from governor.attempt.tries import run_tries
    from governor.job.spec import RefusedBeforeStart

    stop = trio.Event()
    with trio.open_signal_receiver(*STOP_SIGNALS) as signals:
        async with trio.open_nursery() as nursery:

            async def watch() -> None:
                async for signum in signals:
                    if not stop.is_set():
                        if caught is not None:
                            caught.append(signum)
                        name = signal.Signals(signum).name
                        print(f"governor: {name}: cancelling the attempt", file=sys.stderr)
                        stop.set()

            nursery.start_soon(watch)
            try:
                outcome: Outcome | RefusedBeforeStart = await run_tries(spec, tries, stop=stop)
            except RefusedBeforeStart as e:  # raised here, not wrapped in the nursery's group
                outcome = e
            nursery.cancel_scope.cancel()
    if isinstance(outcome, RefusedBeforeStart):
        raise outcome
    return outcome


def _approver(name: str | None) -> Any:
    from governor.gate.approver import Pause, Unattended

    if name is None:
        return None
    if name == "person":
        from governor.cli.person import Person

        return Person()
    return Pause() if name == "pause" else Unattended()


def _progress(args: argparse.Namespace) -> Any:
    from governor.boundary.secrets import Masker
    from governor.cli.progress import Progress

    if not args.verbose:
        return Progress(sys.stderr)
    # what the agent says is its own text: masked as the event stream masks it
    return Progress(sys.stderr, masker=Masker.from_environ(os.environ, args.agent_arg))


def print_pause(outcome: Outcome, out: Any) -> None:
    """How a paused attempt goes on, as the commands to type: approve (or deny)
    its waiting request, then resume it (`governor.attempt.paused`). Said only
    when its state was kept (a log on disk, a job written down)."""
    import contextlib
    import shlex

    from governor.attempt.paused import NotPaused, PausedState, state_path
    from governor.boundary.display import terminal

    pending = outcome.pending or {}
    if outcome.log is None or not state_path(outcome.run_id).exists():
        print("governor: this attempt cannot be resumed from the command line (no log file "
              "or a job given as objects): run it again once the request is allowed", file=out)
        return
    shown = ""
    with contextlib.suppress(NotPaused):  # the request whole, masked (a command's env too)
        shown = str(PausedState.load(outcome.run_id).pending.get("shown") or "")
    log, attempt = shlex.quote(outcome.log), shlex.quote(outcome.run_id)
    n = pending.get("request")
    print(
        f"request {n} of attempt {attempt} waits for a person"
        + (f": {terminal(shown)}" if shown else "")
        + ". To decide it and go on:\n"
        f"  governor approve {log} --attempt {attempt} --request {n}     (or --always, or --deny)\n"
        f"  governor resume {log} --attempt {attempt}",
        file=out,
    )


def print_summary(outcome: Outcome) -> None:
    """A plain summary of the outcome for a person."""
    from governor.boundary.display import terminal, wants_colour
    from governor.cli.progress import summary

    for t in outcome.tries[:-1]:  # the last try is the outcome summed up below
        verdict = t.get("verdict") or "none"
        print(f"try {t['try']}: {t['status']}, verdict {verdict}; log {terminal(t.get('log'))}")
    print(summary(outcome, colour=wants_colour(sys.stdout)))
