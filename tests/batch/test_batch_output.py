"""The output folder's commit point: what counts as finished, after any crash."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import trio
from conftest import git

from governor.batch.clone import changes, clone
from governor.batch.output import Output, OutputBusy, OutputUnsafe, read_outcomes
from governor.batch.work import JobResult


def result(job: str, status: str = "completed") -> JobResult:
    return JobResult(
        job, {"status": status}, b"patch of " + job.encode(), b"log of " + job.encode()
    )


def test_a_job_is_finished_only_with_its_line_and_both_files(tmp_path: Path) -> None:
    with Output(tmp_path) as out:
        out.write(result("a"))
        out.write(result("b"))
        out.write(result("c"))
    (tmp_path / "b" / "changes.patch").unlink()  # its files gone: not finished
    (tmp_path / "d").mkdir()  # files renamed into place, then a crash before its line
    (tmp_path / "d" / "audit.jsonl").write_bytes(b"")
    (tmp_path / "d" / "changes.patch").write_bytes(b"")
    (tmp_path / "e").mkdir()
    (tmp_path / "e" / ".tmp-audit.jsonl").write_bytes(b"half")  # a crash while writing
    with (tmp_path / "outcomes.jsonl").open("ab") as f:
        f.write(json.dumps({"job": "a", "status": "failed"}).encode() + b"\n")  # a second line
        f.write(b'{"job": "e", "stat')  # a line cut by a crash
    assert sorted(read_outcomes(tmp_path)) == ["a", "c"]
    with Output(tmp_path) as out:
        assert sorted(out.finished) == ["a", "c"]
        assert out.finished["a"]["status"] == "completed"  # the first line of an id counts
        assert not (tmp_path / "e" / ".tmp-audit.jsonl").exists()
        out.write(result("b"))
        out.write(result("d"))
    lines = [json.loads(x) for x in (tmp_path / "outcomes.jsonl").read_text().splitlines()]
    assert [x["job"] for x in lines] == ["a", "c", "b", "d"]  # each id once
    assert (tmp_path / "b" / "changes.patch").read_bytes() == b"patch of b"


def test_a_link_planted_in_the_output_is_refused_and_nothing_is_written_through_it(
    tmp_path: Path,
) -> None:
    out_dir, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    out_dir.mkdir()
    elsewhere.mkdir()
    (elsewhere / "audit.jsonl").write_bytes(b"a person's file")
    (out_dir / "j1").symlink_to(elsewhere)
    with pytest.raises(OutputUnsafe, match=r"holds links a batch never makes \(j1\)"):
        Output(out_dir).open()
    assert (elsewhere / "audit.jsonl").read_bytes() == b"a person's file"
    # a link made after the folder was opened, and a temporary file planted as a link
    (out_dir / "j1").unlink()
    with Output(out_dir) as out:
        (out_dir / "j1").symlink_to(elsewhere)
        with pytest.raises(OutputUnsafe, match="j1 is not a folder a batch made"):
            out.write(result("j1"))
        (out_dir / "j2").mkdir()
        (out_dir / "j2" / ".tmp-audit.jsonl").symlink_to(elsewhere / "audit.jsonl")
        out.write(result("j2"))  # the neighbour: a real folder is written, the link replaced
    assert (elsewhere / "audit.jsonl").read_bytes() == b"a person's file"
    assert (out_dir / "j2" / "audit.jsonl").read_bytes() == b"log of j2"
    assert not (out_dir / "j2" / "audit.jsonl").is_symlink()


def test_a_second_batch_on_the_same_output_is_refused(tmp_path: Path) -> None:
    with Output(tmp_path), pytest.raises(OutputBusy, match="another governor batch"):
        Output(tmp_path).open()


def test_the_patch_holds_binary_and_new_files_and_applies_at_the_ref(
    tmp_path: Path, repo: Path
) -> None:
    blob = bytes(range(256)) * 4

    async def main() -> bytes:
        ws = await clone(str(repo), "first", tmp_path / "ws")
        (ws.path / "README.md").write_text("# changed\n")
        (ws.path / "data.bin").write_bytes(blob)
        (ws.path / "new" / "deep").mkdir(parents=True)
        (ws.path / "new" / "deep" / "file.txt").write_text("new\n")
        (ws.path / ".gitignore").write_text("ignored.log\n")
        (ws.path / "ignored.log").write_text("not in the patch\n")
        git(ws.path, "commit", "-qam", "the agent committed")  # committed changes count too
        (ws.path / "README.md").write_text("# changed again\n")
        return await changes(ws)

    patch = trio.run(main)
    assert b"GIT binary patch" in patch and b"b/ignored.log" not in patch
    check = tmp_path / "check"
    git(tmp_path, "clone", "-q", str(repo), str(check))
    git(check, "checkout", "-q", "first")
    subprocess.run(["git", "apply", "--index", "-"], cwd=check, input=patch, check=True)
    assert (check / "data.bin").read_bytes() == blob
    assert (check / "README.md").read_text() == "# changed again\n"
    assert (check / "new" / "deep" / "file.txt").read_text() == "new\n"
