"""`governor.boundary.folders`, as an unprivileged user (root sees through any mode):
a folder made unreadable is opened and its mode put back, a link in a folder's
place is never followed, a mode changed meanwhile is kept, and a folder of
another user is listed as closed, never walked as empty. The checks run in a
process of the govtest user (``runuser``), on files it owns."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
USER = "govtest"

CHECKS = r"""
import json, os, stat, sys
from governor.boundary import folders
base = sys.argv[1]
out = {}
hid = os.path.join(base, "hid")
os.mkdir(hid); open(os.path.join(hid, "payload.sh"), "w").close(); os.chmod(hid, 0o300)
with folders.Opening() as opening:
    out["walked"] = sorted(f for _, _, files in folders.walk(base, opening) for f in files if f != "own.txt")
out["mode_after"] = oct(stat.S_IMODE(os.lstat(hid).st_mode))
with folders.Opening() as opening:
    list(folders.walk(base, opening))
    os.chmod(hid, 0o750)  # the agent, meanwhile
out["agents_mode_kept"] = oct(stat.S_IMODE(os.lstat(hid).st_mode))
target = os.path.join(base, "target"); os.mkdir(target, 0o700)
link = os.path.join(base, "link"); os.symlink(target, link)
try:
    folders.give_back(link)
    out["link"] = "followed"
except OSError as e:
    out["link"] = type(e).__name__
out["target_mode"] = oct(stat.S_IMODE(os.lstat(target).st_mode))
with folders.Opening() as opening:
    list(folders.walk(base, opening))
    out["closed"] = [os.path.relpath(p, base) for p in opening.closed]
print(json.dumps(out))
"""


def as_user(base: Path) -> dict[str, Any]:
    site = sysconfig.get_paths()["purelib"]
    env = ["env", "-i", f"PYTHONPATH={REPO}:{site}", "PATH=/usr/bin:/bin", "LANG=C.UTF-8"]
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    found = [p for p in (os.path.realpath(sys.executable), f"/usr/bin/python{version}",
                         f"/usr/local/bin/python{version}") if os.access(p, os.X_OK)]  # fmt: skip
    python = next((p for p in found if _usable(p)), None)
    if python is None:
        pytest.skip(f"no Python {version} the {USER} user can run")
    done = subprocess.run(
        ["runuser", "-u", USER, "--", *env, python, "-c", CHECKS, str(base)],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, Any] = json.loads(done.stdout)
    return out


def _usable(python: str) -> bool:
    return subprocess.run(["runuser", "-u", USER, "--", python, "-c", "pass"],
                          capture_output=True, timeout=30).returncode == 0  # fmt: skip


@pytest.fixture
def base() -> Any:
    if os.getuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("needs root to run the checks as the govtest user")
    try:
        account = pwd.getpwnam(USER)
    except KeyError:
        pytest.skip(f"no {USER} user (the security suite creates it)")
    top = Path(tempfile.mkdtemp(prefix="govfolders-", dir=account.pw_dir))
    os.chown(top, account.pw_uid, account.pw_gid)
    vault = top / "vault"  # another user's: the governor cannot open it
    vault.mkdir(mode=0o700)
    (top / "own.txt").write_text("")
    os.chown(top / "own.txt", account.pw_uid, account.pw_gid)
    yield top
    shutil.rmtree(top, ignore_errors=True)


def test_folders_are_opened_put_back_never_through_a_link_and_anothers_is_closed(base: Path) -> None:
    out = as_user(base)
    assert out["walked"] == ["payload.sh"]
    assert out["mode_after"] == "0o300"
    assert out["agents_mode_kept"] == "0o750"
    assert out["link"] == "NotADirectoryError" and out["target_mode"] == "0o700"
    assert out["closed"] == ["vault"]
