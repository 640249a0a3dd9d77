"""No answers in the history: a job's clone holds its ref's history and nothing
after it, and its agent cannot fetch the rest.

The source repository is made here, with real git, to hold everything an
agent could look for the fix in: a commit after the ref (the answer), a tag
and a branch on it, a stash, reflog entries, an unreachable commit and a
dangling blob. Each of git's own listings in the clone must show none of it,
and the ref's own history must all be there. The batch test then runs a
scripted agent in its sandbox that looks for itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import git

from governor.batch import Job, run_batch
from governor.batch.clone import NOWHERE, GitFailed, clone

SCRIPTED = Path(__file__).resolve().parents[1] / "audit" / "scripted_agent.py"
TEST = "from calc import add\n\n\ndef test_add():\n    assert add(1, 2) == 3\n"
ANSWER = "def add(a, b):\n    return a + b  # THE-ANSWER\n"


@dataclass(frozen=True)
class History:
    """The source repository and what the job's ref reaches, and what it does not."""

    path: Path
    ref_commit: str
    reachable: frozenset[str]
    """Every object the ref's commit reaches (commits, trees, blobs)."""
    later: frozenset[str]
    """Objects of the source the ref does not reach: the answers."""


def _objects(repo: Path) -> set[str]:
    listed = git(repo, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)")
    return set(listed.split())


