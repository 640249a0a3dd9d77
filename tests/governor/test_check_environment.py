"""A check's environment is the loop's (`governor.checks.check_environment`,
`check_path`): the workspace off the module path, plugin autoload off, its
reports outside the workspace, its PATH out of the roots; the job's own
variables kept where they do not undo that."""

from __future__ import annotations

from governor.checks import PYCACHE_INSIDE, REPORTS_VARIABLE, check_environment, check_path


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
    assert env["NODE_OPTIONS"].endswith("--test-reporter-destination=/state/reports-1/node.xml --max-old-space-size=512")
    assert env[REPORTS_VARIABLE] == "/state/reports-1" and env["CI"] == "1"
    assert "PYTHONPYCACHEPREFIX" not in env  # the overlay's caches are swept instead
    assert check_environment({}, "/l", "/r", pycache_prefix=True)["PYTHONPYCACHEPREFIX"] == PYCACHE_INSIDE


def test_a_checks_path_keeps_no_entry_a_workspace_could_choose() -> None:
    roots = ("/work/app", "/work/lib")
    path = "/work/app/.venv/bin::.:bin:/usr/local/bin:/work/lib/tools:/work/application/bin:/usr/bin"
    assert check_path(path, roots) == "/usr/local/bin:/work/application/bin:/usr/bin"
    assert check_path(None, roots) is None
