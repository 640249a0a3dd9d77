"""What a person sees of an attempt: one line per event as it happens, then a summary.

Lines, not animation: they read the same in a terminal, a CI log or a pipe.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from governor.outcome import Outcome

_MARK = {"allow": "allowed", "deny": "REFUSED", "approval": "WAITING for approval"}


class Progress:
    """An ``on_event`` callback that prints the plan, each decision and the time."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started = time.monotonic()
        self.plan: list[tuple[str, str]] = []

    def _line(self, text: str) -> None:
        elapsed = time.monotonic() - self.started
        print(f"[{elapsed:6.1f}s] {text}", file=self.out, flush=True)

    def __call__(self, kind: str, info: dict[str, Any]) -> None:
        if kind == "spawned":
            self._line(f"started {info.get('agent')}")
        elif kind == "plan":
            plan = [
                (e.get("content", ""), e.get("status", "pending")) for e in info.get("entries", [])
            ]
            if plan != self.plan:
                self.plan = plan
                marks = {"completed": "x", "in_progress": ">", "pending": " "}
                self._line("plan: " + "  ".join(f"[{marks.get(s, ' ')}] {c}" for c, s in plan))
        elif kind in ("permission", "read", "write", "terminal"):
            subject = info.get("subject", {})
            what = subject.get("command") or subject.get("path") or subject.get("title") or ""
            verdict = _MARK.get(info.get("verdict", ""), info.get("verdict", ""))
            by = info.get("by")
            extra = f" ({info.get('reason')})" if info.get("verdict") != "allow" else ""
            self._line(f"{kind:10} {what}: {verdict} by {by}{extra}")
        elif kind == "waiting":
            self._line(f"asking: {info.get('kind')} {info.get('subject')}")
        elif kind == "unasked":
            subject = info.get("subject", {})
            self._line(f"UNASKED    {subject.get('title') or subject.get('path')}")


def summary(outcome: Outcome) -> str:
    """The summary table of an outcome."""
    rows: list[tuple[str, str]] = [("status", outcome.status)]
    if outcome.reason:
        rows.append(("reason", outcome.reason))
    if outcome.summary:
        rows.append(("summary", outcome.summary))
    acp = outcome.acp
    if acp is not None:
        t = acp.tally
        rows.append(("agent", f"{acp.agent} (preset {acp.preset})"))
        if acp.mode:
            rows.append(
                (
                    "mode",
                    f"{acp.mode.get('id')} ({'asks' if acp.mode.get('asks') else 'decides alone' if acp.mode.get('asks') is False else 'unknown'})",
                )
            )
        rows.append(
            (
                "tally",
                f"asked {t.asked}, allowed {t.allowed}, waited {t.waited}, refused {t.refused}, reported {t.reported}, unasked {t.unasked}",
            )
        )
        if acp.unasked_paths:
            rows.append(("unasked", ", ".join(acp.unasked_paths)))
        for notice in acp.notices:
            rows.append(("notice", notice))
    if outcome.pending:
        rows.append(("pending", str(outcome.pending.get("subject"))))
    if outcome.log:
        rows.append(("log", outcome.log))
    if outcome.log_head:
        signed = f", signed by key {outcome.log_key}" if outcome.log_key else ""
        rows.append(("head", f"{outcome.log_head} ({outcome.log_records} records{signed})"))
    rows.append(("duration", f"{outcome.duration_s:.1f} s"))
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"{k:>{width}}  {v}" for k, v in rows)
