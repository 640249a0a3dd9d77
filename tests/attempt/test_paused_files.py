"""A paused attempt's files are data its own user wrote: the start baseline kept
as JSON (read back whole, field by field, never unpickled), and the state and
the baseline read only when they are this user's alone (not a link, not
writable by another). What root resuming another user's attempt meets is in
tests/security/test_outside_attack7.py; here, the files themselves."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from governor.attempt.paused import NotPaused, PausedState, baseline_path, state_path
from governor.confine.workspace import snapshot
from governor.tamper import baseline as tamper


def paused_state(attempt: str) -> PausedState:
    return PausedState(attempt, "/nowhere/audit.jsonl", "0" * 64, 3, 1, {}, "p", "c", {})


@pytest.fixture
def state_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return tmp_path / "state"


def workspace(root: Path) -> Path:
    """Files the tamper audit keeps, each way it keeps one: a test with a skip
    marker (its text and marks), a source with a suppression (compressed), one
    in Latin-1 (its encoding), a config file, and another source (its start)."""
    (root / "tests").mkdir(parents=True)
    (root / "tests/test_a.py").write_text(
        "import pytest\n\n@pytest.mark.skip\ndef test_one():\n    assert 1\n"
    )
    (root / "mod.py").write_text("x = 1  # type: ignore\nprint('hi')\n")
    (root / "latin.py").write_bytes("# -*- coding: latin-1 -*-\ns = 'caf\xe9'\n".encode("latin-1"))
    (root / "pyproject.toml").write_text("[tool.pytest.ini_options]\naddopts = '-q'\n")
    (root / "app.js").write_text("export const a = 1;\n")
    return root


def test_a_paused_attempts_baseline_is_kept_as_json_and_read_back_whole(
    tmp_path: Path, state_home: Path
) -> None:
    """What the attempt's start looked like goes on as the same objects: the
    snapshot and the tamper audit's kept files, every field, from a file that
    is JSON (data: reading it runs nothing)."""
    root = str(workspace(tmp_path / "ws"))
    before = snapshot([root])
    kept = tamper.keep(before.files, [root])
    assert kept.texts and kept.marks and kept.present and kept.sources and kept.starts
    assert kept.encodings  # the audit kept something of each kind
    state = paused_state("a1")
    state.save()
    state.save_baseline((before, kept))
    raw = json.loads(baseline_path("a1").read_text())  # JSON, not a pickle
    assert raw["format"] == 1
    assert state.load_baseline() == (before, kept)


def test_a_paused_state_or_baseline_another_could_write_or_a_link_to_one_is_refused(
    tmp_path: Path, state_home: Path
) -> None:
    """The state names the job to run and the baseline what the verdict is
    judged against: one writable by another user (group or others), or a link
    in its place, is refused naming the file; made the owner's alone again,
    it is read."""
    state = paused_state("a2")
    state.save()
    state.save_baseline((snapshot([str(tmp_path)]), tamper.keep([], [str(tmp_path)])))
    for path, read in ((state_path("a2"), lambda: PausedState.load("a2")),
                       (baseline_path("a2"), state.load_baseline)):  # fmt: skip
        path.chmod(0o620)
        with pytest.raises(NotPaused, match="is not yours alone"):
            read()
        path.chmod(0o600)
        assert read() is not None
        aside = path.with_name("aside")
        os.replace(path, aside)
        path.symlink_to(aside)
        with pytest.raises(NotPaused, match="symbolic link"):
            read()
        path.unlink()
        os.replace(aside, path)
        assert read() is not None


def test_a_baseline_that_is_not_the_governors_data_is_refused_naming_it(
    tmp_path: Path, state_home: Path
) -> None:
    """A baseline file of the owner's that is not what `save_baseline` writes (a
    pickle, a field of the wrong type) is refused, never guessed at."""
    state = paused_state("a3")
    state.save()
    path = baseline_path("a3")
    for text in (b"\x80\x05K\x01.", json.dumps({"format": 1, "snapshot": {"files": 1}}).encode()):
        path.write_bytes(text)
        path.chmod(0o600)
        with pytest.raises(NotPaused, match=str(path)):
            state.load_baseline()
