"""The audit log's bounds: a record's size, repeated refusals, the attempt's
log limit; each bound loses nothing the agent was answered (the chain
verifies, the tally read back counts every decision)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from governor.audit.log import RECORD_BYTES, AuditLog, AuditUnavailable
from governor.audit.page_source import AttemptPage
from governor.audit.repeated_refusals import BURST
from governor.audit.tally import tally
from governor.audit.verify import read_lines, verify


def refusal(request: int, origin: str = "command", rule: str = "network.default") -> dict[str, Any]:
    return {
        "request": request,
        "subject": {"host": "refused.example", "port": 443, "origin": origin},
        "verdict": "deny",
        "by": "policy",
        "rule": rule,
        "reason": "refused.example:443 is not in the allowed hosts",
    }


def started(path: Path, **kw: Any) -> AuditLog:
    log = AuditLog(path, "a1", **kw)
    log.record("attempt-start", agent="x")
    return log


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def verified(path: Path) -> bool:
    """The chain verifies and every attempt has its end."""
    check = verify(read_lines(path))
    return check.problem is None and not check.unfinished


def test_a_record_over_its_bound_keeps_the_start_of_each_long_value_and_says_how_long(
    tmp_path: Path,
) -> None:
    log = started(tmp_path / "a.jsonl")
    log.record("permission", request=1, subject={"title": "t" * 500_000, "paths": ["p"] * 10_000},
               verdict="allow", by="policy", rule="r", reason="ok")  # fmt: skip
    log.record("permission", request=2, subject={"title": "short"}, verdict="allow", by="policy",
               rule="r", reason="ok")  # fmt: skip
    log.record("attempt-end", status="completed")
    log.close()
    long, short = lines(tmp_path / "a.jsonl")[1:3]
    assert len(json.dumps(long)) < RECORD_BYTES
    assert long["subject"]["title"].endswith("(cut: 500000 characters)")
    assert long["subject"]["paths"][-1] == "... (cut: 10000 items)"
    assert short["subject"]["title"] == "short"  # a record within the bound is as given
    assert verified(tmp_path / "a.jsonl")


def test_refusals_past_the_rate_are_counted_in_one_record_and_the_tally_counts_each(
    tmp_path: Path,
) -> None:
    log = started(tmp_path / "a.jsonl")
    for n in range(1, 1001):
        probe = {"reason": "secret.internal:443 is not in the allowed hosts"} if n == 500 else {}
        log.append("network", {**refusal(n), **probe})
    for n in range(1001, 1011):
        log.append("network", refusal(n, origin="agent"))  # another origin: its own rate
    log.append("network", {**refusal(2000), "verdict": "allow", "rule": "network.allow"})
    log.record("attempt-end", status="failed")
    log.close()
    written = lines(tmp_path / "a.jsonl")
    full = [r for r in written if r["kind"] == "network" and r["verdict"] == "deny"]
    (counted,) = [r for r in written if r["kind"] == "repeated"]
    assert len(full) == BURST + 10
    assert counted["count"] == counted["requests"] == 1000 - BURST
    assert counted["reason"].startswith(f"{1000 - BURST} more refusals like seq {BURST + 1} ")
    assert "secret.internal:443 is not in the allowed hosts" in counted["samples"]  # not hidden
    assert [r["kind"] for r in written][-1] == "attempt-end"
    assert any(r["verdict"] == "allow" for r in written if r["kind"] == "network")
    assert tally(written).refused == 1010 == log.tallier.tally().refused
    assert tally(written).asked == 1011
    assert verified(tmp_path / "a.jsonl")


def test_failures_past_the_rate_are_counted_apart_from_refusals_of_the_same_rule_and_tallied_failed(
    tmp_path: Path,
) -> None:
    log = started(tmp_path / "a.jsonl")
    for n in range(1, 201):  # a name that does not resolve, asked 200 times
        dns = {**refusal(n, rule="network.dns"), "by": "protocol", "failed": "dns"}
        log.append("network", {**dns, "reason": "nothing.invalid:443: the host does not resolve"})
    for n in range(201, 301):  # the same rule's word, refused by the policy: counted apart
        log.append("network", refusal(n, rule="network.dns"))
    log.record("attempt-end", status="failed")
    log.close()
    written = lines(tmp_path / "a.jsonl")
    counted = {r.get("failed"): r for r in written if r["kind"] == "repeated"}
    assert set(counted) == {"dns", None}
    assert counted["dns"]["requests"] == 200 - BURST
    assert counted["dns"]["reason"].startswith(f"{200 - BURST} more failures like seq ")
    assert counted[None]["requests"] == 100 - BURST
    assert (tally(written).failed, tally(written).refused) == (200, 100)
    assert log.tallier.tally() == tally(written)
    assert verified(tmp_path / "a.jsonl")
    # The page: the 200 failures are one row, counted ones included; the refusals another.
    page = AttemptPage("a1", "a.jsonl")
    for r in written:
        page.add(r)
    assert (page.failed_total, page.refused_total) == (200, 100)
    assert [n for _, n in page.failure_groups.values()] == [200]
    assert [n for _, n in page.refusal_groups.values()] == [100]


def test_a_refusal_after_its_window_is_written_in_full_after_the_count_before_it(
    tmp_path: Path,
) -> None:
    now = [0.0]
    log = started(tmp_path / "a.jsonl")
    log.thinning._clock = lambda: now[0]  # the window's clock, not the records' time
    for n in range(BURST + 5):
        log.append("network", refusal(n))
    now[0] = 5.0
    log.append("network", refusal(999))
    log.close()
    kinds = [(r["kind"], r.get("request")) for r in lines(tmp_path / "a.jsonl")]
    assert kinds[-2:] == [("repeated", None), ("network", 999)]


def test_past_the_log_limit_one_record_says_so_and_every_later_refusal_is_counted(
    tmp_path: Path,
) -> None:
    log = started(tmp_path / "a.jsonl", limit=1 << 20)
    allowed = refused = 0
    for n in range(1, 200):
        fields = {**refusal(n), "verdict": "allow", "subject": {"title": "x" * 20_000}}
        try:
            log.append("permission", fields)
            allowed += 1
        except AuditUnavailable as e:
            assert "[limits] log = 1M" in str(e)
            refused += 1
    log.record("attempt-end", status="failed")
    log.close()
    written = lines(tmp_path / "a.jsonl")
    assert allowed and refused == 199 - allowed
    assert (tmp_path / "a.jsonl").stat().st_size < (1 << 20) + 4096
    assert [r["kind"] for r in written][-3:] == ["limit", "repeated", "attempt-end"]
    assert tally(written).allowed == allowed and tally(written).refused == refused
    assert verified(tmp_path / "a.jsonl")


def test_a_person_s_refusal_is_always_written_in_full(tmp_path: Path) -> None:
    log = started(tmp_path / "a.jsonl")
    for n in range(BURST * 3):
        log.append("network", {**refusal(n), "by": "person"})
    log.close()
    assert sum(r["kind"] == "network" for r in lines(tmp_path / "a.jsonl")) == BURST * 3
