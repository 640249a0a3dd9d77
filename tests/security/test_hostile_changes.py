"""A change with no record: the agent edits a file and puts back what the
snapshot used to compare (its size and mtime), or swaps the file for another.

Each attack runs in the real sandbox as root and as the unprivileged user, by a
bwrap of its own and by a session (the ``box`` fixture); the host takes the
snapshots the attempt takes, before and after. Then a whole attempt: the agent's
own tool does it, and the outcome counts it unasked and the log records it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from escape_harness import Box

from governor.attempt.lifecycle import run_attempt
from governor.audit.reading import decision_records
from governor.confine.workspace import diff, snapshot
from governor.ending.outcome import Outcome

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "audit"))
from audit_helpers import scripted_spec

SAME_SIZE_EDIT_TIME_PUT_BACK = (
    "cp -p README.md /tmp/ref && printf HELLO > README.md && touch -r /tmp/ref README.md"
)
SWAPPED_BY_RENAME = (
    "cp -p README.md /tmp/ref && printf HELLO > x && touch -r /tmp/ref x && mv x README.md"
)


def changed(box: Box, command: str) -> list[tuple[str, str]]:
    """What the attempt's snapshots see of ``command``; the attack checked to be
    real: size and mtime are what they were."""
    readme = box.ws / "README.md"
    before = snapshot([str(box.ws)])
    outcome = box.run(command)
    assert outcome.error is None and outcome.exit_code == 0, outcome
    after = snapshot([str(box.ws)], before=before)
    old, new = before.files[str(readme)], after.files[str(readme)]
    assert (old.size, old.mtime_ns) == (new.size, new.mtime_ns) and readme.read_text() == "HELLO"
    return [(c.path, c.how) for c in diff(before, after)]


def test_a_same_size_edit_with_its_mtime_put_back_is_seen(box: Box) -> None:
    assert changed(box, SAME_SIZE_EDIT_TIME_PUT_BACK) == [(str(box.ws / "README.md"), "changed")]


def test_a_file_swapped_by_a_rename_with_its_size_and_mtime_is_seen(box: Box) -> None:
    assert changed(box, SWAPPED_BY_RENAME) == [(str(box.ws / "README.md"), "changed")]


def test_a_command_that_only_reads_shows_no_change(box: Box) -> None:
    before = snapshot([str(box.ws)])
    outcome = box.run("cat README.md; ls -la; git status --porcelain")
    assert "hello" in outcome.text
    assert diff(before, snapshot([str(box.ws)], before=before)) == []


def unasked(outcome: Outcome) -> list[object]:
    """The subjects of the attempt's unasked records, read from its log."""
    assert outcome.log is not None
    records = decision_records(outcome.log, outcome.run_id)
    return [r["subject"] for r in records if r["kind"] == "unasked"]


async def test_an_attempt_records_the_edit_with_its_mtime_put_back_as_unasked(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "README.md").write_text("hello")
    (ws / "other.md").write_text("untouched")
    edit = SAME_SIZE_EDIT_TIME_PUT_BACK.replace("/tmp/ref", "ref")  # the agent's /tmp: its own
    steps = [{"shell": f"cd {{cwd}} && {edit} && rm ref"}, {"say": "Done."}]
    outcome = await run_attempt(scripted_spec(tmp_path, steps, sandbox_agent=True))
    assert outcome.status == "completed", outcome.reason
    assert (ws / "README.md").read_text() == "HELLO"
    assert outcome.acp is not None and outcome.acp.tally.unasked == 1
    assert outcome.acp.unasked_paths == [str(ws / "README.md")]
    assert unasked(outcome) == [{"path": str(ws / "README.md"), "change": "changed"}]


async def test_an_attempt_that_touches_nothing_records_no_change(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "README.md").write_text("hello")
    steps = [{"shell": "cat {cwd}/README.md"}, {"say": "Done."}]
    outcome = await run_attempt(scripted_spec(tmp_path, steps, sandbox_agent=True))
    assert outcome.status == "completed", outcome.reason
    assert outcome.acp is not None and outcome.acp.tally.unasked == 0
    assert unasked(outcome) == []
