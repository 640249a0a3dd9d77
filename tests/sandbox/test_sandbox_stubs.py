"""Stub placeholders for missing protected paths: created, shared, removed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbox.profile import ProfileError
from sandbox.stubs import StubLedger


def test_a_stub_is_an_empty_read_only_file_removed_after_its_last_use(tmp_path: Path) -> None:
    ledger = StubLedger()
    stub = tmp_path / ".codex"
    assert ledger.acquire(str(stub))
    assert stub.is_file() and stub.stat().st_size == 0
    assert stub.stat().st_mode & 0o777 == 0o444
    assert ledger.acquire(str(stub))
    ledger.release(str(stub))
    assert stub.exists()  # another sandbox still relies on it
    ledger.release(str(stub))
    assert not stub.exists()


def test_an_existing_path_is_never_claimed_or_removed(tmp_path: Path) -> None:
    ledger = StubLedger()
    real = tmp_path / ".vscode"
    real.mkdir()
    assert not ledger.acquire(str(real))
    ledger.release(str(real))
    assert real.is_dir()


def test_a_stub_replaced_or_written_meanwhile_is_left_alone(tmp_path: Path) -> None:
    ledger = StubLedger()
    stub = tmp_path / ".envrc"
    ledger.acquire(str(stub))
    os.chmod(stub, 0o644)
    stub.write_text("user content")
    ledger.release(str(stub))
    assert stub.read_text() == "user content"


def test_a_hold_parks_stubs_between_commands_and_removes_them_at_its_end(tmp_path: Path) -> None:
    ledger = StubLedger()
    stub = tmp_path / ".claude"
    with ledger.hold():
        ledger.acquire(str(stub))
        ledger.release(str(stub))
        assert stub.exists()
        assert ledger.owns(str(stub))
        inode = stub.stat().st_ino
        assert ledger.acquire(str(stub))  # reused, not re-created
        assert stub.stat().st_ino == inode
        ledger.release(str(stub))
    assert not stub.exists()
    assert not ledger.owns(str(stub))


def test_a_stub_that_cannot_be_created_fails_closed_naming_the_path(tmp_path: Path) -> None:
    ledger = StubLedger()
    with pytest.raises(ProfileError, match="missing-dir"):
        ledger.acquire(str(tmp_path / "missing-dir" / ".codex"))


def test_release_all_removes_everything(tmp_path: Path) -> None:
    ledger = StubLedger()
    paths = [tmp_path / name for name in (".a", ".b")]
    with ledger.hold():
        for path in paths:
            ledger.acquire(str(path))
        ledger.release(str(paths[0]))
        ledger.release_all()
    assert not any(p.exists() for p in paths)
