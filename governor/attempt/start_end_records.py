"""The fields of the two records that frame an attempt in its audit log:
attempt-start (what was asked, of whom, under what) and attempt-end (how it
went). `governor.attempt.lifecycle` writes them; the readers (`governor audit`, the
report page) show them.

Rules of this file: it is pure (values in, a dict out); every text an agent or
operator wrote is masked with the attempt's `governor.boundary.secrets.Masker` *before*
it is cut to its bound, so that a secret straddling the cut cannot leave a
prefix the masker no longer recognises. The log masks each record again as it
writes it; masking here is what makes the cut safe, not a second opinion.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any, Final

from governor.boundary.secrets import Masker
from governor.ending.outcome import Outcome
from governor.job.spec import Prepared
from governor.policies.canonical import digest

PROMPT_CHARS: Final = 4000
"""What the attempt-start record keeps of the prompt: a task is a few lines; a
prompt file of megabytes would otherwise be one line of the log per attempt."""
SUMMARY_CHARS: Final = 2000
"""What the attempt-end record keeps of the agent's final message (its summary)."""


def bounded(text: str | None, most: int, masker: Masker) -> str | None:
    """``text`` masked, then cut after ``most`` characters saying its full length
    (the way the log cuts a long field); None stays None."""
    if text is None:
        return None
    masked = masker.text(text)
    if len(masked) <= most:
        return masked
    return f"{masked[:most]}... (cut: {len(masked)} characters)"


def start_fields(p: Prepared, frozen_at_start: Any) -> dict[str, Any]:
    """The attempt-start record's fields (None: left out)."""
    policy = p.policy
    return {
        "agent": p.executor.id,
        "preset": p.executor.preset.id if p.executor.preset else None,
        "argv": p.shown_argv,
        "capability": str(policy.capability),
        "workspace": policy.workspace,
        "roots": list(policy.roots),
        "policy": digest(policy),
        "policy_source": policy.source,
        "ceiling": digest(p.ceiling),
        "ceiling_source": p.ceiling.source,
        "protected": list(p.ceiling.protected) or None,
        "sandboxed_agent": p.sandboxed_agent,
        "agent_hosts": [h.text for h in policy.network_rules.agent] or None,
        "approvals": p.approver.name,
        "trace_id": p.spec.trace_id,
        "frozen": frozen_at_start,
        "prompt": bounded(p.spec.prompt, PROMPT_CHARS, p.masker),
        "try": dict(p.spec.tried) if p.spec.tried else None,
    }


def end_fields(outcome: Outcome, frozen_at_end: Any, masker: Masker) -> dict[str, Any]:
    """The attempt-end record's fields (None: left out); ``summary`` is the
    agent's final message when it reported one (a blocked or failed attempt's
    message is its reason)."""
    return {
        "status": outcome.status,
        "reason": outcome.reason,
        "tally": asdict(outcome.acp.tally) if outcome.acp else None,
        "duration_s": outcome.duration_s,
        "findings": [f.to_json() for f in outcome.findings] or None,
        "frozen": frozen_at_end,
        "files_changed": outcome.files_changed or None,
        "home_changed": outcome.home_changed or None,
        "verdict": outcome.verdict,
        "tests": outcome.tests,
        "harness": outcome.harness,
        "summary": bounded(outcome.summary or None, SUMMARY_CHARS, masker),
        "usage": usage_fields(outcome.usage),
        "notices": [
            bounded(n, NOTICE_CHARS, masker) for n in outcome.acp.notices[:NOTICES]
        ] if outcome.acp and outcome.acp.notices else None,
    }


NOTICES: Final = 50
"""Notices the attempt-end record keeps (the outcome has them all)."""
NOTICE_CHARS: Final = 1000
"""What the attempt-end record keeps of one notice."""
USAGE_NUMBERS: Final = (
    "tokens", "tool_calls", "inputTokens", "outputTokens", "totalTokens",
    "cachedReadTokens", "cachedWriteTokens", "thoughtTokens", "used", "size",
)  # fmt: skip
"""The usage counts the attempt-end record keeps: the budget's and the agent's."""


def usage_fields(usage: dict[str, Any] | None) -> dict[str, Any] | None:
    """The outcome's ``usage`` as the attempt-end record keeps it (the page's
    tokens and cost): its counts, whether the agent reported any, and its cost
    (amount and a currency cut to 12 characters); None without usage."""
    if not usage:
        return None
    kept: dict[str, Any] = {
        k: usage[k] for k in USAGE_NUMBERS if type(usage.get(k)) in (int, float)
    }
    if isinstance(usage.get("reported"), bool):
        kept["reported"] = usage["reported"]
    cost = usage.get("cost")
    if isinstance(cost, dict) and type(cost.get("amount")) in (int, float):
        kept["cost"] = {"amount": cost["amount"], "currency": str(cost.get("currency"))[:12]}
    if usage.get("strength") in ("observed", "reported", "none"):
        kept["strength"] = usage["strength"]
    observed = usage.get("observed")
    if isinstance(observed, dict):  # the model calls seen on the wire (`governor.gate.model_calls`)
        kept["observed"] = {k: v for k, v in observed.items() if type(v) is int}
    return kept or None
