"""The audit log on a real disk: written ahead, chained, masked, durable, failing closed."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governor.audit.log import _SCREEN, AuditLog, AuditUnavailable, chain_hash
from governor.audit.verify import read_lines, verify
from governor.boundary.secrets import _SHAPES, Masker

KNOWN = ['hunter2-"quoted"-\\back', "plain-known-value-123", "line\nbreak-secret"]


def lines_of(path: Path) -> list[dict[str, Any]]:
    # JSON lines end at "\n" only (str.splitlines would also cut at U+0085, U+2028, ...).
    return [json.loads(x) for x in path.read_text(encoding="utf-8").split("\n") if x]


def test_a_record_is_in_the_file_before_record_returns(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    log = AuditLog(path, "att-1")
    log.record("attempt-start", agent="demo")
    for n in range(1, 4):
        log.record("read", request=n, subject={"path": f"/ws/{n}"}, verdict="allow")
        # Read through a descriptor of our own: the line is handed to the OS already.
        on_disk = lines_of(path)
        assert on_disk[-1]["subject"] == {"path": f"/ws/{n}"}
        assert on_disk[-1] == log.records[-1]
    log.close()


def test_records_chain_each_to_the_one_before_within_their_attempt(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    log = AuditLog(path, "att-1")
    records = [log.record("attempt-start"), log.record("read", verdict="allow")]
    records.append(log.record("attempt-end", status="completed"))
    log.close()
    assert [r["prev"] for r in records] == [None, records[0]["hash"], records[1]["hash"]]
    assert all(chain_hash(r) == r["hash"] for r in lines_of(path))
    assert [r["seq"] for r in records] == [1, 2, 3]
    result = verify(read_lines(path))
    assert (result.problem, result.unfinished, result.attempts, result.records) == (None, (), 1, 3)


def test_none_fields_are_left_out_and_the_record_is_canonical_json(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "a.jsonl", "att")
    r = log.record("write", option=None, subject={"path": "/ws/é"}, verdict="deny")
    log.close()
    assert "option" not in r
    assert "é" in (tmp_path / "a.jsonl").read_text(encoding="utf-8")  # UTF-8 as is


SHAPE_BRANCHES = [
    b
    for b in re.split(r"\|(?![^()]*\))", _SHAPES.pattern)  # top-level alternatives
    if b
]


def shape_samples() -> st.SearchStrategy[str]:
    """Strings matching each token shape the masker knows (every top-level branch)."""
    strategies = []
    for branch in SHAPE_BRANCHES:
        # hypothesis cannot generate look-behinds; the query-string branch gets its '?'.
        pattern = branch.replace("(?<=[?&])", "[?&]")
        strategies.append(st.from_regex(pattern, fullmatch=True))
    return st.one_of(strategies)


@pytest.mark.parametrize("branch", SHAPE_BRANCHES)
@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_the_screen_flags_every_sample_of_every_shape(branch: str, data: st.DataObject) -> None:
    """Branch by branch (so that every letter of a class like ``xox[abposr]`` gets
    its samples): a record holding the shape is flagged by the screen, or carries a
    backslash, which sends it to the masker whole."""
    pattern = branch.replace("(?<=[?&])", "[?&]")
    sample = data.draw(st.from_regex(pattern, fullmatch=True))
    line = orjson.dumps({"kind": "permission", "subject": {"title": f"run {sample} now"}})
    assert b"\\" in line or _SCREEN.search(line) is not None, (sample, line)


def test_every_top_level_shape_branch_is_covered_by_the_samples() -> None:
    assert len(SHAPE_BRANCHES) >= 10  # a new shape in governor.boundary.secrets joins the property test
    for branch in SHAPE_BRANCHES:
        re.compile(branch.replace("(?<=[?&])", "[?&]"))


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    before=st.text(max_size=20),
    secret=st.one_of(shape_samples(), st.sampled_from(KNOWN)),
    after=st.text(max_size=20),
    where=st.sampled_from(["title", "command", "nested", "listed"]),
)
def test_the_screen_never_lets_a_secret_through_unmasked(
    tmp_path: Path, before: str, secret: str, after: str, where: str
) -> None:
    """The fast path (a whole record screened at once) must mask exactly what the
    masker masks string by string, for every shape and every known value,
    whatever surrounds it (escapes, quotes, newlines, non-ASCII)."""
    masker = Masker(KNOWN)
    value = before + secret + after
    subjects: dict[str, dict[str, Any]] = {
        "title": {"title": value},
        "command": {"command": value, "cwd": "/ws"},
        "nested": {"input": {"deep": [{"x": value}]}},
        "listed": {"paths": ["/ws/a", value]},
    }
    subject = subjects[where]
    path = tmp_path / "screen.jsonl"
    path.unlink(missing_ok=True)
    log = AuditLog(path, "att", masker=masker)
    start = log.record("attempt-start")
    record = log.record("permission", subject=subject, reason=f"because {value}")
    log.close()
    expected = masker.json({"subject": subject, "reason": f"because {value}"})
    assert record["subject"] == expected["subject"] and record["reason"] == expected["reason"]
    assert lines_of(path) == [start, record]
    assert verify(read_lines(path)).problem is None


def test_a_clean_record_is_written_unchanged_by_the_fast_path(tmp_path: Path) -> None:
    masker = Masker(KNOWN)
    log = AuditLog(tmp_path / "a.jsonl", "att", masker=masker)
    subject = {"command": "git status && pytest -q tests/", "cwd": "/work/app-sk"}
    record = log.record("terminal", subject=subject, reason="edit-workspace allows it")
    log.close()
    assert record["subject"] == subject
    assert lines_of(tmp_path / "a.jsonl")[0]["subject"] == subject


def test_a_lone_surrogate_is_written_as_its_escape_read_back_as_itself_and_the_log_verifies(
    tmp_path: Path,
) -> None:
    """A name's byte that is not UTF-8 (a lone surrogate once decoded) is its
    JSON escape in the line (never U+FFFD: two names would be one), the
    readers get the very string back, and the chain verifies."""
    path = tmp_path / "a.jsonl"
    log = AuditLog(path, "att")
    log.record("attempt-start")
    record = log.record("read", subject={"path": "/ws/bad\udcffname"}, verdict="allow")
    log.record("read", subject={"path": "/ws/bad\udcfename"}, verdict="allow")
    log.close()
    assert record["subject"]["path"] == "/ws/bad\udcffname"
    raw = path.read_bytes()
    assert b"/ws/bad\\udcffname" in raw and b"/ws/bad\\udcfename" in raw
    raw.decode("utf-8")  # strict
    assert [r["subject"]["path"] for _, r, _ in read_lines(path) if r and r.get("subject")] == [
        "/ws/bad\udcffname",
        "/ws/bad\udcfename",
    ]
    assert verify(read_lines(path)).problem is None


def test_a_full_disk_fails_closed_and_every_later_record_is_refused() -> None:
    log = AuditLog(Path("/dev/full"), "att")
    with pytest.raises(AuditUnavailable, match="cannot be written"):
        log.record("attempt-start")
    assert log.broken is not None and log.records == []
    with pytest.raises(AuditUnavailable):
        log.record("read", verdict="allow")
    log.close()


def test_an_unknown_durability_is_refused_naming_the_choices(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"'sometimes'.*batch or always"):
        AuditLog(tmp_path / "a.jsonl", "att", durability="sometimes")  # type: ignore[arg-type]


async def test_concurrent_decisions_share_one_fsync_when_durability_is_always(
    tmp_path: Path,
) -> None:
    log = AuditLog(tmp_path / "a.jsonl", "att", durability="always")
    log.record("attempt-start")
    done: list[int] = []

    async def decide(n: int) -> None:
        record = log.record("read", request=n, verdict="allow")
        await log.durable(record)
        done.append(n)

    async with trio.open_nursery() as nursery:
        for n in range(16):
            nursery.start_soon(decide, n)
    assert sorted(done) == list(range(16))
    assert 1 <= log.fsyncs < 16  # group commit: fewer fsyncs than records
    assert log._synced == log._written == 17
    log.close()


async def test_one_decision_waits_for_its_own_fsync_when_durability_is_always(
    tmp_path: Path,
) -> None:
    log = AuditLog(tmp_path / "a.jsonl", "att", durability="always")
    record = log.record("attempt-start")
    assert log.fsyncs == 0
    await log.durable(record)
    assert log.fsyncs == 1 and log._synced == 1
    log.close()


async def test_batch_mode_fsyncs_at_most_every_50_ms_and_only_when_dirty(
    tmp_path: Path, mock_clock: trio.testing.MockClock
) -> None:
    log = AuditLog(tmp_path / "a.jsonl", "att", durability="batch")

    async def after(seconds: float) -> None:
        """Let virtual time pass, then wait for any fsync that started to finish."""
        done = log._sync_done
        mock_clock.jump(seconds)
        await trio.testing.wait_all_tasks_blocked()
        if log._sync_running:
            await done.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(log.run_batch_sync)
        await trio.testing.wait_all_tasks_blocked()
        for n in range(10):
            await log.durable(log.record("read", request=n, verdict="allow"))  # no wait
        await after(0.049)
        assert log.fsyncs == 0  # not before 50 ms
        await after(0.002)
        assert (log.fsyncs, log._synced) == (1, 10)  # one fsync for the ten
        await after(0.05)
        await after(0.05)
        assert log.fsyncs == 1  # nothing new, no fsync
        log.record("read", request=11, verdict="allow")
        await after(0.05)
        assert (log.fsyncs, log._synced) == (2, 11)
        nursery.cancel_scope.cancel()
    log.close()


def test_reopening_a_log_cut_mid_line_starts_the_next_record_on_a_new_line(
    tmp_path: Path,
) -> None:
    path = tmp_path / "a.jsonl"
    first = AuditLog(path, "att-1")
    first.record("attempt-start")
    first.record("read", verdict="allow")
    first.close()
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 40])  # the crash cut the last write
    second = AuditLog(path, "att-2")
    second.record("attempt-start")
    second.record("attempt-end", status="completed")
    second.close()
    result = verify(read_lines(path))
    assert result.problem is None
    assert result.incomplete == (2,)
    assert result.unfinished == ("att-1",)
    text = path.read_text(encoding="utf-8").split("\n")
    assert [json.loads(x)["attempt"] for x in text[2:] if x] == ["att-2", "att-2"]


def test_the_log_file_is_private_to_its_owner(tmp_path: Path) -> None:
    path = tmp_path / "a.jsonl"
    AuditLog(path, "att").close()
    assert os.stat(path).st_mode & 0o077 == 0


def test_a_log_with_a_file_keeps_no_records_in_memory_and_reads_them_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "shared.jsonl"
    earlier = AuditLog(path, "att-0")  # another attempt's records before ours
    earlier.record("read", request=1, verdict="allow")
    earlier.close()
    log = AuditLog(path, "att-1")
    for n in range(1, 501):
        log.record("read", request=n, subject={"path": f"/ws/{n}"}, verdict="allow")
    assert log._lines == []  # nothing held per record: read back when asked
    records = log.records
    assert [r["request"] for r in records] == list(range(1, 501))
    assert {r["attempt"] for r in records} == {"att-1"}
    log.record("read", request=501, verdict="deny")
    assert log.records[-1]["request"] == 501 and len(log.records) == 501
    assert log.tallier.tally().refused == 1
    log.close()
    assert len(log.records) == 501  # still readable once closed
    assert len(lines_of(path)) == 502
