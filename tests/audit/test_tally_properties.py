"""The tally's words (`governor.audit.tally`) as properties over generated attempts.

Each attempt is made of generated requests put through the real `Gate` -- the
engine's decision in parts, an approver answering once, always, refuse or
pause, grants covering what an "always" allowed -- and of what the agent did on
its own, all written by the real `AuditLog` with a refusal burst small enough
that runs of refusals are counted into ``repeated`` records. An independent
model of each request says what it must count as; the log's own count, the
count read back, the refusal list and the report's timeline must all say the
same.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import tempfile
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governor.audit import page_source, report
from governor.audit.log import AuditLog
from governor.audit.read_in_passes import check_log
from governor.audit.reading import read_log, row
from governor.audit.repeated_refusals import Thinning
from governor.audit.tally import ASKED_KINDS, WORDS, Tally, tally
from governor.cli import audit_views
from governor.gate.approver import Approval, Ask, Callback
from governor.gate.gatekeeper import Gate
from governor.policies import by
from governor.policies.decide import Decision
from governor.policies.policy import parse_policy
from governor.policies.rules import Verdict

POLICY = parse_policy('capability = "edit-workspace"', "job.toml").bind("/ws")
ENGINE_BY = {Verdict.ALLOW: by.CAPABILITY, Verdict.ASK: by.RULE, Verdict.DENY: by.PROTECTED}
KINDS = sorted(ASKED_KINDS - {"elicitation"})  # a form's ask is settled by its own person


@dataclass(frozen=True)
class Request:
    kind: str
    shown: str
    parts: tuple[Verdict, ...]
    answer: Approval


@dataclass(frozen=True)
class Observed:
    kind: str  # reported, changed, unasked (as written now), legacy-unasked (verdict reported)


requests = st.builds(
    Request,
    kind=st.sampled_from(KINDS),
    shown=st.sampled_from(["git push", "rm -rf build", "/ws/a.py", "pypi.org:443"]),
    parts=st.lists(st.sampled_from(list(Verdict)), min_size=1, max_size=3).map(tuple),
    answer=st.sampled_from(["once", "always", "refuse", "pause"]),
)
observed = st.builds(Observed, st.sampled_from(["reported", "changed", "unasked", "legacy-unasked"]))
attempts = st.lists(st.one_of(requests, observed), max_size=30)


def expected(events: list[Request | Observed]) -> tuple[Tally, int]:
    """The tally the definitions give, from a model of each event (not the
    tally's code), and the requests still pending."""
    counts: Counter[str] = Counter()
    grants: set[tuple[str, str]] = set()
    pending = 0
    for e in events:
        if isinstance(e, Observed):
            counts["unasked" if e.kind.endswith("unasked") else "reported"] += 1
            continue
        counts["asked"] += 1
        decided = max(e.parts)
        key = ("command" if e.kind == "terminal" else e.kind, e.shown)
        if decided is Verdict.ALLOW:
            counts["allowed"] += 1
        elif decided is Verdict.DENY:
            counts["refused"] += 1
        elif key in grants:  # an earlier "always": allowed, no wait
            counts["allowed"] += 1
        else:
            counts["waited"] += 1  # put to a person, whatever the answer
            if e.answer in ("once", "always"):
                counts["allowed"] += 1
                if e.answer == "always":
                    grants.add(key)
            elif e.answer == "refuse":
                counts["refused"] += 1
            else:
                pending += 1
    return Tally(**{w: counts[w] for w in WORDS}), pending


def until_paused(events: list[Request | Observed]) -> list[Request | Observed]:
    """An attempt ends at its first pause (the gate then cancels the turn)."""
    grants: set[tuple[str, str]] = set()
    for n, e in enumerate(events):
        if isinstance(e, Request) and max(e.parts) is Verdict.ASK:
            key = ("command" if e.kind == "terminal" else e.kind, e.shown)
            if key in grants:
                continue
            if e.answer == "pause":
                return events[: n + 1]
            if e.answer == "always":
                grants.add(key)
    return events


async def write_attempt(path: Path, events: list[Request | Observed], burst: int) -> Tally:
    """The events through the real gate and log; the log's own count."""
    answer: list[Approval] = ["refuse"]

    def approver(ask: Ask) -> Approval:  # the answer of the request being ruled
        return answer[0]

    audit = AuditLog(path, "attempt-1")
    audit.thinning = Thinning(lambda: 0.0, burst=burst)  # a clock that stands still
    gate = Gate(POLICY, audit, Callback(approver))
    audit.record("attempt-start", workspace="/ws", roots=["/ws"])
    for e in events:
        if isinstance(e, Observed):
            verdict = "reported" if e.kind in ("reported", "changed", "legacy-unasked") else "unasked"
            kind = "unasked" if e.kind == "legacy-unasked" else e.kind
            audit.record(kind, subject={"path": "/ws/x"}, verdict=verdict, by=by.AGENT, reason="r")
            continue
        parts = tuple(  # parts under two rules: refusals of two keys of thinning
            Decision(v, f"{v}: {e.shown} {i % 2}", f"part {v}", ENGINE_BY[v])
            for i, v in enumerate(e.parts)
        )
        worst = max(parts, key=lambda d: d.verdict)  # as the engine combines them
        decision = parts[0] if len(parts) == 1 else Decision(
            worst.verdict, worst.rule, worst.reason, worst.by, parts
        )
        answer[0] = e.answer
        subject = {"command": e.shown} if e.kind == "terminal" else {"title": e.shown}
        await gate.ruled(e.kind, subject, e.shown, decision, {})
    counted = audit.tallier.tally()
    audit.flush(everything=True)
    audit.record("attempt-end", status="completed", tally=asdict(counted))
    audit.close()
    return counted


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def _refused(path: Path) -> list[dict[str, Any]]:
    """`governor audit --refused --json` of the log, as the command streams it."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert audit_views.refusals([check_log(path)], True) == 0
    listed: list[dict[str, Any]] = json.loads(out.getvalue())["refusals"]
    return listed


def _page(path: Path) -> str:
    """The report's page of the log's one attempt, built as `governor audit report` builds it."""
    chooser = page_source.Chooser(None)
    check = page_source.fold_log(path, chooser)
    page, _ = chooser.chosen()
    return report.render(page, check, log_name=path.name)


@given(events=attempts, burst=st.integers(min_value=1, max_value=4))
def test_every_view_of_an_attempt_counts_as_the_words_define(
    events: list[Request | Observed], burst: int
) -> None:
    events = until_paused(events)
    want, pending = expected(events)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "audit.jsonl"
        counted = trio.run(write_attempt, path, events, burst)
        (group,) = read_log(path).attempts
        page = _page(path)
        listed = _refused(path)
    records = group.records

    # the log's count as it wrote, the count read back, and the definitions agree
    assert counted == tally(records) == row(group).tally == want
    # every request is allowed, refused or still pending
    assert want.asked == want.allowed + want.refused + pending
    assert pending <= 1 and want.waited <= want.asked

    # each refusal is in the refusal list, written or counted in a `repeated` record
    refused_requests = {r["request"] for r in records if r.get("verdict") == "deny"}
    counted_apart = sum(r["requests"] for r in records if r.get("kind") == "repeated")
    assert len(refused_requests) + counted_apart == want.refused
    assert {x["seq"] for x in listed} == {r["seq"] for r in records if r.get("verdict") == "deny"}
    assert all(x["by"] in by.DECIDED for x in listed)

    # the report's timeline says what the tally counts
    shown = Counter(re.findall(r'<tr id="r\d+" data-verdict="([^"]*)"', page))
    assert shown["reported"] == want.reported
    assert shown["unasked"] == want.unasked
    assert bool(shown["approval"]) == bool(pending)  # a pending request's parts: one row each


def test_a_person_allowing_once_then_always_counts_as_the_words_say() -> None:
    """The demo's story with a person at the keys: `o` for the write, `a` for the
    command, and the command's own terminal call covered by that "always"."""
    events: list[Request | Observed] = [
        Request("permission", "Write hello.py", (Verdict.ASK,), "once"),
        Request("write", "/ws/hello.py", (Verdict.ALLOW,), "once"),
        Request("read", "/ws/hello.py", (Verdict.ALLOW,), "once"),
        Request("terminal", "python3 hello.py", (Verdict.ASK,), "always"),
        Request("terminal", "python3 hello.py", (Verdict.ASK,), "refuse"),  # granted: not asked
        Request("permission", "Install a hook", (Verdict.ASK, Verdict.DENY), "once"),
        Observed("unasked"),
    ]
    want, _ = expected(events)
    assert want == Tally(asked=6, allowed=5, waited=2, refused=1, reported=0, unasked=1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "audit.jsonl"
        assert trio.run(write_attempt, path, events, 64) == want
        (group,) = read_log(path).attempts
    bys = [(r["request"], r["by"]) for r in group.records if r.get("kind") in ASKED_KINDS]
    assert bys == [(1, "person"), (2, "capability"), (3, "capability"), (4, "person"),
                   (5, "grant"), (6, "protected"), (6, "protected")]  # fmt: skip


def test_an_old_logs_unasked_record_is_unasked_in_the_report_as_in_the_tally(tmp_path: Path) -> None:
    path = tmp_path / "old.jsonl"
    log = AuditLog(path, "old-1")
    log.record("attempt-start", workspace="/ws")
    log.record("unasked", subject={"path": "/ws/x"}, verdict="reported", by="sandbox", reason="r")
    log.close()
    read = read_log(path)
    (group,) = read.attempts
    page = _page(path)
    assert row(group).tally == Tally(unasked=1)
    assert re.findall(r'<tr id="r\d+" data-verdict="([^"]*)"', page) == ["unasked"]
