"""`governor run --clone URL@REF`: the attempt in a fresh clone holding the ref's
history only, through a real subprocess, real git and the scripted agent in
its real sandbox."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from governor.cli.cloning import shown, split
from governor.sandbox.host.concealed import attempts_dir

GOVERNOR = str(Path(sys.executable).parent / "governor")
SCRIPTED = Path(__file__).resolve().parents[1] / "audit" / "scripted_agent.py"


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
        cwd=cwd, check=True, capture_output=True, text=True,
    )  # fmt: skip
    return done.stdout


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A repository whose branch ``job`` is one commit behind ``main`` (the answer)."""
    path = tmp_path / "source"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "the task")
    git(path, "branch", "job")
    (path / "calc.py").write_text("def add(a, b):\n    return a + b\n")
    git(path, "commit", "-qam", "THE-ANSWER")
    return path


def run(
    tmp_path: Path, *args: str, steps: list[object] | None = None
) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(steps or [{"say": "nothing to do"}]))
    argv = [GOVERNOR, "run", "--json", "--capability", "edit-workspace"]
    argv += ["--log", str(tmp_path / "audit.jsonl"), *args, "the task"]
    argv += ["--", sys.executable, str(SCRIPTED), "--script", str(script)]
    env = {**os.environ, "TMPDIR": str(tmp_path / "tmp")}
    (tmp_path / "tmp").mkdir(exist_ok=True)
    return subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env)


@pytest.mark.parametrize(
    ("value", "url", "ref"),
    [
        ("/srv/repo@main", "/srv/repo", "main"),
        ("/srv/repo", "/srv/repo", None),
        ("git@github.com:org/repo.git", "git@github.com:org/repo.git", None),
        ("git@github.com:org/repo.git@v1.2", "git@github.com:org/repo.git", "v1.2"),
        ("https://user@host/repo.git", "https://user@host/repo.git", None),
        ("https://user@host/repo.git@feature/x", "https://user@host/repo.git", "feature/x"),
        ("ssh://git@host/repo@HEAD", "ssh://git@host/repo", "HEAD"),
    ],
)
def test_url_at_ref_splits_at_the_last_at_that_can_start_a_ref(
    value: str, url: str, ref: str | None
) -> None:
    assert split(value) == (url, ref)


def test_an_empty_ref_or_repository_is_an_error_naming_it() -> None:
    with pytest.raises(ValueError, match="the ref after the last @ is empty"):
        split("/srv/repo@")
    with pytest.raises(ValueError, match="no repository before the @"):
        split("@main")
    assert shown("https://me:s3cret@host/r.git") == "https://me:***@host/r.git"
    assert shown("https://me@host/r.git") == "https://me@host/r.git"


def test_run_clone_works_in_a_fresh_clone_of_its_own_outside_tmpdir_with_the_ref_s_history_only(
    tmp_path: Path, source: Path, request: pytest.FixtureRequest
) -> None:
    look = "git log --all --format=%s; git fetch -q; echo fetch=$?"
    steps = [{"shell": look}, {"write": "{cwd}/notes.txt", "text": "seen\n"}, {"shell": look}]
    done = run(tmp_path, "--clone", f"{source}@job", steps=steps)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    said = outcome["summary"]
    assert said.splitlines()[0] == "the task" and "THE-ANSWER" not in said, said
    assert "fetch=128" in said and "the-governor-removed-this-remote" in said
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("governor: cloned")]
    ws = Path(line.rsplit(" into ", 1)[1])
    # the attempt's own folder, hidden from every other sandbox: not under TMPDIR
    assert ws.parent.parent == attempts_dir() and ws.name == "source"
    request.addfinalizer(lambda: shutil.rmtree(ws.parent, ignore_errors=True))
    assert outcome["workspace"] == str(ws)
    assert (ws / "notes.txt").read_text() == "seen\n"  # kept, with what the agent left
    assert (ws / "calc.py").read_text().endswith("a - b\n")
    assert f"(commit {git(source, 'rev-parse', 'job')[:12]})" in line


def test_run_clone_into_a_workspace_that_holds_files_is_refused_and_a_new_one_is_not(
    tmp_path: Path, source: Path
) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "mine.txt").write_text("mine\n")
    done = run(tmp_path, "--clone", f"{source}@job", "--workspace", str(busy))
    assert done.returncode == 2
    assert f"--workspace {busy} is not empty: --clone makes the workspace" in done.stderr
    assert sorted(p.name for p in busy.iterdir()) == ["mine.txt"]  # untouched
    assert list((tmp_path / "tmp").iterdir()) == []  # and nothing cloned elsewhere
    fresh = tmp_path / "fresh"
    done = run(tmp_path, "--clone", f"{source}@job", "--workspace", str(fresh))
    assert done.returncode == 0, done.stderr
    assert git(fresh, "log", "--all", "--format=%s") == "the task\n"


def test_run_clone_of_a_ref_it_lacks_is_refused_naming_it_and_leaves_nothing(
    tmp_path: Path, source: Path
) -> None:
    done = run(tmp_path, "--clone", f"{source}@no-such-ref")
    assert done.returncode == 2
    assert f"could not clone {source} at no-such-ref" in done.stderr
    assert json.loads(done.stdout)["refused_before_start"] is True
    assert list((tmp_path / "tmp").iterdir()) == []
    assert not (tmp_path / "audit.jsonl").exists()


def test_a_password_in_the_clone_url_never_reaches_the_output(tmp_path: Path) -> None:
    done = run(tmp_path, "--clone", "https://me:s3cret-token@127.0.0.1:9/r.git@main")
    assert done.returncode == 2
    assert "s3cret-token" not in done.stderr + done.stdout
    assert "could not clone https://me:***@127.0.0.1:9/r.git at main" in done.stderr


def test_run_clone_refused_before_start_removes_the_clone(tmp_path: Path, source: Path) -> None:
    done = run(tmp_path, "--clone", f"{source}@job", "--policy", str(tmp_path / "missing.toml"))
    assert done.returncode == 2
    assert "missing.toml" in done.stderr
    assert list((tmp_path / "tmp").iterdir()) == []  # nothing ran in it: not left behind


@pytest.mark.parametrize(("url", "name"), [("/srv/x/..", "repo"), ("/srv/x/.", "x"), ("https://h/my.app.git", "my.app")])
def test_the_clone_goes_into_a_folder_of_its_own_whatever_the_url_ends_with(url: str, name: str) -> None:
    from governor.cli.cloning import _target

    found = _target(None, url, [])
    assert found is not None
    path, folder = found
    try:
        assert folder is not None and path.parent == folder and path.name == name
    finally:
        if folder is not None:
            folder.rmdir()


def test_run_s_help_says_where_the_clone_really_goes() -> None:
    """The help named ``$TMPDIR``; the clone goes to the attempts folder (the
    test above holds where it goes)."""
    done = subprocess.run([GOVERNOR, "run", "--help"], capture_output=True, text=True, timeout=60)
    words = " ".join(done.stdout.split())
    assert "--clone" in words and "$XDG_STATE_HOME/acp-governor/attempts/" in words, words
    assert "made under $TMPDIR" not in words
