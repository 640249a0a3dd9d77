"""Every audit reader run on one log or batch output through `governor audit`'s
own entry point, its output captured: what the fuzz test and its long run
call. A crash is an exception out of it; an exit code outside 0-2 is one too."""

from __future__ import annotations

import contextlib
import io
import traceback
from pathlib import Path

from governor.cli import build_parser
from governor.cli.audit import main


def views(log: Path, policy: Path, page: Path) -> list[list[str]]:
    """The command lines of every reader of one log."""
    name = str(log)
    return [
        [name],
        ["--json", name],
        ["--refused", name],
        ["--network", name],
        ["--attempt", "a1", name],
        ["--attempt", "a", "--json", name],
        ["verify", name],
        ["verify", "--json", name],
        ["report", name, "--attempt", "a1", "-o", str(page)],
        ["replay", name, "--policy", str(policy)],
    ]


def batch_views(root: Path) -> list[list[str]]:
    """The command lines of every reader of a batch's output."""
    return [
        [str(root)],
        ["--json", str(root)],
        ["verify", "--outcomes", str(root / "outcomes.jsonl")],
        ["report", str(root), "-o", str(root.parent / f"{root.name}-batch.html")],
    ]


def run(argv: list[str]) -> tuple[int, str, str]:
    """`governor audit ARGV`: its exit code, stdout and stderr."""
    ns = build_parser().parse_args(["audit", "--", *argv])  # the command line's own parse
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(ns)
    return code, out.getvalue(), err.getvalue()


def crashes(commands: list[list[str]]) -> list[str]:
    """Each command that raised or exited outside 0-2, with its traceback's end."""
    found = []
    for argv in commands:
        try:
            code, _, err = run(argv)
        except Exception:
            found.append(f"{argv}: {traceback.format_exc()[-1500:]}")
            continue
        if code not in (0, 1, 2) or "Traceback" in err:
            found.append(f"{argv}: exit {code}: {err[-500:]}")
    return found
