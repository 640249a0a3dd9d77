"""Workspace snapshots (`governor.confine.workspace`): a change is seen by what the agent
cannot set, and an untouched tree shows none."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from governor.confine import workspace
from governor.confine.workspace import Seen, Snapshot, diff, differs, snapshot


def tree(root: Path) -> Path:
    (root / "src").mkdir(parents=True)
    (root / "README.md").write_text("hello")
    (root / "src" / "a.py").write_text("print(1)\n")
    return root


def aged(path: Path, seconds: int = 3600) -> None:
    """Put the file's mtime an hour back (its ctime moves to now, as any utime does)."""
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns - seconds * 10**9))


def test_an_untouched_tree_shows_no_change(tmp_path: Path) -> None:
    root = str(tree(tmp_path / "ws"))
    before = snapshot([root])
    assert diff(before, snapshot([root], before=before)) == []


def test_a_same_size_edit_with_its_mtime_put_back_is_a_change(tmp_path: Path) -> None:
    readme = tree(tmp_path / "ws") / "README.md"
    before = snapshot([str(tmp_path / "ws")])
    st = readme.stat()
    readme.write_text("HELLO")
    os.utime(readme, ns=(st.st_atime_ns, st.st_mtime_ns))
    after = snapshot([str(tmp_path / "ws")], before=before)
    old, new = before.files[str(readme)], after.files[str(readme)]
    assert (old.size, old.mtime_ns) == (new.size, new.mtime_ns)  # what used to be compared
    assert [(c.path, c.how) for c in diff(before, after)] == [(str(readme), "changed")]


def test_a_change_carries_its_ctime_not_the_mtime_the_writer_chose(tmp_path: Path) -> None:
    readme = tree(tmp_path / "ws") / "README.md"
    before = snapshot([str(tmp_path / "ws")])
    readme.write_text("more text")
    aged(readme)
    (change,) = diff(before, snapshot([str(tmp_path / "ws")], before=before))
    assert change.time_ns == readme.stat().st_ctime_ns != readme.stat().st_mtime_ns


def test_a_file_replaced_by_a_rename_is_a_change_even_with_every_time_equal() -> None:
    old = Seen(5, 100, 100, 1, 0o100644)
    assert differs(old, old._replace(ino=2))
    assert not differs(old, old)


def test_a_racy_file_is_hashed_and_an_edit_in_its_tick_is_told_by_its_content() -> None:
    same = Seen(5, 100, 100, 1, 0o100644)
    assert differs(same._replace(digest=b"a"), same._replace(digest=b"b"))
    assert not differs(same._replace(digest=b"a"), same._replace(digest=b"a"))
    assert not differs(same._replace(digest=b"a"), same)  # the other side did not hash


def test_only_fresh_files_are_hashed_and_a_file_hashed_before_is_hashed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tree(tmp_path / "ws")
    readme = str(root / "README.md")
    fresh = snapshot([str(root)])
    assert all(s.digest is not None for s in fresh.files.values())  # written just now
    monkeypatch.setattr(workspace, "RACY_NS", -(10**18))  # as if long after: nothing is fresh
    assert all(s.digest is None for s in snapshot([str(root)]).files.values())
    hashed = Snapshot({readme: fresh.files[readme]})
    again = snapshot([str(root)], before=hashed)
    assert again.files[readme].digest == fresh.files[readme].digest
    assert again.files[str(root / "src" / "a.py")].digest is None


def test_a_flood_of_new_files_cannot_hide_a_change_or_a_deletion_past_the_limit(tmp_path: Path) -> None:
    root = tree(tmp_path / "ws")
    before = snapshot([str(root)], limit=10)
    assert before.complete
    flood = root / "aaa"
    flood.mkdir()
    for i in range(50):
        (flood / f"f{i}").write_text("x")
    (root / "README.md").write_text("HELLO")
    (root / "src" / "a.py").unlink()
    after = snapshot([str(root)], limit=10, before=before)
    assert not after.complete  # the outcome says the walk stopped
    found = {(c.path, c.how) for c in diff(before, after)}
    assert (str(root / "README.md"), "changed") in found
    assert (str(root / "src" / "a.py"), "deleted") in found
    assert len(after.files) == 10


def test_a_tree_of_exactly_the_limit_is_walked_whole(tmp_path: Path) -> None:
    root = tree(tmp_path / "ws")
    assert snapshot([str(root)], limit=2).complete
    assert not snapshot([str(root)], limit=1).complete


