"""Budgets: the policy's ``[limits] tool_calls``, ``tokens`` and ``cost_usd``,
held against what the agent reports, and the outcome's ``usage``.

Sans-IO: a `Budget` is told of each new tool call (by the gate's tool-call
book, `governor.gate.tool_calls`, whether the call was announced or only asked
about) and of each usage report (a ``usage_update`` and the prompt response's
``usage``, as their schema models, by the turn); when a limit is passed it
calls ``on_over`` once, with the limit in words, and the attempt stops the
turn (``session/cancel``, then the kill path) as at the workspace limit. Tests
drive it with models and counts.

Rules of this file:

- **A limit is the most allowed**: the attempt goes on while it has used no
  more than the limit; the call or report that takes it past is the one that
  stops it, and the first limit passed is the reason.
- **Tokens are the most the agent reported**: the context's high-water mark
  (``usage_update.used``: the tokens in the context at that moment) or the
  turn's total (the prompt response's ``totalTokens``), whichever is greater.
  An agent that re-sends its context on every model call uses more than
  either says; the limit is on what it reports.
- **Cost is the agent's own figure** (``usage_update.cost``, the session's cost
  so far), compared with ``cost_usd`` only when its currency is USD; a cost in
  another currency, or an amount that is not a finite number of at least
  zero, is never compared, and the outcome says so.
- **The agent's reports are its word.** Tool calls are counted by the
  governor from what the agent announces and asks about; tokens and cost are
  what it says. An agent that reports no usage is limited by tool calls and
  wall time only, and the outcome's ``usage.reported`` is false, with a notice.
- **Tokens seen on the wire count too** (`observed`): when the governor holds
  the agent's key, each model call's tokens (input, cache read and written,
  output: all the API processed) are summed as the calls end, and the call
  whose response takes the sum past ``tokens`` stops the turn; the proxy
  refuses every model request after it (`refusal`), whatever the agent reports.
  With a limit (`metered`) the proxy carries only calls whose usage it reads,
  one at a time, and a call whose usage could not be read fails the limit
  closed (`unread`): unseen tokens are never free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, Final

from governor.policies.limits import Limits, render

MAX_IDS: Final = 2048
"""Tool call ids a budget remembers (`Budget.counted_ids`), as `governor.gate.tool_calls` does."""


class Budget:
    """The attempt's use of tool calls, tokens and cost, against its limits."""

    def __init__(
        self,
        limits: Limits,
        agent: str,
        on_over: Callable[[str], None] | None = None,
    ) -> None:
        self.limits = limits
        self.agent = agent
        self.on_over = on_over
        self.tool_calls = 0
        self.tokens: int | None = None
        self.cost: dict[str, Any] | None = None
        """The last cost reported, ``{"amount", "currency"}`` as the agent sent it."""
        self.reported = False
        """Whether the agent sent any usage report."""
        self.over: str | None = None
        """The limit passed, in words (None while none is)."""
        self._uncompared: str | None = None
        """Why a reported cost could not be held against ``cost_usd``."""
        self.wire_tokens = 0
        """The tokens of the model calls seen on the wire so far (this part)."""
        self.earlier_tokens = 0
        self.earlier_cost_usd = 0.0
        self.earlier_wire_tokens = 0
        """What the earlier parts of a paused attempt used (`carry`): reported, and
        seen on the wire (each count held against the limit on its own)."""
        self.counted_ids: dict[str, None] = {}
        """The tool call ids counted, over every part (the `MAX_IDS` newest): an
        agent that starts its work afresh in a resumed part announces the calls
        it made before under the ids it gave them then; counted once."""

    def carry(
        self,
        tool_calls: int,
        tokens: int | None,
        cost_usd: float | None,
        ids: Sequence[str] = (),
        wire_tokens: int = 0,
    ) -> None:
        """A paused attempt going on: its earlier parts' use counts against the
        same limits (what is left of them, not a fresh allowance). The parts'
        reports are added, since a session started afresh, or resumed by an
        agent that counts from zero again, reports only its own part: the sum
        is never less than what was used."""
        self.tool_calls = tool_calls
        self.counted_ids = dict.fromkeys(i for i in ids[-MAX_IDS:] if isinstance(i, str))
        self.earlier_tokens = tokens or 0
        self.earlier_cost_usd = cost_usd or 0.0
        self.earlier_wire_tokens = wire_tokens if type(wire_tokens) is int and wire_tokens > 0 else 0

    @property
    def total_tokens(self) -> int | None:
        """Tokens over every part: the earlier parts' and this part's high-water mark."""
        if self.tokens is None:
            return self.earlier_tokens or None
        return self.earlier_tokens + self.tokens

    @property
    def cost_usd(self) -> float | None:
        """The USD cost over every part (None while none was reported in USD)."""
        own = None
        if self.cost is not None and str(self.cost.get("currency", "")).upper() == "USD":
            amount = self.cost.get("amount")
            if isinstance(amount, int | float) and math.isfinite(amount) and amount >= 0:
                own = float(amount)
        if own is None:
            return self.earlier_cost_usd or None
        return self.earlier_cost_usd + own

    def tool_call(self, tool_call_id: str) -> None:
        """A tool call this part had not seen before (one an earlier part counted
        under the same id is not counted again)."""
        if tool_call_id in self.counted_ids:
            return
        self.counted_ids[tool_call_id] = None
        if len(self.counted_ids) > MAX_IDS:
            del self.counted_ids[next(iter(self.counted_ids))]
        self.tool_calls += 1
        limit = self.limits.tool_calls
        if limit is not None and self.tool_calls > limit:
            self._passed(
                f"tool_calls limit {limit} ([limits] tool_calls: tool call "
                f"{self.tool_calls}, {tool_call_id[:64]!r}, was one too many)"
            )

    def report(self, report: Any) -> None:
        """A usage report: a ``usage_update`` (`acp.schema.UsageUpdate`) or a prompt
        response's ``usage`` (`acp.schema.Usage`)."""
        self.reported = True
        used = getattr(report, "used", None)
        total = getattr(report, "total_tokens", None)
        for count in (used, total):
            if type(count) is int and (self.tokens is None or count > self.tokens):
                self.tokens = count
        limit, tokens = self.limits.tokens, self.total_tokens
        if limit is not None and tokens is not None and tokens > limit:
            earlier = f", {self.earlier_tokens} of them in earlier parts" if self.earlier_tokens else ""
            self._passed(f"tokens limit {limit} ([limits] tokens: {tokens} reported{earlier})")
        cost = getattr(report, "cost", None)
        if cost is not None:
            self._cost(cost.amount, cost.currency)

    def observed(self, tokens: int) -> None:
        """The tokens of every model call seen on the wire so far
        (`governor.gate.model_calls.ModelCalls`): this part's, added to what
        the earlier parts of a paused attempt used (`carry`)."""
        self.wire_tokens = tokens
        limit, total, earlier_n = self.limits.tokens, self.total_wire_tokens, self.earlier_wire_tokens
        if limit is not None and total > limit:
            earlier = f", {earlier_n} of them in earlier parts" if earlier_n else ""
            self._passed(f"tokens limit {limit} ([limits] tokens: {total} seen on the wire{earlier})")

    @property
    def total_wire_tokens(self) -> int:
        """Tokens seen on the wire over every part: the earlier parts' and this one's."""
        return self.earlier_wire_tokens + self.wire_tokens

    @property
    def metered(self) -> bool:
        """Whether the model traffic is held to a limit (``tokens`` or
        ``cost_usd``): the proxy then carries only calls whose usage it reads,
        one at a time (`governor.sandbox.net.terminate.Interception.metered`)."""
        return self.limits.tokens is not None or self.limits.cost_usd is not None

    def unread(self, call: str) -> None:
        """A model call answered whose usage could not be read on the wire (a
        coding or a shape the reader does not know): with a limit, it fails
        closed, as a call past the limit would."""
        if self.limits.tokens is not None:
            self._passed(
                f"tokens limit {self.limits.tokens} ([limits] tokens: the usage of {call} "
                "could not be read on the wire, so the limit fails closed)"
            )
        elif self.limits.cost_usd is not None:
            self._passed(
                f"cost_usd limit {self.limits.cost_usd:g} ([limits] cost_usd: the usage of "
                f"{call} could not be read on the wire, so the limit fails closed)"
            )

    def refusal(self) -> str | None:
        """Why the next model request is refused at the proxy (a limit was
        passed: the turn is being stopped), or None."""
        if self.over is None:
            return None
        return f"over the {self.over}: no more model requests this attempt"

    def _cost(self, amount: float, currency: str) -> None:
        self.cost = {"amount": amount, "currency": currency}
        if not (math.isfinite(amount) and amount >= 0):
            self._uncompared = f"a cost of {amount!r}, which is not an amount"
            return
        if currency.upper() != "USD":
            self._uncompared = f"its cost in {currency[:12]!r}, not USD"
            return
        limit, total = self.limits.cost_usd, amount + self.earlier_cost_usd
        if limit is not None and total > limit:
            earlier = f", {self.earlier_cost_usd:g} of it in earlier parts" if self.earlier_cost_usd else ""
            self._passed(
                f"cost_usd limit {render('cost_usd', limit)} ([limits] cost_usd: "
                f"{total:g} USD reported{earlier})"
            )

    def _passed(self, limit: str) -> None:
        if self.over is not None:
            return
        self.over = limit
        if self.on_over is not None:
            self.on_over(limit)

    # -- what the outcome reads ------------------------------------------------------

    def usage(self, reported: dict[str, Any] | None) -> dict[str, Any]:
        """The outcome's ``usage``: the agent's reports folded (``reported``, its
        fields as it sent them: ``used``, ``size``, ``cost``, ``inputTokens``...)
        and the budget's own counts: ``tokens``, ``tool_calls``, ``reported``."""
        return {
            **(reported or {}),
            "tokens": self.total_tokens,
            "tool_calls": self.tool_calls,
            "reported": self.reported,
        }

    def notices(self) -> list[str]:
        """What a reader of the outcome must know about the budget's reach."""
        out = []
        if not self.reported:
            out.append(
                f"{self.agent} reported no usage (tokens, cost): it was limited by tool "
                "calls and wall time only"
            )
        if self._uncompared is not None and self.limits.cost_usd is not None:
            out.append(
                f"{self.agent} reported {self._uncompared}: the cost_usd limit was not "
                "applied to it"
            )
        return out


def usage_line(usage: dict[str, Any] | None) -> str | None:
    """The outcome's ``usage`` in one line for a person (``4000 tokens, 0.04 USD,
    4 tool calls``), or None when the attempt has none (a plain program)."""
    if not usage or "tool_calls" not in usage:
        return None
    calls = f"{usage['tool_calls']} tool call(s)"
    if not usage.get("reported"):
        return f"none reported by the agent; {calls}"
    parts = [] if usage.get("tokens") is None else [f"{usage['tokens']} tokens"]
    cost = usage.get("cost")
    if isinstance(cost, dict):
        parts.append(f"{cost.get('amount')} {cost.get('currency')}")
    return ", ".join([*parts, calls])
