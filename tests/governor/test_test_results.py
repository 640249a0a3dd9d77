"""Judged by results (`governor.checks.test_results`): the acceptance tests collected
from the frozen files, the runners' JUnit reports read with bounds, and a
verdict that needs every acceptance test reported passed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from governor.checks.test_results import (
    Acceptance,
    CaseResult,
    acceptance_of,
    collect,
    judge,
    read_reports,
    unjudged,
)

ADD = "tests/acceptance/test_add.py::TestAcceptance::test_add"


def _r(ident: str, outcome: str = "passed", runner: str = "unittest") -> CaseResult:
    return CaseResult(ident, outcome, "", runner)  # type: ignore[arg-type]


def test_an_acceptance_test_reported_passed_by_any_runner_passes() -> None:
    wanted = Acceptance((ADD,))
    for report in (
        _r("tests.acceptance.test_add.TestAcceptance.test_add"),  # unittest, top level .
        _r("acceptance.test_add.TestAcceptance.test_add"),  # unittest, top level tests/
        _r("tests.acceptance.test_add.TestAcceptance.test_add[2-3]", runner="pytest"),
    ):
        assert judge(wanted, [report]).ok, report


@pytest.mark.parametrize(
    ("results", "came_to"),
    [
        ([], "missing"),
        ([_r("tests.test_add.TestUnit.test_add")], "missing"),
        ([_r("TestAcceptance.test_add")], "missing"),  # a class alone names no module
        ([_r("tests.acceptance.test_add.TestAcceptance.test_add", "skipped")], "skipped"),
        ([_r("tests.acceptance.test_add.TestAcceptance.test_add", "failed")], "failed"),
        (
            [
                _r("tests.acceptance.test_add.TestAcceptance.test_add[1]", "passed", "pytest"),
                _r("tests.acceptance.test_add.TestAcceptance.test_add[2]", "error", "pytest"),
            ],
            "error",
        ),
    ],
)
def test_an_acceptance_test_missing_skipped_failed_or_errored_is_named_as_not_passed(
    results: list[CaseResult], came_to: str
) -> None:
    judged = judge(Acceptance((ADD,)), results)
    assert not judged.ok and judged.not_passed == ((ADD, came_to),)


def test_a_node_test_is_matched_by_its_name_and_a_run_that_never_reported_fails() -> None:
    wanted = Acceptance(("tests/acceptance/mean.test.mjs::acceptance mean",))
    assert judge(wanted, [_r("acceptance mean", runner="node")]).ok
    # node reports a file that exited before its tests as a passing case named by the path
    assert not judge(wanted, [_r("/ws/tests/acceptance/mean.test.mjs", runner="node")]).ok
    assert not judge(Acceptance(), [], unfinished=1).ok
    assert judge(Acceptance(), []).ok  # no acceptance tests: nothing to miss
    elsewhere = judge(Acceptance(), [_r("tests.test_x.T.test_y", "failed")])
    assert not elsewhere.ok and elsewhere.failed_elsewhere == ("tests.test_x.T.test_y",)


def test_the_acceptance_tests_are_collected_from_python_and_javascript_test_files(tmp_path: Path) -> None:
    py = tmp_path / "test_add.py"
    py.write_text(
        "import unittest\n\ndef test_free():\n    pass\n\nclass Helper:\n    def test_no(self): ...\n\n"
        "class Checks(unittest.TestCase):\n    def test_a(self): ...\n    def helper(self): ...\n\n"
        "class TestPlain:\n    async def test_b(self): ...\n"
    )
    js = tmp_path / "mean.test.mjs"
    js.write_text("test('one', () => {});\nit(\"two\", () => {});\ntest.skip('three', () => {});\n")
    src = tmp_path / "calc.py"
    src.write_text("def test_not_a_test(): ...\n")
    files = [("tests/test_add.py", str(py)), ("tests/mean.test.mjs", str(js)), ("calc.py", str(src))]
    assert collect(files) == (
        "tests/mean.test.mjs::one",
        "tests/mean.test.mjs::two",
        "tests/mean.test.mjs::three",
        "tests/test_add.py::test_free",
        "tests/test_add.py::Checks::test_a",
        "tests/test_add.py::TestPlain::test_b",
    )


def test_reports_are_read_from_junit_xml_and_a_hostile_one_is_unreadable_not_believed(tmp_path: Path) -> None:
    (tmp_path / "pytest.xml").write_text(
        '<?xml version="1.0"?><testsuites><testsuite>'
        '<testcase classname="tests.test_a.TestA" name="test_ok"/>'
        '<testcase classname="tests.test_a.TestA" name="test_bad"><failure message="1 != 2"/></testcase>'
        '<testcase classname="tests.test_a" name="test_skip"><skipped message="later"/></testcase>'
        "</testsuite></testsuites>"
    )
    laughs = "".join(f'<!ENTITY l{i} "{f"&l{i - 1};" * 10}">' for i in range(1, 12))
    (tmp_path / "node.xml").write_text(
        f'<?xml version="1.0"?><!DOCTYPE t [<!ENTITY l0 "lol">{laughs}]>'
        '<testsuites><testcase name="&l11;"/></testsuites>'
    )
    os.symlink("/etc/hostname", tmp_path / "junit-link.xml")
    (tmp_path / "unittest-7-1.started").write_text("")
    read = read_reports(str(tmp_path))
    assert [(r.id, r.outcome, r.runner) for r in read.results] == [
        ("tests.test_a.TestA.test_ok", "passed", "pytest"),
        ("tests.test_a.TestA.test_bad", "failed", "pytest"),
        ("tests.test_a.test_skip", "skipped", "pytest"),
    ]
    assert read.results[1].detail == "1 != 2"
    assert sorted(read.unreadable) == ["junit-link.xml", "node.xml"]
    assert read.unfinished == 1


def test_a_tries_digest_names_the_acceptance_tests_not_passed_when_every_check_exited_0() -> None:
    from governor.attempt.tries import digest, with_digest
    from governor.checks.check_values import CheckRun

    ran = [CheckRun("python3 -m unittest", 0, 0.1, "OK")]
    assert digest(ran) is None  # an exit status alone says nothing failed
    tests = {"not_passed": [{"test": ADD, "outcome": "missing"}]}
    facts = digest(ran, tried=1, tests=tests)
    assert facts is not None
    assert facts["failed_checks"] == [] and facts["tests_not_passed"] == [{"test": ADD, "outcome": "missing"}]
    assert ADD in with_digest("fix it", facts)


HIDDEN = "tests/hidden/test_add_hidden.py::TestHidden::test_add_other_numbers"


def test_a_held_out_test_is_an_acceptance_test_whatever_the_job_names_and_is_counted_never_named(
    tmp_path: Path,
) -> None:
    from governor.policies.policy import parse_policy

    policy = parse_policy('[checks]\ncommands = ["true"]\nacceptance = []\n', "t").bind(str(tmp_path))
    wanted = acceptance_of(policy, (HIDDEN,))
    assert wanted.tests == (HIDDEN,) and wanted.held_out == (HIDDEN,) and wanted.source == "job"
    skipped = judge(wanted, [_r("tests.hidden.test_add_hidden.TestHidden.test_add_other_numbers", "skipped")])
    assert not skipped.ok
    shown = skipped.to_json()
    assert shown["held_out"] == 1 and shown["held_out_not_passed"] == 1 and shown["not_passed"] == []
    assert "test_add_other_numbers" not in str(shown)
    # a failure the listing could not name may be a held-out test: counted too
    other = judge(wanted, [_r("tests.hidden.test_gen.TestGen.test_made_at_run_time", "failed")])
    assert "failed_elsewhere" not in other.to_json()
    assert other.to_json()["failed_elsewhere_count"] == 1
    # without held-out tests, the names are shown as before
    assert judge(Acceptance((ADD,)), []).to_json()["not_passed"] == [{"test": ADD, "outcome": "missing"}]


def test_a_tries_digest_counts_the_held_out_tests_not_passed_and_carries_no_withheld_output() -> None:
    from governor.attempt.tries import digest, with_digest
    from governor.checks.check_runs import WITHHELD
    from governor.checks.check_values import CheckRun

    ran = [CheckRun("python3 -m unittest", 0, 0.1, WITHHELD)]
    facts = digest(ran, tried=1, tests={"not_passed": [], "held_out_not_passed": 1})
    assert facts is not None and facts["held_out_tests_not_passed"] == 1
    assert "test_add_other_numbers" not in with_digest("fix it", facts)


def test_a_frozen_set_with_no_listable_test_is_said_unless_the_job_takes_the_exit_status(
    tmp_path: Path,
) -> None:
    from governor.policies.policy import parse_policy

    (tmp_path / "tests" / "acceptance").mkdir(parents=True)
    (tmp_path / "tests" / "acceptance" / "check.sh").write_text("python3 -c 'import calc'\n")
    base = '[sandbox]\nfrozen = ["tests/acceptance/**"]\n[checks]\ncommands = ["sh tests/acceptance/check.sh"]\n'
    silent = parse_policy(base, "t").bind(str(tmp_path))
    [said] = unjudged(silent, acceptance_of(silent))
    assert "tests/acceptance/check.sh" in said and "exit status" in said
    chosen = parse_policy(base + "acceptance = []\n", "t").bind(str(tmp_path))
    assert unjudged(chosen, acceptance_of(chosen)) == []
    named = parse_policy(base + 'acceptance = ["tests/x.py::test_x"]\n', "t").bind(str(tmp_path))
    assert unjudged(named, acceptance_of(named)) == []
    # held-out files with no listable test are said too
    assert unjudged(silent, acceptance_of(silent), held_files=2)[0].startswith("the 2 held-out file(s)")
