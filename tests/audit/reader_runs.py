"""Every audit reader run on one log or batch output through `governor audit`'s
own entry point, its output captured: what the fuzz test and its long run
call. A crash is an exception out of it; an exit code outside 0-2 is one too.

`views` are command lines, parsed as the command line parses them; `readers`
are the same readers called directly (the long run's many inputs: argparse
would cost more than most logs' reading), each through `answered`, the
errors-to-exit-codes of the command itself."""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import traceback
from collections.abc import Callable
from functools import partial
from pathlib import Path

from governor.cli import build_parser
from governor.cli.audit import answered, main, run_table
from governor.cli.audit_checks import run_replay, run_verify
from governor.cli.audit_report import run_html_report


def views(log: Path, policy: Path, page: Path) -> list[list[str]]:
    """The command lines of every reader of one log."""
    name = str(log)
    return [
        [name],
        ["--json", name],
        ["--refused", name],
        ["--network", name],
        ["--mcp", name],
        ["--mcp", "--json", name],
        ["--attempt", "a1", name],
        ["--attempt", "a", "--json", name],
        ["verify", name],
        ["verify", "--json", name],
        ["report", name, "--attempt", "a1", "-o", str(page)],
        ["replay", name, "--policy", str(policy)],
    ]


def readers(log: Path, policy: Path, page: Path) -> list[tuple[str, Callable[[], int]]]:
    """The readers of `views`, called directly: (what it is, the call)."""
    name = str(log)
    return [
        ("table", partial(run_table, [name])),
        ("table --json", partial(run_table, [name], as_json=True)),
        ("--refused", partial(run_table, [name], refused=True)),
        ("--network", partial(run_table, [name], network=True)),
        ("--mcp", partial(run_table, [name], mcp=True)),
        ("--mcp --json", partial(run_table, [name], mcp=True, as_json=True)),
        ("--attempt a1", partial(run_table, [name], attempt="a1")),
        ("--attempt a --json", partial(run_table, [name], attempt="a", as_json=True)),
        ("verify", partial(run_verify, [name])),
        ("verify --json", partial(run_verify, [name], as_json=True)),
        ("report", partial(run_html_report, [name], str(page), attempt="a1")),
        ("replay", partial(run_replay, name, str(policy))),
    ]


def batch_readers(root: Path) -> list[tuple[str, Callable[[], int]]]:
    """The readers of `batch_views`, called directly."""
    outcomes = str(root / "outcomes.jsonl")
    return [
        ("batch table", partial(run_table, [str(root)])),
        ("batch --json", partial(run_table, [str(root)], as_json=True)),
        ("verify --outcomes", partial(run_verify, [], outcomes=outcomes)),
    ]


def reader_crashes(calls: list[tuple[str, Callable[[], int]]]) -> list[str]:
    """Each direct call that raised or exited outside 0-2, with its traceback's end."""
    found = []
    for what, call in calls:
        out, err = io.StringIO(), io.StringIO()
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                code = answered(call)
        except Exception:
            found.append(f"{what}: {traceback.format_exc()[-1500:]}")
            continue
        if code not in (0, 1, 2) or "Traceback" in err.getvalue():
            found.append(f"{what}: exit {code}: {err.getvalue()[-500:]}")
    return found


def batch_views(root: Path) -> list[list[str]]:
    """The command lines of every reader of a batch's output."""
    return [
        [str(root)],
        ["--json", str(root)],
        ["verify", "--outcomes", str(root / "outcomes.jsonl")],
        ["report", str(root), "-o", str(root.parent / f"{root.name}-batch.html")],
    ]


@functools.cache
def _parser() -> argparse.ArgumentParser:
    return build_parser()  # built once: it costs more than most logs' reading


def run(argv: list[str]) -> tuple[int, str, str]:
    """`governor audit ARGV`: its exit code, stdout and stderr."""
    ns = _parser().parse_args(["audit", "--", *argv])  # the command line's own parse
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
