"""`governor audit LOG|DIR`: one row per attempt, refusals, one attempt's story, JSON;
its tally is the outcome's; `replay` lists what another policy would change."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
import trio
from audit_helpers import demo_spec, log_lines, records

from governor import cli
from governor.attempt.lifecycle import run_attempt
from governor.audit.log import AuditLog
from governor.audit.verify import UNFINISHED
from governor.ending.outcome import Outcome
from governor.gate.approver import Ask
from governor.policies.capability import Capability
from governor.policies.policy import parse_policy


def audit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["audit", *args])
    out = capsys.readouterr()
    return code, out.out, out.err


async def varied_attempts(tmp_path: Path) -> tuple[Path, list[Outcome]]:
    """Attempts that exercise every count: refusals and an unasked change (the demo
    as is), a person's approvals (waited), read-only (refused writes), and an ask
    that pauses the attempt (needs_approval)."""
    log = tmp_path / "audit.jsonl"

    def approve(ask: Ask) -> bool:
        return True

    asking = parse_policy('capability = "edit-workspace"\n[ask]\ntools = ["edit"]', "ask.toml")
    pausing = parse_policy(
        'capability = "edit-workspace"\non_ask = "pause"\n[ask]\ntools = ["execute"]', "pause.toml"
    )
    specs: list[dict[str, Any]] = [
        {},
        {"policy": asking, "approver": approve},
        {"policy": None, "capability": Capability.READ_ONLY},
        {"policy": pausing},
    ]
    outcomes = []
    for n, kw in enumerate(specs):
        ws = tmp_path / f"ws{n}"
        ws.mkdir()
        outcomes.append(await run_attempt(demo_spec(tmp_path, log, workspace=ws, **kw)))
    return log, outcomes


@pytest.fixture(scope="module")
def varied(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict[str, Any]]]:
    tmp = tmp_path_factory.mktemp("varied")
    log, outcomes = trio.run(varied_attempts, tmp)
    return log, [o.to_json() for o in outcomes]


def test_the_tally_of_audit_json_equals_the_outcome_tally_for_each_attempt(
    varied: tuple[Path, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    log, outcomes = varied
    code, out, _ = audit(capsys, str(log), "--json")  # as the issue writes it
    rows = {r["attempt"]: r for r in json.loads(out)["attempts"]}
    assert code == 0 and len(rows) == len(outcomes) == 4
    for outcome in outcomes:
        row = rows[outcome["run_id"]]
        assert row["tally"] == outcome["acp"]["tally"], outcome["run_id"]
        assert row["status"] == outcome["status"]
    statuses = [o["status"] for o in outcomes]
    assert statuses == ["completed", "completed", "completed", "needs_approval"]
    # Every count is exercised by at least one attempt.
    for count in ("asked", "allowed", "waited", "refused", "unasked"):
        assert any(o["acp"]["tally"][count] for o in outcomes), count


def test_the_report_has_one_row_per_attempt_with_agent_status_and_counts(
    varied: tuple[Path, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    log, outcomes = varied
    code, out, _ = audit(capsys, str(log))
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split() == [
        "ATTEMPT",
        "AGENT",
        "STATUS",
        "ASKED",
        "ALLOWED",
        "WAITED",
        "REFUSED",
        "FAILED",
        "REPORTED",
        "UNASKED",
        "DURATION",
        "WORKSPACE",
    ]
    # newest first, each with the end of its workspace's path
    for outcome, line in zip(reversed(outcomes), lines[1:5], strict=True):
        t = outcome["acp"]["tally"]
        cells = line.split()
        assert cells[:3] == [outcome["run_id"], "demo", outcome["status"]]
        assert outcome["workspace"].endswith(cells[-1].removeprefix("..."))
        assert cells[3:10] == [
            str(t[c])
            for c in ("asked", "allowed", "waited", "refused", "failed", "reported", "unasked")
        ]
    assert "4 attempt(s) in 1 log(s)" in out


def test_refused_lists_every_refused_action_with_its_rule_and_reason(
    varied: tuple[Path, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    log, _ = varied
    code, out, _ = audit(capsys, "--refused", "--json", str(log))
    refused = json.loads(out)["refusals"]
    denied = [r for r in records(log) if r.get("verdict") == "deny"]
    assert code == 0 and len(refused) == len(denied) >= 3
    # a failure (an ask answered after the turn was cancelled) is listed with its word
    failed = [x for x in refused if x.get("failed")]
    denied = [r for r in denied if not r.get("failed")]
    assert len(refused) == len(denied) + len(failed)
    hook = [x for x in refused if ".git/hooks/pre-commit" in x["subject"]]
    assert hook and any(x["rule"] == "protected: .git/**" for x in hook)
    assert all(x["rule"] and x["reason"] for x in refused)
    code, text, _ = audit(capsys, "--refused", str(log))
    assert text.count("refused by") == len(denied)
    assert "[protected: .git/**]" in text
    # the failures apart from the refusals, each group once with its word
    assert text.count("    failed (") == len({(x["attempt"], x["subject"], x["reason"]) for x in failed})


def test_one_attempt_tells_its_whole_story_in_order(
    varied: tuple[Path, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    log, outcomes = varied
    attempt = outcomes[1]["run_id"]
    code, out, _ = audit(capsys, "--attempt", attempt, str(log))
    mine = [r for r in records(log) if r["attempt"] == attempt]
    story = out.splitlines()[1:]
    assert code == 0 and len(story) == len(mine)
    assert [int(line.split()[1].lstrip("#")) for line in story] == [r["seq"] for r in mine]
    assert "started demo" in story[0] and "ended completed" in story[-1]
    assert "allow by person" in out  # the approver's decisions are there
    code, out, _ = audit(capsys, "--attempt", attempt[:-3], "--json", str(log))
    assert json.loads(out) == {"status": "ok", "attempt": attempt, "records": mine}  # a prefix names it too


def test_an_unknown_or_ambiguous_attempt_id_exits_1_saying_so(
    varied: tuple[Path, list[dict[str, Any]]], capsys: pytest.CaptureFixture[str]
) -> None:
    log, _ = varied
    code, _, err = audit(capsys, "--attempt", "nobody", str(log))
    assert code == 1 and "no attempt 'nobody'" in err
    code, _, err = audit(capsys, "--attempt", "demo-", str(log))
    assert code == 1 and "names 4 attempts" in err


def test_an_attempt_the_governor_did_not_finish_shows_as_unfinished(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = AuditLog(tmp_path / "cut.jsonl", "cut-1")
    log.record("attempt-start", agent="demo", preset="demo", workspace="/ws")
    log.record("read", request=1, subject={"path": "/ws/a"}, verdict="allow", by="policy")
    log.close()
    code, out, _ = audit(capsys, str(tmp_path))
    assert code == 0
    assert out.splitlines()[1].split()[:4] == ["cut-1", "demo", "unfinished", "1"]
    assert f"1 unfinished ({UNFINISHED})" in out
    code, out, _ = audit(capsys, "--attempt", "cut-1", str(tmp_path))
    assert out.splitlines()[-1].strip() == UNFINISHED


def test_a_directory_of_two_thousand_logs_is_read_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    def write(n: int) -> None:
        log = AuditLog(tmp_path / f"d{n // 100}" / f"a{n}.jsonl", f"a{n:04d}")
        log.record("attempt-start", agent="demo", workspace=f"/ws/{n}")
        log.record("permission", request=1, subject={"title": "x"}, verdict="allow")
        log.record("write", request=2, subject={"path": f"/ws/{n}/f"}, verdict="deny")
        log.record("attempt-end", status="completed", duration_s=0.5)
        log.close()  # an fsync each: threads let them overlap

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(write, range(2000)))
    code, out, err = audit(capsys, "--json", str(tmp_path))
    rows = json.loads(out)["attempts"]
    assert code == 0 and err == ""
    assert len(rows) == 2000
    assert {r["status"] for r in rows} == {"completed"}
    assert sum(r["tally"]["refused"] for r in rows) == 2000
    assert sum(r["tally"]["asked"] for r in rows) == 4000


def test_a_log_that_does_not_verify_is_named_in_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = AuditLog(tmp_path / "a.jsonl", "a")
    log.record("attempt-start", agent="demo")
    log.record("attempt-end", status="completed")
    log.close()
    lines = log_lines(tmp_path / "a.jsonl")
    (tmp_path / "a.jsonl").write_text(lines[1] + "\n")
    code, _, err = audit(capsys, str(tmp_path / "a.jsonl"))
    assert code == 0 and "a.jsonl does not verify: line 1" in err


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([], "no logs in"),  # none named, and the state folder has none yet
        (["--refused", "--attempt", "x", "LOG"], "choose one"),
        (["nowhere.jsonl"], "nowhere.jsonl: no such file or directory"),
        (["replay", "LOG", "--policy", "missing.toml"], "missing.toml: cannot read the policy"),
    ],
)
def test_usage_errors_exit_2_naming_the_culprit(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    words: str,
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "no-state"))
    (tmp_path / "LOG").write_text("")
    code, _, err = audit(
        capsys, *[str(tmp_path / a) if a in ("LOG", "missing.toml") else a for a in args]
    )
    assert code == 2 and words in err


def test_replay_without_a_policy_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        cli.main(["audit", "replay", "x.jsonl"])
    assert e.value.code == 2
    assert "--policy" in capsys.readouterr().err


# -- replay ---------------------------------------------------------------------------


def test_replay_lists_what_a_stricter_policy_would_refuse(
    varied: tuple[Path, list[dict[str, Any]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, outcomes = varied
    strict = tmp_path / "strict.toml"
    strict.write_text(
        'capability = "edit-workspace"\n[deny]\nwrites = ["*.py"]\ncommands = ["python3 *"]\n'
    )
    first = outcomes[0]["run_id"]
    code, out, _ = audit(capsys, "replay", str(log), "--policy", str(strict), "--attempt", first)
    assert code == 0
    assert "permission: Write hello.py" in out
    assert "write: " in out and "hello.py\n      allowed -> refused [deny: *.py]" in out
    assert "permission: python3 hello.py\n      allowed -> refused [deny: python3 *]" in out
    assert "terminal: python3 hello.py\n      allowed -> refused [deny: python3 *]" in out
    assert "4 allowed -> refused" in out
    assert ".git/hooks" not in out  # refused before, refused still: no change


def test_replay_lists_what_a_wider_policy_would_allow(
    varied: tuple[Path, list[dict[str, Any]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, outcomes = varied
    read_only = outcomes[2]["run_id"]
    wider = tmp_path / "wider.toml"
    wider.write_text('capability = "edit-workspace"\n')
    code, out, _ = audit(
        capsys, "replay", str(log), "--policy", str(wider), "--attempt", read_only, "--json"
    )
    [result] = json.loads(out)["replayed"]
    changes = {(c["kind"], c["change"]) for c in result["changes"]}
    assert code == 0
    assert ("permission", "refused -> allowed") in changes
    assert all(c["change"] == "refused -> allowed" for c in result["changes"])
    assert not any(".git/hooks" in c["subject"] for c in result["changes"])  # still protected
    assert result["skipped"] == []


def test_replay_under_the_same_policy_changes_nothing(
    varied: tuple[Path, list[dict[str, Any]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, outcomes = varied
    same = tmp_path / "same.toml"
    same.write_text('capability = "edit-workspace"\n')
    code, out, _ = audit(capsys, "replay", str(log), "--policy", str(same), "--json")
    results = {r["attempt"]: r for r in json.loads(out)["replayed"]}
    assert code == 0
    first = results[outcomes[0]["run_id"]]
    assert first["actions"] >= 6 and first["changes"] == []


def test_an_ask_under_the_new_policy_counts_as_refused_when_nobody_could_answer(
    varied: tuple[Path, list[dict[str, Any]]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log, outcomes = varied
    asking = tmp_path / "asking.toml"
    asking.write_text('capability = "edit-workspace"\n[ask]\ncommands = ["python3 *"]\n')
    unattended, with_person = outcomes[0]["run_id"], outcomes[1]["run_id"]
    code, out, _ = audit(capsys, "replay", str(log), "--policy", str(asking), "--json")
    results = {r["attempt"]: r for r in json.loads(out)["replayed"]}
    assert code == 0
    assert {c["change"] for c in results[unattended]["changes"]} == {"allowed -> refused"}
    assert {c["change"] for c in results[with_person]["changes"]} == {"allowed -> asked"}


def test_an_old_log_with_its_old_by_words_is_still_replayed_and_tallied(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # before `by` said what decided, a log said policy, ceiling and sandbox
    log = tmp_path / "old.jsonl"
    old = AuditLog(log, "old-1")
    old.record("attempt-start", workspace="/ws", roots=["/ws"])
    old.record("write", request=1, subject={"path": "/ws/a.py"}, verdict="allow", by="policy",
               rule="capability: edit-workspace", reason="r")  # fmt: skip
    old.record("write", request=2, subject={"path": "/ws/.git/hooks/x"}, verdict="deny",
               by="ceiling", rule="protected: .git/**", reason="r")  # fmt: skip
    old.record("permission", request=3, subject={"title": "Edit b", "tool_kind": "edit",
               "paths": ["/ws/b.py"], "input": {}}, verdict="allow", by="person",
               rule="ask: tool edit", reason="r")  # fmt: skip
    old.record("unasked", subject={"path": "/ws/c.py", "change": "created"}, verdict="reported",
               by="sandbox", reason="r")  # fmt: skip
    old.record("attempt-end", status="completed")
    old.close()
    strict = tmp_path / "strict.toml"
    strict.write_text('capability = "read-only"\n')
    code, out, _ = audit(capsys, "replay", str(log), "--policy", str(strict), "--json")
    [result] = json.loads(out)["replayed"]
    assert code == 0 and result["skipped"] == []
    # the writes allowed by the capability and by a person are refused at read-only;
    # the protected path was refused and still is
    assert [(c["seq"], c["change"]) for c in result["changes"]] == [
        (2, "allowed -> refused"), (4, "allowed -> refused")
    ]
    code, out, _ = audit(capsys, str(log), "--json")
    [row] = json.loads(out)["attempts"]
    assert row["tally"] == {"asked": 3, "allowed": 2, "waited": 1, "refused": 1, "failed": 0,
                            "reported": 0, "unasked": 1}  # fmt: skip
