"""One ACP turn as the agent reports it, folded from ``session/update`` params.

Sans-IO: a `Turn` is fed the params of each ``session/update`` notification
(plain JSON values, as the connection parsed them) and keeps what the outcome
needs: the final message, the last plan, the usage reports folded, the mode,
notices, and how many updates were malformed. Tests drive it with dicts.

Rules of this file:

- **Only what is folded is validated**, each kind with its own schema model:
  the ``sessionUpdate`` kind is read first, and kinds the turn does not fold
  (thoughts, command lists, titles...) are dropped unvalidated. This is the hot
  path of a chatty agent.
- **A malformed update is counted and logged, never fatal**: the turn goes on.
- **The final message is what follows the last tool call**: a new tool call, or
  a new message id, starts it afresh.
- **Tool calls are handed on** (`on_tool_call`) to whoever tracks them (the
  gate, for unasked work); the turn keeps none of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

import structlog
from pydantic import ValidationError

from governor.acp.models import schema
from governor.attempt.session_choices import acts_alone
from governor.policies.options import mode_asks

log = structlog.get_logger("governor.attempt.turn")

Emit = Callable[[str, dict[str, Any]], None]


class Turn:
    """What the agent reported during the turn."""

    def __init__(
        self,
        agent: str,
        *,
        on_tool_call: Callable[[Any], None] | None = None,
        emit: Emit | None = None,
        on_usage: Callable[[Any], None] | None = None,
    ) -> None:
        self.agent = agent
        """The agent's name in notices (it may introduce itself at initialize)."""
        self.session_id: str | None = None
        """Updates for another session are ignored once this is set."""
        self.on_tool_call = on_tool_call
        self.emit = emit
        self.on_usage = on_usage
        """Told of each usage report folded (the budget holds them against its limits)."""
        self.message: list[str] = []
        self.message_id: str | None = None
        self.plan_update: Any = None
        """The last ``plan`` update (a full snapshot), kept as its model."""
        self.usage_merged: dict[str, Any] | None = None
        """The usage reports folded so far, but for `usage_last`."""
        self.usage_last: Any = None
        """The last usage report, kept as its model (see `add_usage`)."""
        self.mode: dict[str, Any] | None = None
        """The mode the agent runs in: ``{"id", "name", "asks"}``."""
        self.notices: list[str] = []
        self.bad_updates = 0
        self.config_options: list[Any] = []
        """The agent's config options, as it last reported them."""
        self.title: str | None = None

    # -- folding -------------------------------------------------------------------

    def feed(self, params: Any) -> None:
        """Fold the params of one ``session/update`` notification."""
        try:
            raw = params["update"]
            kind = raw["sessionUpdate"]
            fold = _fold_for(kind)
        except (TypeError, KeyError, IndexError):  # not objects, no kind, an unhashable kind
            fold = kind = None
        if fold is None:
            if type(kind) is not str:
                self.bad_updates += 1
                log.warning("agent.bad_update", kind=str(kind)[:40])
            return  # a kind the turn does not fold
        if self.session_id is not None and params.get("sessionId") != self.session_id:
            log.warning("agent.update_for_unknown_session")
            return
        validate, folder = fold
        try:
            update = validate(raw)
        except ValidationError:
            self.bad_updates += 1
            log.warning("agent.bad_update", kind=kind[:40])
            return
        folder(self, update, raw)

    def _fold_message(self, update: Any, raw: Any) -> None:
        mid = update.message_id
        if mid is not None and mid != self.message_id:
            self.message = []
            self.message_id = mid
        text = getattr(update.content, "text", None)
        if type(text) is str:
            self.message.append(text)
            if self.emit is not None:
                self.emit("message", {"text": text})

    def _fold_tool_call(self, update: Any, raw: Any) -> None:
        if update.session_update == "tool_call":
            self.message = []  # the final message is what follows the last tool call
        if self.on_tool_call is not None:
            self.on_tool_call(update)

    def _fold_plan(self, update: Any, raw: Any) -> None:
        self.plan_update = update  # dumped once, for the outcome
        if self.emit is not None:
            # The entries as the agent sent them (validated): dumping the model at
            # every plan update would cost more than validating it.
            self.emit("plan", {"entries": raw["entries"]})

    def _fold_usage(self, update: Any, raw: Any) -> None:
        self.add_usage(update)

    def _fold_mode(self, update: Any, raw: Any) -> None:
        current = update.current_mode_id
        before = self.mode
        if before is not None and before.get("id") == current:
            return
        self.mode = {"id": current, "name": current, "asks": mode_asks(current, None)}
        if before is None:
            # during the session's setup: most often the governor's own switch
            # reported back; the setup's mode is set after it (`settled`)
            return
        self.notices.append(
            f"{self.agent} switched itself to mode {current} (the session was in mode {before['id']})"
        )

    def settled(self, mode: dict[str, Any] | None) -> None:
        """The mode the session's setup left the agent in. A mode the agent
        reported during the setup that is not it, and in which it does not ask,
        is noticed: the setup's word would otherwise hide it."""
        reported, self.mode = self.mode, mode
        if (
            reported is not None
            and mode is not None
            and reported["id"] != mode["id"]
            and reported["asks"] is False
        ):
            self.notices.append(
                f"{self.agent} reported mode {reported['id']}, in which it does not ask, "
                f"while the governor set mode {mode['id']}"
            )
            self.mode = reported

    def _fold_config(self, update: Any, raw: Any) -> None:
        """A new snapshot of the config options: an option the agent turned to a
        value that acts without asking is noticed, and so is its new mode."""
        before = {o.id: o.current_value for o in self.config_options}
        self.config_options = list(update.config_options)
        for option in self.config_options:
            if before.get(option.id, option.current_value) == option.current_value:
                continue
            if acts_alone(option) is True:
                self.notices.append(
                    f"{self.agent} set its {option.id} to {option.current_value} itself: "
                    "it may act without asking"
                )
            if getattr(option, "category", None) == "mode":
                alone = acts_alone(option)
                value = str(option.current_value)
                self.mode = {
                    "id": value,
                    "name": value,
                    "asks": None if alone is None else not alone,
                }

    def _fold_info(self, update: Any, raw: Any) -> None:
        if "title" in raw:
            self.title = update.title

    def add_usage(self, report: Any) -> None:
        """Fold a usage report (a schema model): later values win, fields a report
        leaves out keep the earlier values; `on_usage` is told.

        Dumping a model costs more than the rest of a notification, and a chatty
        agent reports usage often: the last report is kept as its model, and dumped
        when `usage` is read or when a newer report does not set every field it set.
        """
        last = self.usage_last
        if last is not None and not all(
            getattr(report, name, None) is not None for name in last.model_fields_set
        ):
            self.usage_merged = self.usage
        self.usage_last = report
        if self.on_usage is not None:
            self.on_usage(report)

    # -- what the outcome reads ------------------------------------------------------

    @property
    def final_message(self) -> str:
        """The agent's last message of the turn (what followed its last tool call)."""
        return "".join(self.message)

    @property
    def usage(self) -> dict[str, Any] | None:
        """Every usage report folded, as JSON values (None when there was none)."""
        if self.usage_last is None:
            return self.usage_merged
        last = self.usage_last.model_dump(
            by_alias=True, exclude_none=True, exclude={"session_update"}
        )
        return {**(self.usage_merged or {}), **last}

    @property
    def plan(self) -> list[dict[str, Any]]:
        """The agent's last plan, as JSON values."""
        if self.plan_update is None:
            return []
        return [e.model_dump(by_alias=True, exclude_none=True) for e in self.plan_update.entries]