def test_a_link_to_a_folder_made_in_a_root_is_a_change_and_is_not_followed(tmp_path: Path) -> None:
    root = tree(tmp_path / "ws")
    before = snapshot([str(root)])
    (root / "etc").symlink_to("/etc")
    after = snapshot([str(root)], before=before)
    assert [(c.path, c.how) for c in diff(before, after)] == [(str(root / "etc"), "created")]
    assert not any(p.startswith(str(root / "etc") + "/") for p in after.files)


def repo_with_build(root: Path, built: int) -> Path:
    """A git repository with a test, an ignored ``build/`` of ``built`` files and
    a folder holding only an ignored file (git lists it, yet does not ignore it)."""
    tree(root)
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "logs").mkdir()
    (root / "logs" / "run.log").write_text("x")
    (root / "build").mkdir()
    for n in range(built):
        (root / "build" / f"{n}.o").write_text("")
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def test_past_the_bound_new_files_git_would_track_are_seen_and_ignored_ones_are_not(
    tmp_path: Path,
) -> None:
    root = repo_with_build(tmp_path / "ws", 30)
    before = snapshot([str(root)], limit=10)
    assert not before.complete and not before.left_unseen()  # only ignored files were left
    (root / "logs" / "conftest.py").write_text("x")  # in a folder git lists, not one it ignores
    (root / "src" / "new.py").write_text("x")
    (root / ".gitignore").write_text("build/\n*.log\n*.py\n")  # the agent's ignore rules count for nothing
    after = snapshot([str(root)], limit=10, before=before)
    found = {(c.path, c.how) for c in diff(before, after)}
    assert {(str(root / "logs" / "conftest.py"), "created"), (str(root / "src" / "new.py"), "created")} <= found
    assert not after.left_unseen()
    (root / "build" / "late.o").write_text("")  # into the ignored folder the walk left
    assert snapshot([str(root)], limit=10, before=before).changed_unwalked() == [str(root / "build")]


def test_outside_a_repository_the_bound_applies_to_every_file_and_says_so(tmp_path: Path) -> None:
    root = tree(tmp_path / "ws")
    for n in range(5):
        (root / f"{n}.txt").write_text("")
    snap = snapshot([str(root)], limit=3)
    assert snap.left_unknown and snap.left_unseen() and len(snap.files) == 3


def test_git_asked_what_it_ignores_runs_nothing_the_repository_names(tmp_path: Path) -> None:
    root = repo_with_build(tmp_path / "ws", 2)
    marker = tmp_path / "ran"
    config = root / ".git" / "config"
    config.write_text(config.read_text() + f"[core]\n\tfsmonitor = touch {marker}\n")
    ignored = workspace.git_ignored(str(root))
    assert ignored is not None and ignored.folders == frozenset({str(root / "build")})
    assert str(root / "logs" / "run.log") in ignored.files
    assert not marker.exists()
    # the neighbour: the person's own git there runs it (the hook is real)
    subprocess.run(["git", "-C", str(root), "status", "--short"], capture_output=True, check=False)
    assert marker.exists()


def test_a_folder_made_unreadable_is_walked_and_its_mode_put_back(tmp_path: Path) -> None:
    root = tree(tmp_path / "ws")
    before = snapshot([str(root)])
    (root / "hid").mkdir()
    (root / "hid" / "payload.sh").write_text("id")
    os.chmod(root / "hid", 0o300)
    try:
        after = snapshot([str(root)], before=before)
        assert str(root / "hid" / "payload.sh") in {c.path for c in diff(before, after)}
        assert os.stat(root / "hid").st_mode & 0o777 == 0o300
    finally:
        os.chmod(root / "hid", 0o700)


def test_a_root_that_is_a_file_is_one_entry_seen_changed_and_deleted(tmp_path: Path) -> None:
    config = tmp_path / ".claude.json"
    config.write_text("{}")
    missing = tmp_path / "not-there.json"
    before = snapshot([str(config), str(missing)])
    assert list(before.files) == [str(config)]
    config.write_text('{"mcpServers": {}}')
    missing.write_text("{}")
    after = snapshot([str(config), str(missing)], before=before)
    assert [(c.path, c.how) for c in diff(before, after)] == [
        (str(config), "changed"),
        (str(missing), "created"),
    ]
    config.unlink()
    gone = snapshot([str(config), str(missing)], before=after)
    assert [(c.path, c.how) for c in diff(after, gone)] == [(str(config), "deleted")]
