"""A new session set up before the prompt: the model the job asked for, and a
mode in which the agent asks.

`governor.attempt.session_choices` decides (sans-IO) what to set; `SessionSetup` makes the
requests over the connection, records each setting (a ``config`` record) and
the mode the agent then runs in (a ``mode`` record), and says when the attempt
must end before the prompt (a model the agent does not offer, one it refuses to
switch to). Agents with a ``mode`` config option are set through it; the
legacy ``modes`` (``session/set_mode``) serve the others.

Rules of this file: the setup writes nothing but its records; what it came to
is one value, `SetUp`, that the attempt hands on (the turn starts from its
mode and options, the ending keeps its model). Two writers of the turn and
the ending would leave a reader to guess which wrote a field last.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from governor.acp.connection import Connection, RemoteError, RequestTimeout
from governor.acp.jsonrpc import short_error
from governor.acp.models import schema
from governor.agents.presets import Preset, login_as_found
from governor.attempt.session_choices import (
    ConfigOption,
    SelectOption,
    Setting,
    Unavailable,
    acts_alone,
    asking_settings,
    choose_mode,
    choose_model,
    select_choices,
)
from governor.audit.log import AuditLog, AuditUnavailable
from governor.job.spec import Prepared
from governor.policies import by as who
from governor.policies.options import mode_asks


@dataclass(frozen=True, slots=True)
class SetUp:
    """What setting one session up came to."""

    error: str | None = None
    """Why the attempt must end before the prompt (None: go on)."""
    model: str | None = None
    """The model the agent was put on, as the agent names it."""
    alone: tuple[str, ...] = ()
    """Config options left letting the agent act without asking."""
    config_options: tuple[ConfigOption, ...] = ()
    """The agent's config options once set up: the turn's first snapshot."""
    mode: dict[str, Any] | None = None
    """The mode the agent runs in (``{"id", "name", "asks"}``): the turn's first."""
    notices: tuple[str, ...] = ()
    """What could not be set, in words."""


class SessionSetup:
    """Sets one new session up (see the module docstring)."""

    def __init__(self, conn: Connection, p: Prepared, name: str, audit: AuditLog) -> None:
        self.conn = conn
        self.prepared = p
        self.name = name
        """The agent's name in reasons and notices."""
        self.audit = audit
        self.session_id: str | None = None
        self.mode: dict[str, Any] | None = None
        self.wanted_mode: str | None = None
        """The mode ``--mode`` named, as the agent offers it (`choose_mode`)."""
        self.notices: list[str] = []

    async def run(self, session: schema.NewSessionResponse, models: Any) -> SetUp:
        """The model asked for, then a way of working in which the agent asks
        (`governor.attempt.session_choices`); what it came to, with an error when the attempt
        must end before the prompt."""
        self.session_id = session.session_id
        spec, preset = self.prepared.spec, self.prepared.executor.preset
        options = list(session.config_options or [])
        model: str | None = None
        if spec.model is not None:
            choice = choose_model(
                spec.model,
                options,
                models,
                agent=self.name,
                own_way=preset.model_env if preset is not None else None,
            )
            if isinstance(choice, Unavailable):
                self._record_setting("model", spec.model, "deny", choice.reason)
                return self._ended(choice.reason)
            if choice.setting is not None:
                updated = await self._apply(session.session_id, choice.setting)
                if updated is None:
                    return self._ended(f"{self.name} could not switch to the model {choice.model}")
                options = updated or options
            model = choice.model
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
        if spec.mode is not None:
            chosen = choose_mode(
                spec.mode,
                mode_option,
                session.modes,
                agent=self.name,
                may_act_alone=self.prepared.policy.allow_mode_switch,
            )
            if isinstance(chosen, Unavailable):
                self._record_setting("mode", spec.mode, "deny", chosen.reason)
                return self._ended(chosen.reason)
            self.wanted_mode = chosen
            if mode_option is not None and chosen != mode_option.current_value:
                wanted = Setting(
                    "session/set_config_option",
                    {"configId": mode_option.id, "value": chosen},
                    f"the mode {chosen}, as asked",
                )
                updated = await self._apply(session.session_id, wanted)
                if updated is None:
                    return self._ended(f"{self.name} could not switch to the mode {chosen}")
                options = updated or options
            elif mode_option is not None:
                self._record_setting(
                    "mode", chosen, "allow", "the mode asked for, the agent's current one already"
                )
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
        if mode_option is None:
            await self._pick_mode(session)
        else:
            self._mode_from(options)
        return SetUp(
            model=model,
            alone=tuple(alone),
            config_options=tuple(options),
            mode=self.mode,
            notices=tuple(self.notices),
        )

    def _ended(self, error: str) -> SetUp:
        """The setup of a session the attempt must end before the prompt."""
        return SetUp(error=error, notices=tuple(self.notices))

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
            self.notices.append(
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
                session=self.session_id,
                subject={"option": option, "value": value},
                verdict=verdict,
                by=who.JOB,
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
                self.mode = {
                    "id": option.current_value,
                    "name": name,
                    "asks": True if self._asking_mode(option.current_value) else asks,
                }
                self._record_mode()
                return

    def _asking_mode(self, mode_id: str) -> bool:
        """Whether the preset names `mode_id` as the agent's asking mode."""
        preset = self.prepared.executor.preset
        return preset is not None and preset.asking_mode == mode_id

    def _record_mode(self) -> None:
        mode = self.mode
        if mode is None:
            return
        with contextlib.suppress(AuditUnavailable):
            self.audit.record(
                "mode",
                session=self.session_id,
                subject=mode,
                verdict="allow",
                by=who.JOB,
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
        wanted = self.wanted_mode
        if (
            wanted is None
            and not self._asking_mode(current)
            and mode_asks(current, available.get(current)) is not True
        ):
            preferred = self.prepared.executor.preset.asking_mode if self.prepared.executor.preset else None
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
                self.notices.append(
                    f"could not switch {self.name} to mode {wanted}: {short_error(e)}"
                )
        if self.wanted_mode is not None:
            asked = self.wanted_mode == current
            self._record_setting(
                "mode",
                self.wanted_mode,
                "allow" if asked else "deny",
                "the mode asked for" if asked else f"the agent stayed in mode {current}",
            )
        mode = available.get(current)
        self.mode = {
            "id": current,
            "name": mode.name if mode else current,
            "asks": True if self._asking_mode(current) else mode_asks(current, mode),
        }
        self._record_mode()


def login_line(auth_methods: Sequence[Any], preset: Preset | None, program: str) -> str:
    """The command that signs the agent in: its terminal auth method's, its
    preset's login (its program named as it was found, `login_as_found`), an
    auth method's description, or "its own login"."""
    for m in auth_methods:
        meta = getattr(m, "field_meta", None) or {}
        ta = meta.get("terminal-auth") if isinstance(meta, dict) else None
        if isinstance(ta, dict) and ta.get("command"):
            return " ".join([str(ta["command"]), *map(str, ta.get("args", []))])
    if preset is not None and preset.login:
        return login_as_found(preset, program)
    for m in auth_methods:
        if getattr(m, "description", None):
            return str(m.description)
    return "its own login"
