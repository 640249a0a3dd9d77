"""A loop in twenty lines: one task, three tries at most, judged by its check."""

from governor import AttemptSpec, RefusedBeforeStart, run

TASK = "Write hello.py that prints a greeting, and run it."


def attempt(workspace: str, notes: str = "") -> bool:
    """One attempt of the bundled demo agent; True when the loop may stop."""
    spec = AttemptSpec(prompt=TASK + notes, agent="demo", workspace=workspace,
                       policy="edit-workspace", checks=["python3 hello.py"],
                       approver="unattended", timeout=600)  # fmt: skip
    try:
        outcome = run(spec)
    except RefusedBeforeStart as e:  # nothing ran: the job itself is wrong
        raise SystemExit(f"refused before start: {e}") from None
    print(outcome.status, outcome.verdict, outcome.tally, outcome.log)
    # blocked: the agent says the task cannot be done as given; trying again won't help
    return outcome.status == "blocked" or outcome.verdict == "passed"


if __name__ == "__main__":
    import sys
    import tempfile

    ws = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp()
    done = any(attempt(ws, f"\n(try {n})") for n in range(1, 4))
    print("done" if done else "gave up after three tries")
