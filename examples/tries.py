"""A loop that owns its retries, with the governor's three steps and no command line.

Each try: an attempt (`governor.run_attempt`), the job's checks over the
workspace it left (`governor.run_checks`: each in a fresh sandbox, network
off, the workspace unchangeable), and, when they fail, the digest of the
failed checks (`governor.digest`: bounded, masked) for the next prompt
(`governor.with_digest`), the workspace first put back as it was
(`governor.StartingCopy`). Runs as-is with the bundled learner agent:

    .venv/bin/python examples/tries.py --workspace "$(mktemp -d)"

The workspace gets a small task: ``calc.add`` and a failing test.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import trio

from governor import (
    AttemptSpec,
    RefusedBeforeStart,
    StartingCopy,
    digest,
    prepare,
    run_attempt,
    run_checks,
    with_digest,
)

HERE = Path(__file__).resolve().parent
TASK = "The test tests/test_calc.py fails: fix calc.py."
PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "python3"
CHECK = f"{PYTHON} -m unittest discover -s tests -t . -q"
"""The loop's acceptance test, run by a system interpreter every sandbox shows."""


def make_task(workspace: Path) -> None:
    """A failing test and the module it tests."""
    (workspace / "tests").mkdir(parents=True, exist_ok=True)
    (workspace / "tests" / "__init__.py").write_text("")
    (workspace / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    (workspace / "tests" / "test_calc.py").write_text(
        "import unittest\n\nfrom calc import add\n\n\nclass TestAdd(unittest.TestCase):\n"
        "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
    )


async def loop(workspace: Path, tries: int) -> int:
    policy = workspace.parent / f"{workspace.name}-policy.toml"  # outside the workspace
    policy.write_text('capability = "edit-workspace"\n')
    agent = [sys.executable, str(HERE / "learner_agent.py")]
    spec = AttemptSpec(prompt=TASK, argv=agent, workspace=workspace, policy=policy, timeout=120)
    try:
        prepared = prepare(spec)
    except RefusedBeforeStart as e:
        print(f"refused before start: {e}", file=sys.stderr)
        return 2
    start = StartingCopy.keep(workspace)  # before the first try: each try starts here
    try:
        for n in range(1, tries + 1):
            outcome = await run_attempt(prepared)  # step 1: the attempt
            checks = await run_checks(prepared.policy, commands=(CHECK,))  # step 2: the checks
            print(f"try {n}: {outcome.status} ({outcome.summary}), checks {checks.verdict}; log {outcome.log}")
            if outcome.status == "blocked" or checks.verdict == "passed":
                return 0 if checks.verdict == "passed" else 3
            if n == tries:
                break  # the workspace holds the last try's work
            facts = digest(checks.runs, masker=prepared.masker, tried=n)  # step 3: the digest
            start.restore()
            prepared = prepare(replace(spec, prompt=with_digest(TASK, facts)))
    finally:
        start.discard()
    print(f"giving up after {tries} tries")
    return 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workspace", type=Path, required=True)
    parser.add_argument("--tries", type=int, default=3)
    args = parser.parse_args()
    make_task(args.workspace)
    return trio.run(loop, args.workspace.resolve(), args.tries)


if __name__ == "__main__":
    sys.exit(main())
