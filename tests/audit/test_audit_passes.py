"""The audit views read a log in passes (`governor.audit.read_in_passes`): the check
first, then the records one at a time. What they keep is bounded (the table's
rows shown, replay's changes listed, each saying how many more), a later pass
reads only what the check read, and a batch's job names cannot lead a reader
out of the batch's folder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from log_fuzz import sealed
from reader_runs import run

import governor.audit.replay as replay_module
import governor.cli.audit as audit_cli
from governor.audit.read_in_passes import check_log, records
from governor.audit.reading import LogMalformed, LogUnreadable


def chained(*attempts: list[dict[str, Any]]) -> bytes:
    """The lines of attempts, one after another, each chained and sealed."""
    out = b""
    for fields in attempts:
        prev = None
        for seq, f in enumerate(fields, 1):
            line = sealed({"seq": seq, "time": 1.7e9 + seq, **f, "prev": prev})
            prev = json.loads(line)["hash"]
            out += line + b"\n"
    return out


def attempt(name: str, *decisions: dict[str, Any], end: bool = True) -> list[dict[str, Any]]:
    start = {"attempt": name, "kind": "attempt-start", "agent": "demo", "workspace": "/ws",
             "roots": ["/ws"]}  # fmt: skip
    finish = [{"attempt": name, "kind": "attempt-end", "status": "completed"}] if end else []
    return [start, *({"attempt": name, **d} for d in decisions), *finish]


def command(request: Any, verdict: str = "allow", text: str = "pytest -q") -> dict[str, Any]:
    return {"kind": "terminal", "request": request, "subject": {"command": text},
            "verdict": verdict, "by": "policy", "rule": "r", "reason": "why"}  # fmt: skip


def test_the_table_shows_its_newest_rows_and_says_how_many_older_while_the_totals_count_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "audit.jsonl"
    log.write_bytes(chained(*(attempt(f"a{k}", command(1, "deny")) for k in range(5))))
    monkeypatch.setattr(audit_cli, "TABLE_ROWS", 2)
    code, out, _ = run([str(log)])
    assert code == 0
    assert [line.split()[0] for line in out.splitlines()[1:3]] == ["a4", "a3"]
    assert "a2" not in out and "... and 3 older attempt(s)" in out
    assert "5 attempt(s) in 1 log(s); 5 asked, 0 allowed, 0 waited, 5 refused" in out
    monkeypatch.setattr(audit_cli, "TABLE_ROWS", 5)  # within the bound: every row, no note
    code, out, _ = run([str(log)])
    assert "a0" in out and "older attempt" not in out
    code, out, _ = run(["--json", str(log)])
    assert [r["attempt"] for r in json.loads(out)["attempts"]] == [f"a{k}" for k in reversed(range(5))]


def test_replay_lists_its_first_changes_and_counts_every_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "audit.jsonl"
    log.write_bytes(chained(attempt("a1", *(command(n) for n in range(1, 8)))))
    policy = tmp_path / "policy.toml"
    policy.write_text('capability = "edit-workspace"\n[deny]\ncommands = ["pytest *"]\n', encoding="utf-8")
    monkeypatch.setattr(replay_module, "CHANGES_LISTED", 3)
    code, out, _ = run(["replay", str(log), "--policy", str(policy)])
    assert code == 0
    assert [line.split()[1] for line in out.splitlines() if line.startswith("  line ")] == ["2", "3", "4"]
    assert "... and 4 more change(s)" in out and "7 allowed -> refused" in out
    code, out, _ = run(["replay", str(log), "--policy", str(policy), "--json"])
    (result,) = json.loads(out)["replayed"]
    assert result["changed"] == 7 and len(result["changes"]) == 3 and result["actions"] == 7
    monkeypatch.setattr(replay_module, "CHANGES_LISTED", 1000)
    code, out, _ = run(["replay", str(log), "--policy", str(policy)])
    assert "more change" not in out and out.count("  line ") == 7


def test_replay_groups_a_request_whose_id_is_an_object_instead_of_crashing(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    log.write_bytes(chained(attempt("a1", command({"id": [1]}), command({"id": [1]}), command(2))))
    policy = tmp_path / "policy.toml"
    policy.write_text('capability = "edit-workspace"\n[deny]\ncommands = ["pytest *"]\n', encoding="utf-8")
    code, out, err = run(["replay", str(log), "--policy", str(policy), "--json"])
    assert code == 0, err
    (result,) = json.loads(out)["replayed"]
    assert result["actions"] == 2 and result["changed"] == 2  # the object id's two records: one request


def test_each_attempt_is_replayed_when_it_ends_and_one_without_an_end_after_the_last_line(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.jsonl"
    log.write_bytes(chained(attempt("a1", command(1)), attempt("a2", command(1), end=False)))
    policy = tmp_path / "policy.toml"
    policy.write_text('capability = "edit-workspace"\n[deny]\ncommands = ["pytest *"]\n', encoding="utf-8")
    code, out, _ = run(["replay", str(log), "--policy", str(policy), "--json"])
    assert code == 0
    assert [(r["attempt"], r["changed"]) for r in json.loads(out)["replayed"]] == [("a1", 1), ("a2", 1)]


def test_a_later_pass_reads_only_what_the_check_read(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    log.write_bytes(chained(attempt("a1", command(1))))
    checked = check_log(log)
    with log.open("ab") as f:  # a line of the wrong shape, appended after the check
        f.write(sealed({"seq": 9, "time": 1.7e9, "attempt": "a1", "kind": {"x": 1}}) + b"\n")
    assert [n for n, _ in records(checked)] == [1, 2, 3]
    with pytest.raises(LogMalformed, match=r"line 4 .* its 'kind' is an object"):
        check_log(log)  # checked anew, the line is refused


def test_a_log_replaced_between_the_passes_is_an_error_not_shown_as_checked(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    log.write_bytes(chained(attempt("a1", command(1))))
    checked = check_log(log)
    other = tmp_path / "other.jsonl"
    other.write_bytes(chained(attempt("evil", command(1))))
    other.replace(log)
    with pytest.raises(LogUnreadable, match="replaced while it was read"):
        list(records(checked))
    assert [r["attempt"] for _, r in records(check_log(log))] == ["evil"] * 3


def test_a_story_and_the_views_stream_what_the_whole_read_showed(tmp_path: Path) -> None:
    log = tmp_path / "audit.jsonl"
    log.write_bytes(chained(attempt("a1", command(1, "deny"), command(2)), attempt("b2", command(1))))
    code, out, _ = run(["--attempt", "a1", "--json", str(log)])
    story = json.loads(out)
    assert code == 0 and (story["status"], story["attempt"]) == ("ok", "a1")
    assert [r["seq"] for r in story["records"]] == [1, 2, 3, 4]
    code, out, _ = run(["--attempt", "a1", str(log)])
    assert out.count("\n") == 5 and "ended completed" in out and "stopped before" not in out
    code, out, _ = run(["--refused", "--json", str(log)])
    assert [(r["attempt"], r["seq"]) for r in json.loads(out)["refusals"]] == [("a1", 2)]
    code, out, _ = run(["--refused", str(log)])
    assert out.endswith("\n1 refused in 2 attempt(s)\n")
    code, out, _ = run(["--network", "--json", str(log)])
    assert json.loads(out) == {"status": "ok", "connections": []}


def batch(root: Path, jobs: dict[str, str]) -> None:
    """A batch's output whose outcomes name ``jobs`` (name -> status); each job
    named plainly gets its folder."""
    root.mkdir(parents=True, exist_ok=True)
    lines = []
    for job, status in jobs.items():
        head = None
        if "/" not in job and job not in (".", ".."):
            (root / job).mkdir(exist_ok=True)
            log = chained(attempt(f"run-{job}", command(1)))
            (root / job / "audit.jsonl").write_bytes(log)
            (root / job / "changes.patch").write_bytes(b"")
            head = json.loads(log.splitlines()[-1])["hash"]
        lines.append(json.dumps({"job": job, "status": status, "log_head": head}))
    (root / "outcomes.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def outside(tmp_path: Path) -> Path:
    """A folder outside the batch's, with a log and a patch of its own."""
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "audit.jsonl").write_bytes(chained(attempt("SECRET-ATTEMPT", command(1))))
    (secret / "changes.patch").write_bytes(b"diff --git a/x b/x\n")
    return secret


