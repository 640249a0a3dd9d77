"""`governor approve LOG`: a person's decision on the request a paused attempt
waits on, written into that attempt's own audit chain (issue 38).

The record (kind ``approval``) names who decided (the OS user running this
command, and its uid), when (its time), which request, and the answer
(``once``, ``always`` or ``deny``); `governor audit verify` checks it with the
rest of the chain. Nothing runs here: `governor resume LOG` goes on.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from governor.cli import REFUSED_BEFORE_START


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `approve` subcommand."""
    p = sub.add_parser(
        "approve",
        help="decide the request a paused attempt waits on (then: governor resume LOG)",
        description="Write a person's decision on the request a paused attempt "
        "(--approvals pause, exit 4) waits on into its audit log's chain: approved once "
        "(default), for the rest of the attempt (--always), or refused (--deny). The "
        "decision never widens the job: what the policy or the ceiling refuses stays "
        "refused. Exit 0 when written, 2 when there is nothing to decide.",
    )
    p.add_argument("log", metavar="LOG", help="the paused attempt's audit log")
    p.set_defaults(func=main)
    p.add_argument(
        "--attempt", metavar="ID", default=None,
        help="the paused attempt's id, as the pause printed it (needed when LOG holds "
        "several paused attempts)",
    )  # fmt: skip
    p.add_argument(
        "--request", metavar="N", type=int, default=None,
        help="the waiting request's number, as the pause printed it (checked)",
    )  # fmt: skip
    answer = p.add_mutually_exclusive_group()
    answer.add_argument("--deny", action="store_true", help="refuse the request")
    answer.add_argument(
        "--always", action="store_true",
        help="allow it, and every identical request, for the rest of the attempt",
    )  # fmt: skip


def main(args: argparse.Namespace) -> int:
    """Write the decision, and say how to go on."""
    from governor.attempt.paused import NotPaused, approve, os_user
    from governor.boundary.display import terminal

    answer = "deny" if args.deny else "always" if args.always else "once"
    log = Path(args.log).expanduser()
    user, uid = os_user()
    try:
        record = approve(log, args.request, answer, user, uid, args.attempt)
    except NotPaused as e:
        print(terminal(f"governor: {e}"), file=sys.stderr)  # it quotes the agent's words
        return REFUSED_BEFORE_START
    import shlex

    words = {"once": "approved once", "always": "approved for the rest of the attempt", "deny": "refused"}
    what = record.get("shown")
    print(
        f"request {record.get('request')} of attempt {record['attempt']}: {words[answer]} by "
        f"{user} (record {record['seq']})"
        + (f"\n  {terminal(str(what))}" if what else "")  # the request whole, masked: what was decided
        + f"\ngo on: governor resume {shlex.quote(str(log))} --attempt {record['attempt']}"
    )
    return 0
