"""A spec-driven coding loop around acp-governor: one task, at most two attempts.

Run an attempt, check the result with the project's own test, retry once with
the previous attempt's digest when the check fails, and stop at once when the
agent says it is blocked. Runs as-is against the bundled demo agent:

    .venv/bin/python examples/loop.py --workspace "$(mktemp -d)"

Point ``--agent`` at a real preset (``claude``, ``codex``...) for real work.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from governor import AttemptSpec, Outcome, RefusedBeforeStart, decision_records, run

TASK = "Write hello.py that prints a greeting, and run it."


def check(workspace: Path) -> tuple[bool, str]:
    """The loop's own acceptance test, run after each attempt (outside the agent)."""
    hello = workspace / "hello.py"
    if not hello.exists():
        return False, "hello.py does not exist"
    done = subprocess.run([sys.executable, str(hello)], capture_output=True, text=True, timeout=30)
    if done.returncode != 0 or "hello" not in done.stdout:
        return False, f"hello.py exited {done.returncode}: {done.stdout or done.stderr}"
    return True, done.stdout.strip()


def digest(outcome: Outcome, why: str) -> dict[str, object]:
    """What the next attempt is told about the previous one."""
    tally = outcome.acp.tally if outcome.acp else None
    return {
        "status": outcome.status,
        "reason": outcome.reason,
        "check": why,
        "refused": [
            {"subject": r.get("subject"), "reason": r.get("reason")}
            for r in decision_records(outcome.log, outcome.run_id)
            if r.get("verdict") == "deny"
        ],
        "tally": asdict(tally) if tally else None,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--agent", default="demo")
    parser.add_argument("--policy", default="edit-workspace", help="a shipped policy's name, or a file")
    args = parser.parse_args()

    previous: dict[str, object] | None = None
    for attempt in (1, 2):
        prompt = TASK
        if previous is not None:
            prompt += "\n\n# Previous attempt (failed; its changes stay)\n\n" + json.dumps(
                previous, indent=2
            )
        try:
            outcome = run(
                AttemptSpec(
                    prompt=prompt,
                    agent=args.agent,
                    workspace=args.workspace,
                    policy=args.policy,
                    append_rules=True,
                    timeout=600,
                )
            )
        except RefusedBeforeStart as e:
            print(f"refused before start: {e}", file=sys.stderr)
            return 2
        print(
            f"attempt {attempt}: {outcome.status} ({outcome.reason or outcome.summary}); log {outcome.log}"
        )
        if outcome.status == "blocked":
            print(f"stopping: the agent is blocked: {outcome.reason}")
            return 3
        ok, why = check(args.workspace)
        if ok and outcome.status == "completed":
            print(f"task done: {why}")
            return 0
        previous = digest(outcome, why)
    print("giving up after two attempts")
    return 1


if __name__ == "__main__":
    sys.exit(main())
