"""`governor.boundary.person_files`: the files the person names are written and
read through no link an agent could have left, and every refusal names the
path. Real files and links; `governor.audit.log.AuditLog` opens ``--log`` so."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from governor.audit.log import AuditLog, AuditUnavailable
from governor.boundary.person_files import (
    NamedFileRefused,
    link_out,
    open_output,
    read_input_text,
    write_output,
)

PRECIOUS = "the person's own file\n"


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    found = tmp_path / "victim.rc"
    found.write_text(PRECIOUS)
    return found


def test_an_output_in_place_of_a_link_is_refused_naming_it_and_its_target_untouched(
    tmp_path: Path, victim: Path
) -> None:
    link = tmp_path / "audit.html"
    link.symlink_to(victim)
    for append in (False, True):
        with pytest.raises(NamedFileRefused) as refused:
            open_output(link, append=append)
        assert refused.value.filename == str(link)
        assert f"it is a symbolic link (to {victim})" in str(refused.value.strerror)
    dangling = tmp_path / "events.jsonl"
    dangling.symlink_to(tmp_path / "made-elsewhere")
    with pytest.raises(NamedFileRefused, match="symbolic link"):
        write_output(dangling, "x")
    assert victim.read_text() == PRECIOUS and not (tmp_path / "made-elsewhere").exists()


def test_an_output_that_is_not_a_regular_file_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "events.jsonl"
    os.mkfifo(fifo)
    with pytest.raises(NamedFileRefused, match="not a regular file"):
        open_output(fifo)


def test_a_new_output_is_made_an_existing_one_replaced_or_appended_to(tmp_path: Path) -> None:
    """The neighbour: what the person names as a file is written as before."""
    page = tmp_path / "page.html"
    write_output(page, "one")
    write_output(page, "two")
    assert page.read_text() == "two"
    fd, made = open_output(page, append=True)
    os.write(fd, b"+")
    os.close(fd)
    assert page.read_text() == "two+" and not made


def test_a_link_an_attempt_could_have_made_leads_nowhere_out_of_its_folder(
    tmp_path: Path, victim: Path
) -> None:
    """In a folder an attempt could write, a link is followed only to inside that
    folder; elsewhere a link is the person's and is followed."""
    ws = tmp_path / "ws"
    (ws / "prompts").mkdir(parents=True)
    (ws / "prompts" / "task.md").symlink_to(victim)
    (ws / "notes.md").write_text("in the workspace\n")
    (ws / "inside.md").symlink_to(ws / "notes.md")
    (ws / "out").symlink_to(tmp_path)
    written = (str(ws),)
    with pytest.raises(NamedFileRefused) as refused:
        read_input_text(ws / "prompts" / "task.md", written=written)
    said = str(refused.value.strerror)
    assert f"{ws / 'prompts' / 'task.md'} is a link to {victim}, outside {ws}" in said, said
    assert read_input_text(ws / "inside.md", written=written) == "in the workspace\n"
    assert link_out(ws / "out" / "victim.rc", written) is not None
    with pytest.raises(NamedFileRefused, match="a folder an attempt could write"):
        write_output(ws / "out" / "victim.rc", "x", written=written)
    assert victim.read_text() == PRECIOUS
    mine = tmp_path / "dotfiles-link.toml"
    mine.symlink_to(victim)  # the person's own link, in no attempt's folder
    assert read_input_text(mine, written=written) == PRECIOUS


def test_the_audit_log_is_never_opened_through_a_link(tmp_path: Path, victim: Path) -> None:
    log = tmp_path / "next.jsonl"
    log.symlink_to(victim)
    with pytest.raises(AuditUnavailable, match=f"cannot open the audit log {log}: it is a symbolic"):
        AuditLog(log, "a-1")
    assert victim.read_text() == PRECIOUS


def test_a_dot_dot_after_a_link_goes_up_from_where_the_link_led_as_the_kernel_does(
    tmp_path: Path, victim: Path
) -> None:
    """``ws/deep/../victim.rc`` with ``deep`` a link out of the workspace names
    the file beside the link's target, not ``ws/victim.rc``: refused."""
    ws, far = tmp_path / "ws", tmp_path / "far" / "away"
    ws.mkdir()
    far.mkdir(parents=True)
    (far.parent / "victim.rc").write_text(PRECIOUS)
    (ws / "deep").symlink_to(far)
    sneaky = f"{ws}/deep/../victim.rc"
    assert os.path.realpath(sneaky) == str(far.parent / "victim.rc")
    with pytest.raises(NamedFileRefused, match="a folder an attempt could write"):
        write_output(sneaky, "x", written=(str(ws),))
    with pytest.raises(NamedFileRefused, match="a folder an attempt could write"):
        read_input_text(sneaky, written=(str(ws),))
    assert (far.parent / "victim.rc").read_text() == PRECIOUS
