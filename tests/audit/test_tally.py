"""The tally's counting rules (the seed `external.rs`), on records written by hand:
one count per request, a deny anywhere refuses the request, a person's decision
is a wait, reported and unasked records are counted apart."""

from __future__ import annotations

from typing import Any

from governor.audit.tally import Tally, tally


def rec(kind: str, request: Any, verdict: str, by: str = "policy") -> dict[str, Any]:
    return {"kind": kind, "request": request, "verdict": verdict, "by": by}


def test_each_rule_counts_as_the_seed_says() -> None:
    records = [
        {"kind": "attempt-start"},
        rec("mode", None, "allow"),  # not something the agent asked
        # request 1: `cat a; rm -rf b`, one part allowed, one refused -> one refused ask
        rec("permission", 1, "allow"),
        rec("permission", 1, "deny"),
        # request 2: a read, allowed
        rec("read", 2, "allow"),
        # request 3: a write a person allowed -> waited and allowed
        rec("write", 3, "allow", by="person"),
        # request 4: a command paused for approval -> waited, not allowed
        rec("terminal", 4, "approval"),
        # request 5: a person refused -> waited and refused
        rec("permission", 5, "deny", by="person"),
        # request 6 allowed by a grant: not a wait
        rec("permission", 6, "allow", by="grant"),
        # the same number as a string is another request
        rec("read", "6", "deny"),
        # no request id: each record is its own ask
        rec("read", None, "allow"),
        rec("read", None, "allow"),
        {"kind": "reported", "verdict": "reported", "by": "agent"},
        {"kind": "permission", "verdict": "reported", "by": "agent"},
        {"kind": "unasked", "verdict": "reported", "by": "sandbox"},
        {"kind": "attempt-end", "status": "completed"},
    ]
    assert tally(records) == Tally(asked=9, allowed=5, waited=3, refused=3, reported=2, unasked=1)


def test_an_empty_log_counts_nothing() -> None:
    assert tally([]) == Tally()


def test_ids_of_other_json_types_group_their_records() -> None:
    records = [
        rec("permission", {"b": 1, "a": 2}, "allow"),
        rec("permission", {"a": 2, "b": 1}, "deny"),
        rec("permission", [1, 2], "allow"),
        rec("permission", 1.0, "allow"),
        rec("permission", 1, "allow"),
        rec("permission", True, "allow"),
    ]
    assert tally(records) == Tally(asked=5, allowed=4, refused=1)


def test_a_long_attempt_is_counted_as_a_short_one_is_with_bounded_memory() -> None:
    from governor.audit.tally import OPEN_GROUPS, Tallier

    n = 20 * OPEN_GROUPS
    records = []
    for i in range(n):
        # compound permissions (two records, one request), denies and person
        # decisions, as the gate writes them: a request's records together
        records.append(rec("permission", i, "deny" if i % 7 == 0 else "allow"))
        if i % 3 == 0:
            records.append(rec("permission", i, "allow", by="person" if i % 5 == 0 else "policy"))
    counted = Tallier()
    for r in records:
        counted.add(r["kind"], r["verdict"], r["by"], r["request"])
        assert len(counted._groups) <= OPEN_GROUPS
    refused = len(range(0, n, 7))
    assert counted.tally() == Tally(
        asked=n, allowed=n - refused, waited=len(range(0, n, 15)), refused=refused
    )


def test_a_failure_is_counted_failed_not_refused_and_an_old_logs_record_without_the_field_as_before() -> None:
    dns = {**rec("network", 1, "deny", by="protocol"), "rule": "network.dns"}
    records = [
        {**dns, "failed": "dns"},  # a name that does not resolve
        # allowed, then the host refused the connection: one request, failed
        rec("network", 2, "allow", by="rule"),
        {**rec("network", 2, "deny", by="protocol"), "failed": "refused"},
        # asked after the turn was over
        {**rec("network", 3, "deny", by="cancelled"), "failed": "cancelled"},
        # the policy's refusal
        rec("network", 4, "deny", by="rule"),
        # failures counted, not written: two requests
        {"kind": "repeated", "of": "network", "requests": 2, "count": 2, "failed": "dns"},
        # refusals counted, not written: three requests
        {"kind": "repeated", "of": "network", "requests": 3, "count": 3},
    ]
    assert tally(records) == Tally(asked=9, allowed=0, refused=4, failed=5)
    # An older log's DNS failure carries no `failed`: it reads as it always did.
    assert tally([dns]) == Tally(asked=1, refused=1)
    # A request refused by a rule in one part and failed in another is refused.
    both = [rec("permission", 5, "deny"), {**rec("permission", 5, "deny", by="cancelled"), "failed": "cancelled"}]
    assert tally(both) == Tally(asked=1, refused=1)
