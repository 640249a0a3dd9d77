"""The result records (`governor.audit.effects`): a command's output tail and a
governed write's diff are masked before they are cut and bounded whatever the
agent printed or wrote; the log writes them as any record (chained, masked
again) and its readers accept their shape, and refuse a crafted one."""

from __future__ import annotations

import json
import re
from pathlib import Path

from governor import cli
from governor.audit.effects import (
    DIFF_CHARS,
    DIFF_LINES,
    TAIL_CHARS,
    TAIL_LINES,
    TAIL_WINDOW,
    diff_fields,
    exit_fields,
    tail,
)
from governor.audit.log import AuditLog
from governor.audit.record_shape import malformed
from governor.boundary.secrets import Masker
from governor.gate.file_access import NOT_KEPT, write_text

SECRET = "s3cr3t-value-of-the-operator"


def test_a_tail_keeps_the_newest_lines_masked_and_says_what_came_before() -> None:
    output = "\n".join(f"line {i} {SECRET}" for i in range(10_000))
    kept = tail(output, Masker([SECRET]))
    assert kept.startswith(f"[{10_000 - TAIL_LINES:,} earlier line(s) not kept]\n")
    assert kept.endswith("line 9999 [secret]") and SECRET not in kept
    assert len(kept.splitlines()) == TAIL_LINES + 1


def test_a_tail_of_one_enormous_line_keeps_its_newest_characters() -> None:
    kept = tail("x" * 1_000_000 + "END", Masker())
    assert len(kept) == TAIL_CHARS and kept.endswith("END")


def test_a_secret_across_the_tails_cut_is_masked_before_it_is_cut() -> None:
    # the secret straddles the character cut: masked first, no prefix survives
    output = SECRET + "y" * (TAIL_CHARS - 5)
    kept = tail(output, Masker([SECRET]))
    assert SECRET[-5:] not in kept and SECRET not in kept


def test_a_diff_is_masked_and_cut_to_its_lines_saying_how_many_more() -> None:
    before = "".join(f"same {i}\n" for i in range(1000))
    after = "".join(f"new {i} {SECRET}\n" if i % 10 == 0 else f"same {i}\n" for i in range(1000))
    fields = diff_fields("/ws/f.txt", 7, before, after, Masker([SECRET]))
    diff = fields["diff"]
    assert fields["decision"] == 7 and fields["subject"] == {"path": "/ws/f.txt"}
    assert SECRET not in diff and "+new 0 [secret]" in diff
    assert diff.startswith("--- a/f.txt\n+++ b/f.txt\n")
    kept, note = diff.rsplit("\n", 1)
    assert len(kept.splitlines()) == DIFF_LINES
    assert re.fullmatch(r"\.\.\. \([\d,]+ more line\(s\) of diff not kept\)", note), note
    assert len(diff) <= DIFF_CHARS + 200


def test_a_new_file_is_diffed_against_nothing() -> None:
    diff = diff_fields("/ws/new.py", 1, None, "a\nb\n", Masker())["diff"]
    assert diff.splitlines() == ["--- /dev/null", "+++ b/new.py", "@@ -0,0 +1,2 @@", "+a", "+b"]


def test_a_write_returns_what_the_file_held_before_and_follows_no_link(tmp_path: Path) -> None:
    target = tmp_path / "f.txt"
    assert write_text(str(target), "one\n", before=1000) is None
    assert write_text(str(target), "two\n", before=1000) == "one\n"
    assert write_text(str(target), "three\n", before=2) == NOT_KEPT  # over the bound
    assert write_text(str(target), "four\n") is None  # not asked for
    (tmp_path / "bin.dat").write_bytes(b"\xff\xfe")
    assert write_text(str(tmp_path / "bin.dat"), "x", before=1000) == NOT_KEPT


def test_the_log_writes_result_records_that_verify_and_readers_refuse_a_crafted_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path, "a1", masker=Masker([SECRET]))
    log.record("attempt-start", agent="demo")
    decision = log.record("terminal", subject={"command": "make"}, verdict="allow", by="policy")
    fields = exit_fields(
        {"command": "make"}, decision["seq"], 2, None, f"boom {SECRET}", log.masker
    )
    log.append("exit", fields)
    log.record("attempt-end", status="completed")
    log.close()
    lines = path.read_text().splitlines()
    written = json.loads(lines[2])
    assert written["kind"] == "exit" and written["exit_code"] == 2
    assert written["tail"] == "boom [secret]" and written["decision"] == decision["seq"]
    assert malformed(written) is None
    assert cli.main(["audit", "verify", str(path)]) == 0
    assert log.tallier.tally().asked == 1  # a result is no request
    assert (
        malformed({**written, "exit_code": "2"}) == "its 'exit_code' is a string, not an exit code"
    )
    assert malformed({**written, "tail": ["x"]}) == "its 'tail' is a list, not a string"
    assert (
        malformed({"kind": "attempt-end", "usage": [1]}) == "its 'usage' is a list, not an object"
    )
    assert (
        malformed({"kind": "attempt-end", "notices": "x"})
        == "its 'notices' is a string, not a list"
    )


KEY_BODY = ["MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC" + f"{i:013d}" for i in range(60)]
KEY = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(KEY_BODY) + "\n-----END PRIVATE KEY-----"


def test_a_private_key_whose_first_line_is_above_the_kept_lines_is_still_masked() -> None:
    kept = tail(f"cat id\n{KEY}\ndone\n", Masker())
    assert not any(line in kept for line in KEY_BODY), kept
    assert kept.endswith("[secret]\ndone")


def test_a_private_key_that_began_before_the_masked_window_is_masked_to_its_end() -> None:
    body = [f"{KEY_BODY[0]}{i:06d}" for i in range(6000)]
    assert sum(map(len, body)) > TAIL_WINDOW  # its BEGIN is outside the window
    output = (
        "-----BEGIN PRIVATE KEY-----\n" + "\n".join(body) + "\n-----END PRIVATE KEY-----\nafter\n"
    )
    kept = tail(output, Masker())
    assert not any(line in kept for line in body[-50:]), kept
    assert kept.endswith("[secret]\nafter")
