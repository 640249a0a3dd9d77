"""A new session set up before the prompt: the model the job asked for, and a
mode in which the agent asks.

`governor.settings` decides (sans-IO) what to set; `SessionSetup` makes the
requests over the connection, records each setting (a ``config`` record) and
the mode the agent then runs in (a ``mode`` record), and says when the attempt
must end before the prompt (a model the agent does not offer, one it refuses to
switch to). Agents with a ``mode`` config option are set through it; the
legacy ``modes`` (``session/set_mode``) serve the others.
"""

from __future__ import annotations

import contextlib
from typing import Any

from acp import schema
from pydantic import ValidationError

from governor.acp.connection import Connection, RemoteError, RequestTimeout
from governor.acp.jsonrpc import short_error
from governor.audit.log import AuditLog, AuditUnavailable
from governor.ending import Ending
from governor.settings import (
    ConfigOption,
    SelectOption,
    Setting,
    Unavailable,
    acts_alone,
    asking_settings,
    choose_model,
    select_choices,
)
from governor.spec import Prepared
from governor.turn import Turn
from policies.options import mode_asks


class SessionSetup:
    """Sets one new session up (see the module docstring)."""

    def __init__(
        self, conn: Connection, p: Prepared, turn: Turn, end: Ending, audit: AuditLog
    ) -> None:
        self.conn = conn
        self.p = p
        self.turn = turn
        self.end = end
        self.audit = audit

    @property
    def name(self) -> str:
        """The agent's name in reasons and notices."""
        return self.end.agent

    async def run(self, session: schema.NewSessionResponse, models: Any) -> bool:
        """The model asked for, then a way of working in which the agent asks
        (`governor.settings`); False when the attempt must end before the prompt."""
        spec, preset = self.p.spec, self.p.executor.preset
        options = list(session.config_options or [])
        if spec.model is not None:
            choice = choose_model(
                spec.model,
                options,
                models,
                agent=self.name,
                own_way=preset.model_env if preset is not None else None,
            )
            if isinstance(choice, Unavailable):
                self.end.error = choice.reason
                self._record_setting("model", spec.model, "deny", choice.reason)
                return False
            if choice.setting is not None:
                updated = await self._apply(session.session_id, choice.setting)
                if updated is None:
                    self.end.error = f"{self.name} could not switch to the model {choice.model}"
                    return False
                options = updated or options
            self.end.model = choice.model
            if choice.setting is not None:
                how = f"set with {choice.setting.method}"
            elif choice.offered:
                how = "the agent's current model already"
            else:  # the agent offers no choice: its preset's variable carried it
                how = f"passed in ${preset.model_env if preset else ''} at start"
            self._record_setting("model", choice.model, "allow", f"the model asked for, {how}")
        mode_option = next(
            (o for o in options if isinstance(o, SelectOption) and o.category == "mode"), None
        )
        if (
            mode_option is not None
            and spec.mode is not None
            and spec.mode != mode_option.current_value
        ):
            wanted = Setting(
                "session/set_config_option",
                {"configId": mode_option.id, "value": spec.mode},
                f"the mode {spec.mode}, as asked",
            )
            options = await self._apply(session.session_id, wanted) or options
        mode_id = mode_option.id if mode_option is not None else None
        asking = asking_settings(
            [o for o in options if spec.mode is None or o.id != mode_id],
            preferred=preset.asking_mode if preset is not None else None,
        )
        alone = list(asking.alone)
        for setting in asking.settings:
            updated = await self._apply(session.session_id, setting)
            if updated is None:  # it refused to ask: it decides alone
                alone.append(str(setting.params.get("configId")))
            options = updated or options
        self.end.alone = tuple(alone)
        self.turn.config_options = options
        if mode_option is None:
            await self._pick_mode(session)
        else:
            self._mode_from(options)
        return True

    async def _apply(self, session_id: str, setting: Setting) -> list[ConfigOption] | None:
        """Make one setting's request and record it: the config options the agent
        then reports ([] when it reports none), or None when it refused."""
        option = setting.params.get("configId") or "model"
        value = setting.params.get("value", setting.params.get("modelId"))
        try:
            result = await self.conn.request(
                setting.method, {"sessionId": session_id, **setting.params}, timeout=30
            )
        except (RemoteError, RequestTimeout) as e:
            self.turn.notices.append(
                f"could not set {self.name}'s {option} to {value}: {short_error(e)}"
            )
            return None
        if option != "model":
            self._record_setting(option, value, "allow", setting.why)
        if setting.method != "session/set_config_option" or not isinstance(result, dict):
            return []
        try:
            response = schema.SetSessionConfigOptionResponse.model_validate(result)
        except ValidationError:
            return []
        return list(response.config_options or [])

    def _record_setting(self, option: str, value: Any, verdict: str, reason: str) -> None:
        with contextlib.suppress(AuditUnavailable):
            self.audit.record(
                "config",
                session=self.turn.session_id,
                subject={"option": option, "value": value},
                verdict=verdict,
                by="policy",
                reason=reason,
            )

    def _mode_from(self, options: list[ConfigOption]) -> None:
        """The mode the agent runs in, from its ``mode`` config option."""
        for option in options:
            if isinstance(option, SelectOption) and option.category == "mode":
                choice = next(
                    (c for c in select_choices(option) if c.value == option.current_value), None
                )
                name = choice.name if choice is not None else option.current_value
                alone = acts_alone(option)
                asks = None if alone is None else not alone
                self.turn.mode = {
                    "id": option.current_value,
                    "name": name,
                    "asks": True if self._asking_mode(option.current_value) else asks,
                }
                self._record_mode()
                return

    def _asking_mode(self, mode_id: str) -> bool:
        """Whether the preset names `mode_id` as the agent's asking mode."""
        preset = self.p.executor.preset
        return preset is not None and preset.asking_mode == mode_id

    def _record_mode(self) -> None:
        mode = self.turn.mode
        if mode is None:
            return
        with contextlib.suppress(AuditUnavailable):
            self.audit.record(
                "mode",
                session=self.turn.session_id,
                subject=mode,
                verdict="allow",
                by="policy",
                reason=f"{self.name} runs in mode {mode['id']}",
            )

    async def _pick_mode(self, session: schema.NewSessionResponse) -> None:
        """Put the agent in the mode `--mode` names, else in one where it asks
        (the legacy ``modes`` of an agent with no ``mode`` config option)."""
        modes = session.modes
        if modes is None:
            return
        available = {m.id: m for m in modes.available_modes}
        current = modes.current_mode_id
        wanted = self.p.spec.mode
        if (
            wanted is None
            and not self._asking_mode(current)
            and mode_asks(current, available.get(current)) is not True
        ):
            preferred = self.p.executor.preset.asking_mode if self.p.executor.preset else None
            wanted = (
                preferred
                if preferred in available
                else next(
                    (i for i, m in available.items() if mode_asks(i, m) is True and i != "plan"),
                    None,
                )
            )
        if wanted and wanted != current:
            try:
                await self.conn.request(
                    "session/set_mode",
                    {"sessionId": session.session_id, "modeId": wanted},
                    timeout=30,
                )
                current = wanted
            except (RemoteError, RequestTimeout) as e:
                self.turn.notices.append(
                    f"could not switch {self.name} to mode {wanted}: {short_error(e)}"
                )
        mode = available.get(current)
        self.turn.mode = {
            "id": current,
            "name": mode.name if mode else current,
            "asks": True if self._asking_mode(current) else mode_asks(current, mode),
        }
        self._record_mode()
