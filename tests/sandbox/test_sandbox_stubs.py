"""Stub placeholders for missing protected paths: created, shared, removed."""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from governor.sandbox.plan.profile import ProfileError
from governor.sandbox.run.stubs import StubLedger
from governor.sandbox.standalone.sweeper import (
    FS_IMMUTABLE_FL,
    SEAL_MARK,
    get_flags,
    set_flags,
    unseal_and_delete,
)

REPO = Path(__file__).resolve().parents[2]


def _flags(path: Path) -> int:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        return get_flags(fd)
    finally:
        os.close(fd)


def _can_seal(directory: Path) -> bool:
    ledger = StubLedger()
    probe = directory / ".seal-probe"
    ledger.acquire(str(probe))
    try:
        return ledger.sealed(str(probe))
    finally:
        ledger.release(str(probe))


@pytest.fixture
def sealing(tmp_path: Path) -> Iterator[Path]:
    """A directory where this process can seal stubs (root with
    CAP_LINUX_IMMUTABLE on a filesystem with the flag); skip otherwise."""
    if not _can_seal(tmp_path):
        pytest.skip("stubs cannot be sealed here (needs root with CAP_LINUX_IMMUTABLE)")
    yield tmp_path
    for path in tmp_path.rglob("*"):  # never leave an immutable file behind a failure
        if path.is_file() and not path.is_symlink():
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                set_flags(fd, get_flags(fd) & ~FS_IMMUTABLE_FL)
            except OSError:
                pass
            finally:
                os.close(fd)


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


def test_a_json_placeholder_holds_an_empty_object_and_a_commondir_one_a_dot(tmp_path: Path) -> None:
    ledger = StubLedger()
    (tmp_path / ".git").mkdir()
    stubs = {tmp_path / ".mcp.json": "{}\n", tmp_path / ".git" / "commondir": ".\n"}
    for stub, content in stubs.items():
        assert ledger.acquire(str(stub))
        assert stub.read_text() == content
        assert stub.stat().st_mode & 0o777 == 0o444
    assert json.loads((tmp_path / ".mcp.json").read_text()) == {}
    for stub in stubs:
        ledger.release(str(stub))
        assert not stub.exists()


def test_a_placeholder_whose_content_changed_in_place_is_left_alone(tmp_path: Path) -> None:
    ledger = StubLedger(seal=False)
    stub = tmp_path / "settings.json"
    with ledger.hold():
        ledger.acquire(str(stub))
        inode = stub.stat().st_ino
        os.chmod(stub, 0o644)
        stub.write_text("[]\n")  # same length, same inode: only the content tells
        assert stub.stat().st_ino == inode
        ledger.release(str(stub))
        assert not ledger.acquire(str(stub))  # a parked stub that changed is not reused
    assert stub.read_text() == "[]\n"


def test_a_users_file_with_the_placeholders_content_is_never_claimed_or_removed(
    tmp_path: Path,
) -> None:
    ledger = StubLedger()
    mine = tmp_path / ".mcp.json"
    mine.write_text("{}\n")
    assert not ledger.acquire(str(mine))
    assert not ledger.adopt(str(mine))
    ledger.release(str(mine))
    ledger.release_all()
    assert mine.read_text() == "{}\n"
    st = mine.stat()
    assert unseal_and_delete(str(mine), st.st_dev, st.st_ino) == "not ours"
    assert mine.exists()


def test_an_existing_path_is_never_claimed_or_removed(tmp_path: Path) -> None:
    ledger = StubLedger()
    real = tmp_path / ".vscode"
    real.mkdir()
    assert not ledger.acquire(str(real))
    ledger.release(str(real))
    assert real.is_dir()


def test_a_stub_replaced_or_written_meanwhile_is_left_alone(tmp_path: Path) -> None:
    ledger = StubLedger(seal=False)  # a sealed stub cannot be changed at all (below)
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


