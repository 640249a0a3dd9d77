"""`governor audit verify`: an intact log exits 0; an edited, deleted, inserted or
reordered line exits 1 naming the line; a crash is told apart from tampering."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from audit_helpers import demo_attempts, log_lines

from governor import cli
from governor.audit.log import chain_hash, sealed
from governor.audit.verify import INCOMPLETE, UNFINISHED, read_lines, verify

Lines = list[str]


def rewrite(line: str, **changes: object) -> str:
    """The line with fields changed, written as the governor writes it, its hash kept."""
    record = json.loads(line)
    record.update(changes)
    return sealed(record).decode().rstrip("\n")


def reformatted(line: str) -> str:
    """The same record, every value unchanged, in another JSON formatting."""
    return json.dumps(json.loads(line), indent=None, separators=(", ", ": "))


def rehashed(line: str, **changes: object) -> str:
    record = json.loads(line)
    record.update(changes)
    record["hash"] = chain_hash(record)
    return sealed(record).decode().rstrip("\n")


def forged_after(lines: Lines, index: int) -> str:
    """A well-formed record that claims to follow line ``index`` (0-based)."""
    before = json.loads(lines[index])
    record = {
        "seq": before["seq"] + 1,
        "time": before["time"],
        "attempt": before["attempt"],
        "kind": "write",
        "subject": {"path": "/etc/passwd"},
        "verdict": "allow",
        "by": "policy",
        "prev": before["hash"],
    }
    record["hash"] = chain_hash(record)
    return sealed(record).decode().rstrip("\n")


# The log: two demo attempts of the same records each (start, permission, write,
# its diff, read, permission, terminal, its exit, refused permission, unasked,
# end), one after the other.
CASES: list[tuple[str, Callable[[Lines], Lines], int, str]] = [
    (
        "a refusal edited to look allowed",
        lambda ls: [*ls[:8], rewrite(ls[8], verdict="allow"), *ls[9:]],
        9,
        "line 9 was edited",
    ),
    (
        "a line re-formatted, no value changed",
        lambda ls: [*ls[:6], reformatted(ls[6]), *ls[7:]],
        7,
        "line 7 was edited",
    ),
    (
        "a refusal edited and its line re-hashed",
        lambda ls: [*ls[:8], rehashed(ls[8], verdict="allow"), *ls[9:]],
        10,
        "does not link to record 9 of attempt",
    ),
    ("a line deleted", lambda ls: [*ls[:3], *ls[4:]], 4, "record 4 of attempt"),
    (
        "the first line deleted",
        lambda ls: ls[1:],
        1,
        "does not start here (its records before 2 are missing)",
    ),
    (
        "a copy of an earlier line inserted",
        lambda ls: [*ls[:5], ls[2], *ls[5:]],
        6,
        "record 3 of attempt",
    ),
    (
        "a forged record inserted",
        lambda ls: [*ls[:5], forged_after(ls, 4), *ls[5:]],
        7,
        "is also on line 6 (one of the two was inserted)",
    ),
    ("two lines swapped", lambda ls: [*ls[:3], ls[4], ls[3], *ls[5:]], 4, "record 4 of attempt"),
    (
        "a line moved into the other attempt",
        lambda ls: [*ls[:2], *ls[3:10], ls[2], *ls[10:]],
        3,
        "record 3 of attempt",
    ),
    ("a line of text inserted", lambda ls: [*ls[:4], "hello", *ls[4:]], 5, "not a JSON record"),
    ("an empty line inserted", lambda ls: [*ls[:4], "", *ls[4:]], 5, "line 5 is empty"),
    (
        "a JSON line that is no record inserted",
        lambda ls: [*ls[:4], '{"kind": "write"}', *ls[4:]],
        5,
        "not an audit record",
    ),
]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """Two real demo attempts' log, made once for the module."""
    log, _ = trio.run(demo_attempts, tmp_path_factory.mktemp("demo"), 2)
    lines = log_lines(log)
    assert len(lines) >= 14 and json.loads(lines[len(lines) // 2])["kind"] == "attempt-start"
    assert verify(read_lines(log)).problem is None
    return log.read_bytes()


@pytest.fixture
def demo_log(tmp_path: Path, pristine: bytes) -> Path:
    log = tmp_path / "audit.jsonl"
    log.write_bytes(pristine)
    return log


def audit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(["audit", *args])
    out = capsys.readouterr()
    return code, out.out + out.err


def test_an_intact_log_verifies_with_exit_0(
    demo_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = audit(capsys, "verify", str(demo_log))
    assert code == 0, out
    assert f"intact, not anchored ({len(log_lines(demo_log))} line(s), 2 attempt(s))" in out
    assert UNFINISHED not in out


@pytest.mark.parametrize(("name", "tamper", "line", "words"), CASES, ids=[c[0] for c in CASES])
def test_verify_exits_1_naming_the_first_line_that_was_tampered_with(
    demo_log: Path,
    capsys: pytest.CaptureFixture[str],
    name: str,
    tamper: Callable[[Lines], Lines],
    line: int,
    words: str,
) -> None:
    demo_log.write_text("\n".join(tamper(log_lines(demo_log))) + "\n")
    result = verify(read_lines(demo_log))
    assert result.problem is not None, name
    assert result.problem.line == line, result.problem
    assert words in result.problem.what
    code, out = audit(capsys, "verify", str(demo_log))
    assert code == 1
    assert f"TAMPERED: line {line}" in out and words in out


def test_a_last_line_cut_by_a_crash_is_reported_as_incomplete_not_as_tampering(
    demo_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = log_lines(demo_log)
    data = demo_log.read_bytes()
    demo_log.write_bytes(data[: len(data) - 60])  # the end record's write, cut short
    code, out = audit(capsys, "verify", str(demo_log))
    assert code == 0, out
    assert f"line {len(lines)}: {INCOMPLETE}" in out
    assert f"attempt {json.loads(lines[-2])['attempt']}: {UNFINISHED}" in out


def test_zeros_left_after_the_last_write_are_an_incomplete_line(
    demo_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with demo_log.open("ab") as f:
        f.write(b"\x00" * 300)
    code, out = audit(capsys, "verify", str(demo_log))
    assert (code, f"line {len(log_lines(demo_log))}: {INCOMPLETE}" in out) == (0, True), out


def test_a_cut_line_inside_the_log_passes_only_when_a_new_attempt_follows_it(
    demo_log: Path,
) -> None:
    lines = log_lines(demo_log)
    second = len(lines) // 2  # where the second attempt starts
    restarted = [*lines[:5], lines[5][:50], *lines[second:]]  # crash in line 6, then a new run
    demo_log.write_text("\n".join(restarted) + "\n")
    result = verify(read_lines(demo_log))
    assert result.problem is None and result.incomplete == (6,)
    assert result.unfinished == (json.loads(lines[0])["attempt"],)
    continued = [*lines[:5], lines[5][:50], *lines[6:]]  # the same attempt goes on: an edit
    demo_log.write_text("\n".join(continued) + "\n")
    problem = verify(read_lines(demo_log)).problem
    assert problem is not None and problem.line == 6


def test_a_deleted_end_record_leaves_the_attempt_reported_unfinished(
    demo_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = log_lines(demo_log)
    demo_log.write_text("\n".join(lines[:-1]) + "\n")
    code, out = audit(capsys, "verify", str(demo_log))
    assert code == 0
    assert f"attempt {json.loads(lines[-1])['attempt']}: {UNFINISHED}" in out


def test_verify_as_json_names_the_problem_for_programs(
    demo_log: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = log_lines(demo_log)
    demo_log.write_text("\n".join([*lines[:3], *lines[4:]]) + "\n")
    code, out = audit(capsys, "verify", "--json", str(demo_log))
    report = json.loads(out)
    assert code == 1
    assert report["status"] == "failed"
    assert report["logs"][0]["intact"] is False and report["logs"][0]["problem"]["line"] == 4


def test_the_governor_command_exits_1_on_an_edited_log(demo_log: Path) -> None:
    lines = log_lines(demo_log)
    demo_log.write_text("\n".join([*lines[:9], rewrite(lines[9], verdict="deny"), *lines[10:]]))
    done = subprocess.run(
        [sys.executable, "-m", "governor.cli", "audit", "verify", str(demo_log)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "line 10 was edited" in done.stdout, done


def test_a_missing_log_is_a_usage_error_naming_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = audit(capsys, "verify", str(tmp_path / "nope.jsonl"))
    assert code == 2 and "nope.jsonl: no such file or directory" in out
