"""The gitlink residual: a repository the agent makes where the outer one
records a gitlink runs its ``core.fsmonitor`` at the person's next ``git
status`` there (git 2.39 looks into every populated gitlink).

Decided so: a submodule ``.gitmodules`` names that is not checked out is held
as it is (an empty folder git passes over), at commit and read-only alike, so
no ``.git`` can be made in it; a gitlink the agent adds itself (``git init x
&& git add x``) needs the index, which ``[sandbox] git = "read-only"`` holds.
Where commits are allowed that second way stays open, and the attempt calls
the new repository out in its outcome (tests/attempt/test_callouts.py).

Each attack runs as root and as the unprivileged user, by a bwrap of its own
and by a session (the ``box`` fixture), and is judged by the host's ``git status``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from escape_harness import GIT_IDENTITY, Box
from test_escapes_git import commit_inside, marker, subjects


def fake_repository(path: str, proof: Path) -> str:
    """A shell line making ``path`` a repository whose fsmonitor touches ``proof``."""
    return (
        f"mkdir -p {path}/.git/objects {path}/.git/refs && "
        f"echo 'ref: refs/heads/main' > {path}/.git/HEAD && "
        f"printf '[core]\\n\\tfsmonitor = \"touch {proof}; false\"\\n' > {path}/.git/config"
    )


def unpopulated_submodule(box: Box) -> Path:
    """A submodule at ``sub``, committed and not checked out (an empty folder)."""
    upstream = box.mkdir(box.dir / "upstream")
    box.git("init", "-q", cwd=upstream)
    box.git("commit", "-q", "--allow-empty", "-m", "up", cwd=upstream)
    added = box.git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(upstream), "sub")
    assert added.returncode == 0, added.stderr
    box.git("commit", "-q", "-m", "sub")
    box.git("submodule", "deinit", "-q", "-f", "sub")
    assert list((box.ws / "sub").iterdir()) == []
    return box.ws / "sub"


def host_status_runs_nothing(box: Box, proof: Path) -> None:
    status = box.git("status", "--porcelain")
    assert status.returncode == 0, status.stderr
    assert not proof.exists()


@pytest.mark.parametrize("git_read_only", [False, True], ids=["commit", "git-read-only"])
def test_an_unpopulated_submodule_cannot_be_filled_with_a_repository(box: Box, git_read_only: bool) -> None:
    sub = unpopulated_submodule(box)
    proof = box.dir / marker()
    outcome = box.run(
        f"{fake_repository('sub', proof)}; git init -q sub; rm -rf sub; mv sub s2; "
        f"{fake_repository('sub', proof)}; git status >/dev/null 2>&1; echo status=$?; "
        f"{commit_inside('inside')}; echo ok > beside.txt",
        env=GIT_IDENTITY,
        git_read_only=git_read_only,
    )
    assert list(sub.iterdir()) == [] and not (box.ws / "s2").exists()
    assert "status=0" in outcome.text  # git inside works with the submodule held
    assert (box.ws / "beside.txt").read_text() == "ok\n"  # neighbour
    assert subjects(box) == (["sub", "init"] if git_read_only else ["inside", "sub", "init"])
    host_status_runs_nothing(box, proof)


def test_with_git_read_only_a_gitlink_to_a_new_repository_cannot_be_added(box: Box) -> None:
    proof = box.dir / marker()
    outcome = box.run(
        f"{fake_repository('made', proof)}; git add made; echo add=$?; echo ok > beside.txt",
        env=GIT_IDENTITY,
        git_read_only=True,
    )
    assert "add=0" not in outcome.text
    assert "made" not in box.git("ls-files", "--stage").stdout
    assert (box.ws / "beside.txt").read_text() == "ok\n"  # neighbour
    host_status_runs_nothing(box, proof)