def test_as_root_a_stub_is_sealed_marked_and_unsealed_before_its_removal(sealing: Path) -> None:
    ledger = StubLedger()
    stub = sealing / ".claude"
    assert ledger.acquire(str(stub))
    assert ledger.sealed(str(stub))
    assert _flags(stub) & FS_IMMUTABLE_FL
    assert os.getxattr(stub, SEAL_MARK) == b"1"
    with pytest.raises(PermissionError):
        stub.unlink()  # even root, while it is sealed
    ledger.release(str(stub))
    assert not stub.exists()


def test_without_sealing_a_stub_is_a_plain_file_that_needs_its_mount(tmp_path: Path) -> None:
    ledger = StubLedger(seal=False)
    stub = tmp_path / ".claude"
    assert ledger.acquire(str(stub))
    assert not ledger.sealed(str(stub))
    assert not _flags(stub) & FS_IMMUTABLE_FL
    ledger.release(str(stub))
    assert not stub.exists()


def test_a_sealed_stub_another_governor_relies_on_is_shared_and_removed_by_the_last(
    sealing: Path,
) -> None:
    first, second = StubLedger(), StubLedger()
    stub = sealing / ".mcp.json"
    assert first.acquire(str(stub))
    assert second.acquire(str(stub))  # exists: taken over as a share, not refused
    assert second.sealed(str(stub))
    first.release(str(stub))
    assert stub.exists() and _flags(stub) & FS_IMMUTABLE_FL  # the second still relies on it
    second.release(str(stub))
    assert not stub.exists()


LEFT_BEHIND = """
import os, signal, sys
import governor.sandbox.run.stubs
governor.sandbox.run.stubs.SWEEP_GRACE = float(sys.argv[1])
for path in sys.argv[2:]:
    assert governor.sandbox.run.stubs.LEDGER.acquire(path) and governor.sandbox.run.stubs.LEDGER.sealed(path)
governor.sandbox.run.stubs.LEDGER.commit()  # as the launcher does before the sandbox starts
os.kill(os.getpid(), signal.SIGKILL)
"""


def _killed_governor(grace: float, *stubs: Path) -> None:
    """A governor process that seals ``stubs`` and is SIGKILLed (no cleanup)."""
    argv = [sys.executable, "-c", LEFT_BEHIND, str(grace), *map(str, stubs)]
    killed = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    for stub in stubs:
        assert get_flags_of(stub) & FS_IMMUTABLE_FL  # the litter nobody could rm


def get_flags_of(path: Path) -> int:
    return _flags(path)


