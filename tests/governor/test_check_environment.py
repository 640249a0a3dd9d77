"""A check's environment is the loop's (`governor.checks.check_runs.check_environment`,
`check_path`): the workspace off the module path, plugin autoload off, its
reports outside the workspace, its PATH out of the roots; the job's own
variables kept where they do not undo that."""

from __future__ import annotations

from pathlib import Path

from governor.checks.check_runs import (
    PYCACHE_INSIDE,
    REPORTS_VARIABLE,
    check_environment,
    check_path,
)


def test_the_harness_variables_win_over_the_jobs_and_the_jobs_options_are_kept_after_them() -> None:
    declared = {
        "PYTHONSAFEPATH": "",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "",
        "PYTEST_ADDOPTS": "-x",
        "PYTHONPATH": "/opt/lib",
        "NODE_OPTIONS": "--max-old-space-size=512",
        "CI": "1",
    }
    env = check_environment(declared, "/state/lib", "/state/reports-1")
    assert env["PYTHONSAFEPATH"] == "1" and env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] == "1"
    assert env["PYTHONPATH"] == "/state/lib:/opt/lib"
    assert env["PYTEST_ADDOPTS"] == "-p no:cacheprovider --junitxml=/state/reports-1/pytest.xml -x"
    assert env["NODE_OPTIONS"].endswith('--test-reporter-destination="/state/reports-1/node.xml" --max-old-space-size=512')
    spaced = check_environment({}, "/my state/lib", "/my state/reports-1")
    assert spaced["PYTEST_ADDOPTS"] == "-p no:cacheprovider --junitxml='/my state/reports-1/pytest.xml'"
    assert env["CI"] == "1"
    # no variable names a check: code under test has no word to key on
    assert REPORTS_VARIABLE not in env
    assert REPORTS_VARIABLE not in check_environment({REPORTS_VARIABLE: "/x"}, "/l", "/r")
    assert "PYTHONPYCACHEPREFIX" not in env  # the overlay's caches are swept instead
    assert check_environment({}, "/l", "/r", pycache_prefix=True)["PYTHONPYCACHEPREFIX"] == PYCACHE_INSIDE


def test_a_checks_path_keeps_no_entry_a_workspace_could_choose() -> None:
    roots = ("/work/app", "/work/lib")
    path = "/work/app/.venv/bin::.:bin:/usr/local/bin:/work/lib/tools:/work/application/bin:/usr/bin"
    assert check_path(path, roots) == "/usr/local/bin:/work/application/bin:/usr/bin"
    assert check_path(None, roots) is None


def test_the_programs_a_check_runs_from_the_workspace_are_in_its_harness_set_a_virtualenv_whole(
    tmp_path: Path,
) -> None:
    from governor.confine import harness
    from governor.policies.policy import parse_policy

    ws = tmp_path / "ws"
    (ws / "ci").mkdir(parents=True)
    (ws / "ci" / "test.sh").write_text("#!/bin/sh\npytest\n")
    (ws / ".venv" / "bin").mkdir(parents=True)
    (ws / ".venv" / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (ws / ".venv" / "bin" / "python").symlink_to("/usr/bin/python3")
    (ws / "tests").mkdir()
    (ws / "tests" / "__init__.py").write_text("")
    (ws / "tests" / "test_x.py").write_text("def test_x(): pass\n")
    text = '[checks]\ncommands = ["sh ci/test.sh tests", ".venv/bin/python -m pytest tests", "python3 -m pytest"]\n'
    policy = harness.with_named(parse_policy(text, "p.toml").bind(str(ws)))
    assert policy.harness_named == (f"{ws}/ci/test.sh", f"{ws}/.venv")
    assert sorted(str(p) for p in harness.pins(policy)) == [
        f"{ws}/.venv", f"{ws}/ci/test.sh", f"{ws}/tests/__init__.py"
    ]  # fmt: skip
    audited = harness.with_named(parse_policy(text + 'harness = "audited"\n', "p.toml").bind(str(ws)))
    assert harness.pins(audited) == ()
    assert harness.described(policy) == {"mode": "frozen", "named": [f"{ws}/ci/test.sh", f"{ws}/.venv"]}
