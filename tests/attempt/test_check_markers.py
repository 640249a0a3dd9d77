"""Nothing a check's processes see names a check (`governor.checks.check_runs`): code under
test that keys on such a word would fix itself for the check only. Through the
real ``governor run --check``, in real bwrap: no variable of the check's
programs is named for the governor or a check, and the command line of the
shell that started them is the job's line, not the cache sweep, and no
variable's value names the governor's state folder; the job's own command line still names
its report folder as ``$GOVERNOR_CHECK_REPORTS`` (a variable of that line,
not exported), and what it writes there judges its tests."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "taskset"))
from checkout import needs_a_visible_checkout

pytestmark = needs_a_visible_checkout()

GOVERNOR = str(Path(sys.executable).parent / "governor")
CHECK_PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin") or "python3"
LOOK = (
    "import os\n"
    "print('ENV', sorted(os.environ.items()))\n"
    "print('PARENT', open(f'/proc/{os.getppid()}/cmdline').read().replace(chr(0), ' '))\n"
)


def _run(tmp_path: Path, check: str, policy: str = "") -> dict[str, Any]:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "look.py").write_text(LOOK)
    (tmp_path / "loop.toml").write_text('capability = "edit-workspace"\n' + policy)
    argv = [GOVERNOR, "run", "--json", "--kind", "command", "--policy", str(tmp_path / "loop.toml")]
    argv += ["--workspace", str(ws), "--check", check, "look", "--", "true"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
    assert done.stdout, done.stderr[-3000:]
    outcome: dict[str, Any] = json.loads(done.stdout)
    return outcome


def test_no_variable_and_no_parent_command_line_of_a_check_names_the_check(
    tmp_path: Path,
) -> None:
    outcome = _run(tmp_path, f"{CHECK_PYTHON} look.py")
    assert outcome["verdict"] == "passed", outcome["checks_run"]
    tail = outcome["checks_run"][0]["tail"]
    env_line = next(line for line in tail.splitlines() if line.startswith("ENV"))
    parent = next(line for line in tail.splitlines() if line.startswith("PARENT"))
    names = [name for name, _ in eval(env_line[len("ENV ") :])]  # a repr we printed
    assert [n for n in names if "GOVERNOR" in n or "CHECK" in n] == [], names
    # nor does a value name the governor's state folder (the reporter's and the
    # report folders are bound under a random name); the sandbox's own git
    # excludes file is a residual docs/loops.md names
    values = [(n, v) for n, v in eval(env_line[len("ENV ") :]) if n != "GIT_CONFIG_VALUE_0"]
    assert [(n, v) for n, v in values if "governor" in v.lower()] == [], values
    # the check's shell is the job's line alone: the sweep before it is exec'd away
    assert parent == f"PARENT /bin/sh -c {CHECK_PYTHON} look.py ", parent


def test_a_jobs_command_writes_its_junit_report_into_governor_check_reports_and_its_programs_see_no_such_variable(
    tmp_path: Path,
) -> None:
    report = (
        '<testsuite><testcase classname="tests.test_mine" name="test_ok"/></testsuite>'
    )
    check = (
        f"printf '%s' '{report}' > \"$GOVERNOR_CHECK_REPORTS/mine.xml\" && "
        "sh -c 'echo child sees ${GOVERNOR_CHECK_REPORTS:-nothing}'"
    )
    policy = '[checks]\nacceptance = ["tests/test_mine.py::test_ok"]\n'
    outcome = _run(tmp_path, check, policy)
    assert outcome["verdict"] == "passed", (outcome["checks_run"], outcome["tests"])
    assert outcome["tests"]["passed"] == 1
    assert "child sees nothing" in outcome["checks_run"][0]["tail"]
