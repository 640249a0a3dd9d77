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


REMOVE = r"""
import json, os, shutil, sys
from pathlib import Path
from governor.boundary import folders
base = sys.argv[1]
out = {}
for how in ("rmtree", "remove"):
    tree = os.path.join(base, how)
    locked = os.path.join(tree, "job", "locked")
    os.makedirs(locked)
    open(os.path.join(locked, "f"), "w").close()
    os.chmod(locked, 0)
    if how == "rmtree":
        shutil.rmtree(tree, ignore_errors=True)  # what a batch job's folder had
    else:
        folders.remove(Path(tree))
    out[how] = os.path.lexists(tree)
target = os.path.join(base, "kept")
os.mkdir(target)
os.symlink(target, os.path.join(base, "link"))
folders.remove(Path(base, "link"))
out["link"], out["target"] = os.path.lexists(os.path.join(base, "link")), os.path.isdir(target)
print(json.dumps(out))
"""


def as_user(base: Path, script: str = CHECKS) -> dict[str, Any]:
    site = sysconfig.get_paths()["purelib"]
    env = ["env", "-i", f"PYTHONPATH={REPO}:{site}", "PATH=/usr/bin:/bin", "LANG=C.UTF-8"]
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    found = [p for p in (os.path.realpath(sys.executable), f"/usr/bin/python{version}",
                         f"/usr/local/bin/python{version}") if os.access(p, os.X_OK)]  # fmt: skip
    python = next((p for p in found if _usable(p)), None)
    if python is None:
        pytest.skip(f"no Python {version} the {USER} user can run")
    done = subprocess.run(
        ["runuser", "-u", USER, "--", *env, python, "-c", script, str(base)],
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


def test_one_delete_removes_a_tree_with_a_folder_the_agent_locked_and_never_follows_a_link(
    base: Path,
) -> None:
    """The tries' copies and a batch job's folder go through `folders.remove`:
    as a user, a ``chmod 000`` folder the agent left is deleted (the batch's
    ``rmtree(ignore_errors=True)`` left it behind, silently); a link is removed
    itself, never what it points at."""
    out = as_user(base, REMOVE)
    assert out == {"rmtree": True, "remove": False, "link": False, "target": True}, out