def test_a_batch_job_named_as_a_path_out_of_the_folder_is_refused_naming_its_line(
    tmp_path: Path,
) -> None:
    outside(tmp_path)
    for job in ("../secret", str(tmp_path / "secret")):
        root = tmp_path / f"out{len(job)}"
        batch(root, {"j1": "completed", job: "completed"})
        code, out, err = run([str(root)])
        assert code == 1, job
        assert "SECRET-ATTEMPT" not in out + err
        assert f"{root / 'outcomes.jsonl'}: line 2 is not a record the governor writes: job " in err
        assert "a job's name is one folder name inside the batch's folder" in err
        code, out, _ = run(["--json", str(root)])
        assert code == 1 and out == ""
    root = tmp_path / "fine"
    batch(root, {"j1": "completed", "j2": "failed"})  # the neighbour: plain job names are read
    code, out, _ = run(["--json", str(root)])
    assert code == 0 and [(r["job"], r["tally"]["asked"]) for r in json.loads(out)["jobs"]] == [("j1", 1), ("j2", 1)]


def test_a_batch_job_whose_folder_is_a_link_is_refused_naming_its_line(tmp_path: Path) -> None:
    secret = outside(tmp_path)
    root = tmp_path / "out"
    batch(root, {"j1": "completed", "j2": "completed"})
    for name in ("audit.jsonl", "changes.patch"):
        (root / "j2" / name).unlink()
    (root / "j2").rmdir()
    (root / "j2").symlink_to(secret)
    code, out, err = run([str(root)])
    assert code == 1 and "SECRET-ATTEMPT" not in out + err
    assert "line 2 is not a record the governor writes: job 'j2': its folder is a link" in err
    (root / "j2").unlink()
    (root / "j2").mkdir()
    (root / "j2" / "audit.jsonl").symlink_to(secret / "audit.jsonl")
    (root / "j2" / "changes.patch").write_bytes(b"")
    code, out, err = run([str(root)])
    assert code == 1 and "job 'j2': its audit.jsonl is a link" in err


def test_verify_outcomes_refuses_a_job_named_as_a_path_and_checks_a_plain_one(tmp_path: Path) -> None:
    outside(tmp_path)
    root = tmp_path / "out"
    batch(root, {"j1": "completed", "../secret": "completed"})
    code, out, err = run(["verify", "--outcomes", str(root / "outcomes.jsonl")])
    assert code == 2 and "SECRET" not in out
    assert "line 2: job '../secret': a job's name is one folder name inside the batch's folder" in err
    batch(root, {"j1": "completed"})
    code, out, err = run(["verify", "--outcomes", str(root / "outcomes.jsonl")])
    assert code == 0 and f"{root / 'j1' / 'audit.jsonl'}: intact" in out, err
