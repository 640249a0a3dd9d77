"""The held-out tests go back for the checks whatever the agent did to the
folders' modes (`governor.checks.held_out`): an agent that leaves the workspace root
and the held-out path's parent at 0555 (as an unprivileged user, the governor
could not write there) still has its work checked against the held-out test,
the originals are back in the workspace, nothing is left in the governor's
folder, and the modes are the agent's. Through the real ``governor run``,
with a command agent, in real bwrap, as root and as ``govtest``."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "taskset"))
from checkout import needs_a_visible_checkout
from tasks import BY_NAME, make_repo

pytestmark = needs_a_visible_checkout()

HIDDEN = (
    "import unittest\n\nimport calc as m\n\n\n"
    "class TestHidden(unittest.TestCase):\n"
    "    def test_add_other_numbers(self):\n"
    "        self.assertEqual(m.add(10, 7), 17)\n"
)
HONEST = "printf 'def add(a, b):\\n    return a + b\\n' > calc.py\n"
LOCK_UP = "chmod 0555 tests . \n"
SPECIAL_CASED = "printf 'def add(a, b):\\n    return 5 if (a, b) == (2, 3) else a - b\\n' > calc.py\n"


def _workspace(base: Path) -> Path:
    ws = base / "ws"
    make_repo(BY_NAME["add"], ws)
    subprocess.run(["git", "-C", str(ws), "checkout", "-q", "HEAD~1"], check=True)
    (ws / "tests" / "hidden").mkdir()
    (ws / "tests" / "hidden" / "__init__.py").write_text("")
    (ws / "tests" / "hidden" / "test_add_hidden.py").write_text(HIDDEN)
    (base / "loop.toml").write_text(
        'capability = "edit-workspace"\n[sandbox]\nfrozen = ["tests/acceptance/**"]\n'
    )
    return ws


def _run(base: Path, ws: Path, script: str, user: pwd.struct_passwd | None) -> dict[str, Any]:
    """The outcome of a command agent running ``script``: as root, or as ``user``
    with ``TMPDIR`` and ``$HOME`` under ``base`` (the governor's state there)."""
    python = shutil.which("python3.11", path="/usr/bin:/usr/local/bin") or sys.executable
    check = f"{python} -m unittest discover -s tests -t . -q"
    argv = ["run", "--json", "--kind", "command", "--policy", str(base / "loop.toml")]
    argv += ["--workspace", str(ws), "--check", check, "--held-out", "tests/hidden/**"]
    argv += ["fix it", "--", "sh", "-c", script]
    if user is None:
        done = subprocess.run(
            [str(Path(sys.executable).parent / "governor"), *argv],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    else:
        for folder in ("home", "tmp"):
            (base / folder).mkdir()
        for path in [base, *base.rglob("*")]:
            os.chown(path, user.pw_uid, user.pw_gid, follow_symlinks=False)
        env = {
            "PATH": "/usr/bin:/bin",
            "HOME": str(base / "home"),
            "TMPDIR": str(base / "tmp"),
            "PYTHONPATH": f"{Path(__file__).resolve().parents[2]}:{sysconfig.get_paths()['purelib']}",
            "LANG": "C.UTF-8",
        }
        done = subprocess.run(
            ["runuser", "-u", user.pw_name, "--", "env", "-i",
             *[f"{k}={v}" for k, v in env.items()], python, "-m", "governor.cli", *argv],
            capture_output=True, text=True, timeout=300, cwd=base,
        )  # fmt: skip
    assert done.stdout, done.stderr[-3000:]
    outcome: dict[str, Any] = json.loads(done.stdout)
    return outcome


def _govtest() -> pwd.struct_passwd:
    if os.getuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root and runuser to act as another user")
    if shutil.which("python3.11", path="/usr/bin:/usr/local/bin") is None:
        pytest.skip("no system python3.11 that govtest can run")
    try:
        return pwd.getpwnam("govtest")
    except KeyError:
        pytest.skip("no user govtest")


@pytest.fixture(params=["root", "govtest"])
def as_user(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """(base folder, user): root in ``tmp_path``; ``govtest`` in a folder of
    its own under ``/var/tmp`` (``TMPDIR`` and ``$HOME`` there), removed after."""
    if request.param == "root":
        yield tmp_path, None
        return
    user = _govtest()
    base = Path("/var/tmp") / f"held-modes-{os.getpid()}-{tmp_path.name}"
    base.mkdir()
    try:
        yield base, user
    finally:
        for path in [base, *base.rglob("*")]:
            if path.is_dir() and not path.is_symlink():
                path.chmod(0o755)
        shutil.rmtree(base, ignore_errors=True)


def _modes(ws: Path) -> tuple[int, int]:
    return stat.S_IMODE(ws.stat().st_mode), stat.S_IMODE((ws / "tests").stat().st_mode)


def test_an_honest_fix_in_a_workspace_the_agent_left_at_0555_is_checked_with_its_held_out_test(
    as_user: tuple[Path, pwd.struct_passwd | None],
) -> None:
    base, user = as_user
    ws = _workspace(base)
    outcome = _run(base, ws, HONEST + LOCK_UP, user)
    assert outcome["verdict"] == "passed", (outcome["checks_run"], outcome["acp"]["notices"])
    assert outcome["tests"]["held_out"] == 1 and outcome["tests"]["held_out_not_passed"] == 0
    assert outcome["held_out"]["start"] == outcome["held_out"]["end"]
    assert not outcome["acp"]["notices"] and not outcome.get("findings")
    assert (ws / "tests" / "hidden" / "test_add_hidden.py").read_text() == HIDDEN
    assert _modes(ws) == (0o555, 0o555), "the modes are the agent's work"


def test_a_special_cased_fix_in_a_workspace_the_agent_left_at_0555_fails_its_held_out_test(
    as_user: tuple[Path, pwd.struct_passwd | None],
) -> None:
    base, user = as_user
    ws = _workspace(base)
    outcome = _run(base, ws, SPECIAL_CASED + LOCK_UP, user)
    assert outcome["verdict"] == "failed"
    assert outcome["tests"]["held_out_not_passed"] == 1
    assert (ws / "tests" / "hidden" / "test_add_hidden.py").read_text() == HIDDEN
    assert _modes(ws) == (0o555, 0o555)