_UPDATE_MODELS: Final[Mapping[str, Any]] = {
    "agent_message_chunk": schema.AgentMessageChunk,
    "tool_call": schema.ToolCallStart,
    "tool_call_update": schema.ToolCallProgress,
    "plan": schema.AgentPlanUpdate,
    "usage_update": schema.UsageUpdate,
    "current_mode_update": schema.CurrentModeUpdate,
    "config_option_update": schema.ConfigOptionUpdate,
    "session_info_update": schema.SessionInfoUpdate,
}
"""The updates the turn folds, each validated with its own schema model."""

_FOLDERS: Final[Mapping[str, Callable[[Turn, Any, Any], None]]] = {
    "agent_message_chunk": Turn._fold_message,
    "tool_call": Turn._fold_tool_call,
    "tool_call_update": Turn._fold_tool_call,
    "plan": Turn._fold_plan,
    "usage_update": Turn._fold_usage,
    "current_mode_update": Turn._fold_mode,
    "config_option_update": Turn._fold_config,
    "session_info_update": Turn._fold_info,
}
_FOLDS: Final[dict[str, tuple[Callable[[Any], Any], Callable[[Turn, Any, Any], None]]]] = {}
"""Each kind's validator and fold, made on its first update (`_fold_for`)."""


def _fold_for(kind: Any) -> tuple[Callable[[Any], Any], Callable[[Turn, Any, Any], None]] | None:
    """The validator and fold of one kind of update, None for a kind the turn does
    not fold; `TypeError` for an unhashable kind."""
    fold = _FOLDS.get(kind)
    if fold is None and kind in _UPDATE_MODELS:
        # The model's validator itself (`model_validate` adds a call around it),
        # taken on first use: the schema's models are built then (governor.acp.models).
        validator = _UPDATE_MODELS[kind].__pydantic_validator__.validate_python
        fold = _FOLDS[kind] = (validator, _FOLDERS[kind])
    return fold
