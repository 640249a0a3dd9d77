"""Nothing a root holds decides what the sandbox shows (issue 24): a planted
``pyvenv.cfg`` or ``bin/python`` link, or a planted ``.git`` pointer, keeps no
folder of a home visible, and the governor's state directory (every attempt's
audit log) is empty inside whatever keeps it, as root and as an unprivileged
user, in a bwrap of its own and in a session's sandbox.

Each attack has its neighbour: a workspace ``.venv`` made from a pyenv
interpreter still runs, a real linked worktree whose repository is in the home
still shows its history, a folder beside the state directory stays readable.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from escape_harness import Box
from toolchain_home import AVAILABLE, SYSTEM_PYTHON, WHY_NOT, make_toolchain

CANARY = "CANARY-" + secrets.token_hex(6)


def _plant_interpreter(box: Box, folder: Path) -> Path:
    """A real interpreter (the system's program, copied) and a secret in ``folder``."""
    python = folder / "bin" / "python3"
    box.mkdir(python.parent)
    shutil.copy2(SYSTEM_PYTHON, python)
    box.own(python)
    box.write(folder / "secret.txt", f"{CANARY}-{folder.name}\n")
    return python


@pytest.mark.skipif(not AVAILABLE, reason=WHY_NOT)
def test_a_planted_venv_shows_no_folder_of_a_home_and_a_pyenv_venv_still_runs(box: Box) -> None:
    made = make_toolchain(box.home, box.ws, CANARY)
    state = box.home / ".local" / "state" / "acp-governor"
    targets = [box.home / ".claude", box.home / ".cache" / "tool", state, box.home / "plain"]
    for n, folder in enumerate(targets):
        python = _plant_interpreter(box, folder)
        venv = box.ws / f"env{n}"
        box.write(venv / "pyvenv.cfg", f"home = {python.parent}\n")
        box.mkdir(venv / "bin")
        (venv / "bin" / "python").symlink_to(python)
    subprocess.run(["chown", "-R", "-h", f"{box.uid}:{box.gid}", str(box.home), str(box.ws)], check=True)
    reads = "; ".join(f"cat {folder}/secret.txt" for folder in targets)
    outcome = box.run(
        f"{reads}; .venv/bin/python -c 'import sys; print(\"venv\", sys.base_prefix)'",
        path=made.path,
        environ={"HOME": str(box.home)},
    )
    assert outcome.error is None, outcome.error
    assert CANARY not in outcome.text
    assert f"venv {made.prefix}" in outcome.text  # the neighbour: ~/.pyenv's venv runs


def _repository(box: Box, path: Path, secret: str) -> None:
    box.mkdir(path)
    box.git("init", "-q", cwd=path)
    box.write(path / "notes.txt", secret)
    box.git("add", "notes.txt", cwd=path)
    box.git("commit", "-q", "-m", "first", cwd=path)


def test_a_planted_git_pointer_shows_no_folder_and_a_real_worktree_still_works(box: Box) -> None:
    logins = box.home / ".claude"
    box.write(logins / "token", f"{CANARY}-token\n")
    other = box.home / "src" / "other"
    _repository(box, other, f"{CANARY}-other\n")
    box.write(box.ws / "a" / ".git", f"gitdir: {logins}\n")
    box.write(box.ws / "b" / ".git", f"gitdir: {other}/.git\n")  # a real git dir, not ours
    nested = box.ws / "c" / ".git"  # a nested repository whose commondir leads out
    box.write(nested / "HEAD", "ref: refs/heads/main\n")
    box.write(nested / "commondir", f"{logins}\n")
    outcome = box.run(f"cat {logins}/token; cat {other}/notes.txt; git -C {other} log 2>&1")
    assert outcome.error is None, outcome.error
    assert CANARY not in outcome.text and "first" not in outcome.text
    # the neighbour: a linked worktree of a repository in the home shows its history
    main = box.home / "src" / "main"
    _repository(box, main, "main\n")
    worktree = box.dir / "wt"
    made = box.git("worktree", "add", "-q", str(worktree), cwd=main)
    assert made.returncode == 0, made.stderr
    shown = box.run("git log --format=%s", workspace=worktree)
    assert shown.error is None, shown.error
    assert shown.text.split() == ["first"]


@pytest.fixture
def state_home(box: Box) -> Iterator[Path]:
    """An ``$XDG_STATE_HOME`` outside every home (a CI runner's ``/srv``), with
    an earlier attempt's audit log in it and a file beside the state folder."""
    if not os.access("/srv", os.W_OK):  # a folder beside the homes: root's to make
        pytest.skip("making a folder under /srv needs root")
    base = Path("/srv") / f"govsec-state-{secrets.token_hex(4)}"
    try:
        box.write(base / "acp-governor" / "old-attempt.jsonl", f'{{"prompt": "{CANARY}"}}\n')
        box.write(base / "beside.txt", "beside the state\n")
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_the_state_directory_is_empty_inside_and_a_keep_of_it_is_refused(box: Box, state_home: Path) -> None:
    environ = {"XDG_STATE_HOME": str(state_home)}
    state = state_home / "acp-governor"
    outcome = box.run(f"cat {state}/old-attempt.jsonl; ls -a {state}; cat {state_home}/beside.txt", environ=environ)
    assert outcome.error is None, outcome.error
    assert CANARY not in outcome.text
    assert "old-attempt.jsonl" not in outcome.text.splitlines()  # not listed: empty inside
    assert "beside the state" in outcome.text  # the neighbour: what is beside it stays
    for folder in (state, state_home):
        refused = box.run(f"cat {state}/old-attempt.jsonl", keep=[folder], environ=environ)
        assert refused.error is not None and "state directory" in refused.error
        assert CANARY not in refused.text