@pytest.fixture
def history(tmp_path: Path) -> History:
    path = tmp_path / "source"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "the broken start")
    (path / "test_calc.py").write_text(TEST)
    git(path, "add", ".")
    git(path, "commit", "-qm", "the failing test")
    git(path, "tag", "-a", "job", "-m", "the job's ref")
    git(path, "branch", "job-branch")
    ref_commit = git(path, "rev-parse", "HEAD").strip()
    # After the ref: the fix, tagged and on a branch of its own too.
    (path / "calc.py").write_text(ANSWER)
    git(path, "commit", "-qam", "the fix (THE-ANSWER)")
    git(path, "tag", "v2")
    git(path, "branch", "fix")
    # A commit made and reset away: only the reflog reaches it.
    (path / "hint.txt").write_text("look at calc.py THE-ANSWER\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "a hint (THE-ANSWER)")
    git(path, "reset", "-q", "--hard", "HEAD~1")
    # A stash of another answer, and a dangling blob nothing names.
    (path / "calc.py").write_text(ANSWER.replace("THE-ANSWER", "THE-STASHED-ANSWER"))
    git(path, "stash", "-q")
    subprocess.run(
        ["git", "hash-object", "-w", "--stdin"],
        cwd=path, input="a dangling THE-ANSWER\n", text=True, check=True, capture_output=True,
    )  # fmt: skip
    git(path, "checkout", "-q", "job-branch")
    git(path, "checkout", "-q", "main")
    listed = git(path, "rev-list", "--objects", ref_commit).split()
    reachable = set(listed) - {"calc.py", "test_calc.py"}  # (the paths it names)
    everything = _objects(path)
    assert reachable < everything
    return History(path, ref_commit, frozenset(reachable), frozenset(everything - reachable))


def _listings(ws: Path) -> dict[str, str]:
    """What git shows of the clone's history, each listing as its text."""
    return {
        "objects": git(ws, "cat-file", "--batch-all-objects", "--batch-check"),
        "log": git(ws, "log", "--all", "--format=%H %s"),
        "reflog": git(ws, "reflog", "--all"),
        "tags": git(ws, "tag"),
        "stash": git(ws, "stash", "list"),
        "refs": git(ws, "for-each-ref"),
    }


@pytest.mark.parametrize("ref", ["job", "job-branch", "sha"])
async def test_a_clone_at_a_ref_holds_its_history_and_nothing_after_it(
    tmp_path: Path, history: History, ref: str
) -> None:
    named = history.ref_commit if ref == "sha" else ref
    ws = await clone(str(history.path), named, tmp_path / "ws")
    assert ws.commit == history.ref_commit
    assert _objects(ws.path) == history.reachable  # all of the ref's history, nothing else
    shown = _listings(ws.path)
    for sha in history.later:
        assert not any(sha in text for text in shown.values()), (sha, shown)
    assert not any("THE-ANSWER" in text or "THE-STASHED" in text for text in shown.values())
    assert [line.split(" ", 1)[1] for line in shown["log"].splitlines()] == [
        "the failing test",
        "the broken start",
    ]
    assert shown["reflog"] == shown["tags"] == shown["stash"] == shown["refs"] == ""
    for name in ("FETCH_HEAD", "ORIG_HEAD", "packed-refs", "logs"):
        assert not (ws.path / ".git" / name).exists(), name
    assert (ws.path / "calc.py").read_text().endswith("a - b\n")  # the ref's files, checked out
    assert git(ws.path, "status", "--porcelain") == ""
    assert git(ws.path, "fsck", "--no-dangling") == ""  # whole: every object the ref reaches
    # The source's scratch copy is gone; only the workspace is left beside it.
    assert [p.name for p in tmp_path.iterdir() if p.name != "source"] == ["ws"]


async def test_the_clone_s_remote_points_nowhere_so_a_fetch_fails_naming_it(
    tmp_path: Path, history: History
) -> None:
    ws = await clone(str(history.path), "job", tmp_path / "ws")
    for argv in (["fetch"], ["fetch", "origin"], ["fetch", "--all"], ["pull"]):
        done = subprocess.run(["git", *argv], cwd=ws.path, capture_output=True, text=True)
        assert done.returncode != 0, argv
        assert NOWHERE in done.stderr, (argv, done.stderr)
    assert _objects(ws.path) == history.reachable
    # The neighbour: the source itself, named by its path, still gives the answer
    # outside a sandbox (which is why the agent's sandbox hides it: the next test).
    git(ws.path, "fetch", "-q", str(history.path), "fix")
    assert history.later & _objects(ws.path)


async def test_a_ref_the_repository_does_not_have_fails_naming_it(
    tmp_path: Path, history: History
) -> None:
    with pytest.raises(GitFailed, match="no-such-ref"):
        await clone(str(history.path), "no-such-ref", tmp_path / "ws")
    assert [p.name for p in tmp_path.iterdir()] == ["source"]  # no scratch copy left


LOOK = (
    "git log --all --format=%s; echo tags=$(git tag | wc -l); echo stash=$(git stash list | wc -l); "
    "echo reflog=$(git reflog --all | wc -l); git cat-file --batch-all-objects --batch-check; "
    "git fetch -q; echo fetch=$?; git fetch -q {source} fix; echo fetch-source=$?; "
    "echo objects-after=$(git cat-file --batch-all-objects --batch-check | wc -l)"
)


def test_a_batch_job_s_agent_finds_no_answer_in_the_history_and_cannot_fetch_one(
    tmp_path: Path, history: History
) -> None:
    script = tmp_path / "look.json"
    script.write_text(json.dumps([{"shell": LOOK.format(source=f"file://{history.path}")}]))
    job = Job(
        id="looks",
        prompt="fix calc.py",
        argv=(sys.executable, str(SCRIPTED), "--script", str(script)),
        repo=str(history.path),
        ref="job",
        capability="edit-workspace",
        timeout=120,
    )
    result = run_batch([job], tmp_path / "out", parallel=1)
    (done,) = result.results
    assert done.status == "completed", done.reason
    said = json.loads((tmp_path / "out" / "outcomes.jsonl").read_text())["summary"]
    lines = said.splitlines()
    assert lines[:2] == ["the failing test", "the broken start"], said  # its history is there
    assert "THE-ANSWER" not in said and "fix" not in lines
    assert {"tags=0", "stash=0", "reflog=0"} <= set(lines), said
    kinds = {"commit", "tree", "blob", "tag"}
    listed = {w[0] for w in map(str.split, lines) if len(w) == 3 and w[1] in kinds}
    assert listed == history.reachable, said
    # Neither the remote (nowhere) nor the source's path (hidden by the agent's
    # sandbox) gives the agent anything.
    assert "fetch=128" in lines and "fetch-source=128" in lines, said
    assert f"objects-after={len(history.reachable)}" in lines, said


def test_a_password_in_a_job_s_repository_url_never_reaches_its_outcome(tmp_path: Path) -> None:
    job = Job(
        id="secret",
        prompt="t",
        argv=("/bin/true",),
        repo="https://me:s3cret-token@127.0.0.1:9/r.git",
    )
    result = run_batch([job], tmp_path / "out", parallel=1)
    (done,) = result.results
    assert done.status == "failed"
    line = (tmp_path / "out" / "outcomes.jsonl").read_text()
    assert "s3cret-token" not in line
    outcome = json.loads(line)
    assert outcome["repo"] == "https://me:***@127.0.0.1:9/r.git"
    assert outcome["reason"].startswith("could not clone https://me:***@127.0.0.1:9/r.git: ")
