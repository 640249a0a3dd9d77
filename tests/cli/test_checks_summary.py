"""What a person and a program read of the checks: the summary's rows, the
exit code of a failed verdict, the notice of read-only roots, masked tails."""

from __future__ import annotations

from governor.boundary.secrets import MASK, Masker
from governor.checks.check_values import READ_ONLY_NOTICE, CheckRun, Checks
from governor.cli import CHECK_FAILED, EXIT_BY_STATUS, exit_code
from governor.cli.progress import summary
from governor.ending.how_it_ended import Ending, judge

PASSED = CheckRun("pytest -q", 0, 1.5, "1 passed\n")
FAILED = CheckRun("ruff check", 1, 0.25, "calc.py:1:1: F401 unused\nFound 1 error.\n")


def _ending(checks: Checks, **kw: object) -> Ending:
    return Ending(
        agent="scripted", preset="acp", run_id="r", elapsed_s=1.0, timeout_s=60.0,
        stop_reason="end_turn", final_message="done", checks=checks, **kw,  # type: ignore[arg-type]
    )  # fmt: skip


def test_a_completed_attempt_whose_checks_failed_exits_5_and_one_that_passed_exits_0() -> None:
    failed = judge(_ending(Checks((PASSED, FAILED))))
    assert failed.status == "completed" and failed.verdict == "failed"
    assert exit_code(failed) == CHECK_FAILED == 5
    passed = judge(_ending(Checks((PASSED,))))
    assert passed.verdict == "passed" and exit_code(passed) == 0
    none = judge(_ending(Checks()))
    assert none.verdict is None and "verdict" not in none.to_json() and exit_code(none) == 0


def test_a_failed_attempt_keeps_its_own_exit_code_whatever_the_verdict() -> None:
    e = _ending(Checks((FAILED,)), error="boom")
    e.stop_reason = None
    outcome = judge(e)
    assert outcome.status == "failed" and exit_code(outcome) == EXIT_BY_STATUS["failed"] == 1


def test_the_summary_shows_changed_files_each_check_and_the_verdict() -> None:
    outcome = judge(_ending(Checks((PASSED, FAILED)), files_changed=("/ws/calc.py",)))
    text = summary(outcome)
    assert "changed  /ws/calc.py" in text
    assert "check  passed pytest -q (exit 0, 1.5 s)" in text
    assert "check  FAILED ruff check (exit 1, 0.2 s): Found 1 error." in text
    assert "verdict  failed" in text


def test_read_only_roots_are_said_in_the_outcome_and_a_secret_in_a_tail_is_masked() -> None:
    secret = "sk-live-abcdefghijklmnop"
    leaky = CheckRun("env", 0, 0.1, f"TOKEN={secret}\n")
    outcome = judge(_ending(Checks((leaky,), "read-only"), masker=Masker([secret])))
    assert outcome.acp is not None and READ_ONLY_NOTICE in outcome.acp.notices
    tail = outcome.checks_run[0].tail
    assert secret not in tail and MASK in tail
    overlay = judge(_ending(Checks((PASSED,), "overlay")))
    assert overlay.acp is not None and READ_ONLY_NOTICE not in overlay.acp.notices


def test_each_check_is_a_progress_line_as_it_ends() -> None:
    import io

    from governor.cli.progress import Progress

    out = io.StringIO()
    Progress(out)("check", {"verdict": "failed", **FAILED.to_json()})
    assert out.getvalue().rstrip().endswith("check      ruff check: failed (exit 1)")


def test_every_check_exiting_0_is_no_pass_when_an_acceptance_test_is_missing_and_the_summary_names_it() -> None:
    from governor.checks.test_results import Acceptance
    from governor.checks.test_results import judge as judge_tests

    wanted = Acceptance(("tests/acceptance/test_add.py::TestA::test_add",))
    missing = Checks((PASSED,), "overlay", judge_tests(wanted, []))
    outcome = judge(_ending(missing))
    assert outcome.verdict == "failed" and exit_code(outcome) == CHECK_FAILED
    assert outcome.tests is not None and outcome.tests["not_passed"] == [
        {"test": "tests/acceptance/test_add.py::TestA::test_add", "outcome": "missing"}
    ]
    assert (
        "tests  0 of 1 acceptance test(s) passed (the frozen files' tests); "
        "missing: tests/acceptance/test_add.py::TestA::test_add"
    ) in summary(outcome)


def test_the_summary_counts_the_held_out_tests_not_passed_and_never_names_them() -> None:
    from governor.checks.test_results import Acceptance
    from governor.checks.test_results import judge as judge_tests

    hidden = "tests/hidden/test_h.py::TestH::test_other_inputs"
    wanted = Acceptance(("tests/acceptance/test_add.py::TestA::test_add", hidden), held_out=(hidden,))
    outcome = judge(_ending(Checks((PASSED,), "overlay", judge_tests(wanted, []))))
    shown = summary(outcome)
    assert outcome.verdict == "failed"
    assert "; 1 of 1 held-out test(s) not passed" in shown
    assert "test_other_inputs" not in shown