def _gone_within(path: Path, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    return not path.exists()


def test_a_sealed_stub_left_by_a_killed_governor_is_taken_over_and_removed(sealing: Path) -> None:
    stub = sealing / ".vscode"
    _killed_governor(30.0, stub)  # its own sweeper waits half a minute
    ledger = StubLedger()
    assert ledger.adopt(str(stub))
    ledger.release(str(stub))
    assert not stub.exists()


@pytest.mark.parametrize(("name", "content"), [(".envrc", ""), (".mcp.json", "{}\n")])
def test_a_users_own_immutable_file_like_a_placeholder_is_never_taken_over_or_removed(
    sealing: Path, name: str, content: str
) -> None:
    mine = sealing / name
    mine.write_text(content)
    fd = os.open(mine, os.O_RDONLY)
    try:
        set_flags(fd, get_flags(fd) | FS_IMMUTABLE_FL)
        st = os.fstat(fd)
    finally:
        os.close(fd)
    ledger = StubLedger()
    assert not ledger.acquire(str(mine))
    assert not ledger.adopt(str(mine))
    ledger.release(str(mine))
    ledger.release_all()
    assert unseal_and_delete(str(mine), st.st_dev, st.st_ino) == "not ours"
    assert mine.read_text() == content


def test_a_sealed_json_placeholder_is_taken_over_and_removed_by_its_content(sealing: Path) -> None:
    stub = sealing / ".mcp.json"
    _killed_governor(30.0, stub)
    assert stub.read_text() == "{}\n"
    ledger = StubLedger()
    assert ledger.adopt(str(stub))
    ledger.release(str(stub))
    assert not stub.exists()


def test_a_stub_locked_exclusively_by_someone_else_is_not_taken_over(sealing: Path) -> None:
    owner = StubLedger()
    stub = sealing / ".codex"
    assert owner.acquire(str(stub))
    fd = os.open(stub, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # another process relies on it too
        owner.release(str(stub))
        assert stub.exists()  # so the owner leaves it
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # ... and is now deleting it
        assert not StubLedger().adopt(str(stub))
        fcntl.flock(fd, fcntl.LOCK_UN)
        late = StubLedger()
        assert late.adopt(str(stub))
        late.release(str(stub))
        assert not stub.exists()
    finally:
        os.close(fd)


def test_a_killed_governors_sweeper_removes_its_sealed_stubs_after_the_grace(sealing: Path) -> None:
    stubs = [sealing / ".claude", sealing / ".idea"]
    _killed_governor(0.3, *stubs)
    assert all(_gone_within(stub, 10) for stub in stubs)


def test_the_sweeper_waits_while_a_sandbox_still_holds_its_lock(sealing: Path) -> None:
    stub = sealing / ".gemini"
    _killed_governor(0.1, stub)
    fd = os.open(stub, os.O_RDONLY)
    try:
        fcntl.lockf(fd, fcntl.LOCK_SH)  # what a sandbox's pid 1 holds (bwrap --lock-file)
        assert not _gone_within(stub, 2.5)  # an orphaned sandbox still relies on it
    finally:
        os.close(fd)  # the sandbox ends
    assert _gone_within(stub, 10)


def test_the_sweeper_never_deletes_an_unsealed_file_even_with_a_stubs_inode(tmp_path: Path) -> None:
    users = tmp_path / ".envrc"  # created where a stub was, and given its freed inode number
    users.touch()
    st = users.stat()
    assert unseal_and_delete(str(users), st.st_dev, st.st_ino) == "not ours"
    assert users.exists()


HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.lockf(fd, fcntl.LOCK_SH)  # what a sandbox's pid 1 holds (bwrap --lock-file)
print("locked", flush=True)
time.sleep(float(sys.argv[2]))
"""


def _sandbox_lock(stub: Path, seconds: float) -> subprocess.Popen[str]:
    """A process holding a sandbox's lock on ``stub`` for ``seconds``."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(stub), str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline() == "locked\n"
    return holder


def test_a_release_waits_for_a_sandbox_whose_pid_1_is_still_exiting(sealing: Path) -> None:
    ledger = StubLedger()
    stub = sealing / ".cursor"
    assert ledger.acquire(str(stub)) and ledger.sealed(str(stub))
    holder = _sandbox_lock(stub, 0.2)
    try:
        ledger.release(str(stub))
        assert not stub.exists()  # gone when release returns, not at process exit
    finally:
        holder.kill()
        holder.wait()


def test_a_stub_still_locked_after_the_wait_is_deleted_at_the_next_commit(
    sealing: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("governor.sandbox.run.stubs.LINGER", 0.05)
    ledger = StubLedger()
    stub = sealing / ".devcontainer"
    assert ledger.acquire(str(stub))
    holder = _sandbox_lock(stub, 60)
    try:
        ledger.release(str(stub))
        assert stub.exists() and _flags(stub) & FS_IMMUTABLE_FL  # an orphaned sandbox
    finally:
        holder.kill()
        holder.wait()
    ledger.commit()
    assert not stub.exists()


def test_a_hold_keeps_only_the_stubs_under_its_own_roots(tmp_path: Path) -> None:
    # Two attempts at once in one process (a batch): the first to end must not
    # find its stubs kept on disk by the other's session.
    ledger = StubLedger()
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    with ledger.hold([second]):
        with ledger.hold([first]):
            ledger.acquire(str(first / ".claude"))
            ledger.acquire(str(second / ".claude"))
            ledger.release(str(first / ".claude"))
            assert (first / ".claude").exists()  # parked by its own hold
        assert not (first / ".claude").exists()
        ledger.release(str(second / ".claude"))
        assert (second / ".claude").exists()
    assert not (second / ".claude").exists()
