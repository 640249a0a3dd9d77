"""`governor resume LOG`: a paused attempt goes on, after `governor approve` (issue 38).

The agent is started again under the same job: the policy and the ceiling as
the attempt began (refused when either changed since), what is left of its
wall time (the wall spans every part), its id, its log's chain. Its own session is resumed
(``session/resume``) or loaded (``session/load``) when it advertised either, and
it is told the person's decision; an agent that can do neither starts afresh at
the task, and the outcome says so. The request the person decided is answered
so when the agent asks it again; any other ask pauses the attempt again.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from governor.cli import REFUSED_BEFORE_START, exit_code


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `resume` subcommand."""
    p = sub.add_parser(
        "resume",
        help="go on with a paused attempt after governor approve",
        description="Go on with the attempt paused in LOG, once a person decided its "
        "waiting request (governor approve): the same job, its own session resumed or "
        "loaded where the agent can, else afresh (said in the outcome); one attempt id, "
        "one chain.",
    )
    p.add_argument("log", metavar="LOG", help="the paused attempt's audit log")
    p.set_defaults(func=main)
    p.add_argument(
        "--attempt", metavar="ID", default=None,
        help="the paused attempt's id, as the pause printed it (needed when LOG holds "
        "several paused attempts)",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the outcome as JSON")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")


def main(args: argparse.Namespace) -> int:
    """Prepare the paused job again, check it is the same, and run its next part."""
    import trio

    from governor.attempt.paused import NotPaused, continuation, exclusive
    from governor.boundary.display import terminal
    from governor.job.spec import RefusedBeforeStart
    from governor.observe import logs

    logs.configure(json_lines=args.json or not sys.stderr.isatty())
    log = Path(args.log).expanduser()
    try:
        attempt = continuation(log, args.attempt).state.attempt
        with exclusive(attempt):  # one resume at a time: never two parts into one chain
            going_on = continuation(log, attempt)
            prepared = _prepared(going_on, args)
            outcome = trio.run(_run, prepared, going_on)
    except (NotPaused, RefusedBeforeStart) as e:
        for problem in getattr(e, "problems", None) or [str(e)]:
            print(terminal(f"governor: {problem}"), file=sys.stderr)  # it may quote the agent
        return REFUSED_BEFORE_START
    code = exit_code(outcome)
    if args.json:
        from governor.cli.outcome_json import document, write_json

        write_json(document(outcome, code), sys.stdout, indent=2)
        print()
    else:
        from governor.cli.run import print_summary

        print_summary(outcome)
    if outcome.status == "needs_approval":
        from governor.cli.run import print_pause

        print_pause(outcome, sys.stderr if args.json else sys.stdout)
    return code


async def _run(prepared: Any, going_on: Any) -> Any:
    from governor.attempt.lifecycle import run_attempt

    return await run_attempt(prepared, continues=going_on)


def _prepared(going_on: Any, args: argparse.Namespace) -> Any:
    from governor.attempt.paused import prepared_again

    on_event = None
    if not (args.json or args.quiet):
        from governor.cli.progress import Progress

        on_event = Progress(sys.stderr)
    return prepared_again(going_on, on_event=on_event)
