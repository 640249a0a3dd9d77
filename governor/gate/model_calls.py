"""Every model call seen on the wire: one audit record of kind ``model`` each,
and their sum for the outcome's ``usage``.

The proxy reads each request to a terminated model host and its response
(`governor.sandbox.net.terminate`); here it becomes a record: host, port,
method, path (no query string), the model the response named, the status, the
tokens (input, output, cache read and written), the stop reason, the time to
the response's first byte and the whole call's duration. Never the prompt, the
completion or a key: the proxy never hands them over. A ``model`` record is
evidence, not a decision: the tally does not count it as one.

The sum is the evidence's strength for the outcome: ``observed`` once the
governor saw a call, whatever the agent reports (`observed_usage`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from governor.audit.log import AuditLog, AuditUnavailable
from governor.sandbox.net.model_calls import TOKEN_KINDS
from governor.sandbox.net.terminate import ModelCall


class ModelCalls:
    """The attempt's model calls: recorded as they end, summed."""

    def __init__(
        self,
        audit: AuditLog,
        on_tokens: Callable[[int], None] | None = None,
        on_unread: Callable[[str], None] | None = None,
        emit: Callable[[str, dict[str, Any]], None] | None = None,
    ) -> None:
        self.audit = audit
        self.emit = emit
        """Told of each call as its record says it (a ``model_call`` event: the
        ``--events`` stream, OpenTelemetry's span of the call)."""
        self.on_tokens = on_tokens
        """Told the total of every call's tokens once each call ended (the budget)."""
        self.on_unread = on_unread
        """Told of a call that spent tokens no one could read (the budget fails closed)."""
        self.calls = 0
        self.with_tokens = 0
        self.tokens: dict[str, int] = dict.fromkeys(TOKEN_KINDS, 0)
        self.models: dict[str, int] = {}

    async def record(self, call: ModelCall) -> None:
        """One call's record (the proxy's `governor.sandbox.net.terminate.Recorder`)."""
        self.calls += 1
        if call.usage.tokens:
            self.with_tokens += 1
        for kind, count in call.usage.tokens.items():
            self.tokens[kind] = self.tokens.get(kind, 0) + count
        if call.usage.model is not None:
            self.models[call.usage.model] = self.models.get(call.usage.model, 0) + 1
        subject: dict[str, Any] = {
            "host": call.host,
            "port": call.port,
            "method": call.method,
            "path": call.path,
            "origin": call.origin,
        }
        fields: dict[str, Any] = {
            "subject": subject,
            "model": call.usage.model,
            "http_status": call.status,  # ``status`` is an attempt's word in a log
            "tokens": dict(call.usage.tokens),
            "stop_reason": call.usage.stop,
            "first_byte_ms": None if call.first_byte_s is None else round(call.first_byte_s * 1000, 1),
            "duration_ms": round(call.duration_s * 1000, 1),
            "streamed": call.streamed,
            "response_bytes": call.response_bytes,
            "credentials": list(call.credentials),
            "usage_unread": call.unread or None,
        }
        fields = {k: v for k, v in fields.items() if v is not None}
        # a log that cannot be written fails the attempt at the gate's next
        # decision; the sum still counts the call
        with contextlib.suppress(AuditUnavailable):
            self.audit.append("model", fields, thin=False)
        if self.emit is not None:
            self.emit("model_call", fields)
        if self.on_tokens is not None and call.usage.tokens:
            self.on_tokens(sum(self.tokens.values()))
        if self.on_unread is not None and call.unread:
            self.on_unread(f"{call.method} {call.path[:200]} to {call.host}:{call.port}")

    def usage(self) -> dict[str, Any] | None:
        """The outcome's ``usage.observed``: calls, tokens by kind, models; None
        when no call was seen."""
        if not self.calls:
            return None
        return {
            "calls": self.calls,
            "calls_with_tokens": self.with_tokens,
            "tokens": self.tokens["input"] + self.tokens["output"],
            **{f"{k}_tokens": v for k, v in self.tokens.items()},
            "models": dict(self.models),
        }


def strength(observed: dict[str, Any] | None, reported: bool) -> str:
    """How the outcome's usage is known: ``observed`` on the wire, ``reported``
    by the agent only, or ``none``."""
    if observed is not None and observed.get("calls_with_tokens"):
        return "observed"
    return "reported" if reported else "none"
