"""What the governor sets in a new session: the model the job asked for, and a way
of working in which the agent asks. Every config option and mode is judged by effect.

Sans-IO: the functions here read what ``session/new`` returned (its validated
config options and modes, and the legacy ``models`` field as the agent sent it)
and return the requests to make, or why the attempt cannot go on; the lifecycle
makes the requests. Tests drive them with dicts.

Rules of this file:

- **The model** (`choose_model`): the config option of category ``model`` when
  the agent offers one (stable ACP), else ``session/set_model`` when it sends
  ``models`` (the legacy field half the agents still answer). A name matches an
  offered value or its display name, exactly first, then ignoring case. A model
  the agent does not offer ends the attempt before the prompt, naming the model
  asked for and every one offered. An agent that offers no choice at all is told
  through its preset's own way (a variable or an argv entry, applied at spawn),
  or the attempt ends naming that too.
- **Asking** (`asking_settings`): a select or boolean option whose *current*
  value lets the agent act without asking (``allow_all = on``, a mode such as
  ``bypassPermissions``, ``acceptEdits``, ``autopilot``, ``yolo``, ``auto``) is
  switched to a value that asks, where the agent offers one; otherwise the
  outcome says the agent decides alone. No option is ever switched *to* a value
  that stops the agent asking. A preset may name its asking mode.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from governor.acp.models import schema
from governor.policies.options import mode_asks

SelectOption = schema.SessionConfigOptionSelect
ConfigOption = schema.SessionConfigOptionSelect | schema.SessionConfigOptionBoolean

_ON: Final = frozenset({"on", "true", "yes", "enabled", "1", "always"})


@dataclass(frozen=True, slots=True)
class Setting:
    """One request to make: ``session/set_config_option``, ``session/set_model`` or
    ``session/set_mode``, its params but the session id, and what it is for."""

    method: str
    params: dict[str, Any]
    why: str


@dataclass(frozen=True, slots=True)
class ModelChoice:
    """How the model asked for will be chosen: a request (None when it is already
    the agent's current one), the model's id as the agent knows it, and what the
    agent offered."""

    setting: Setting | None
    model: str
    offered: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Unavailable:
    """The model asked for cannot be had: why, in words that name it and list the
    offered ones."""

    reason: str


def select_choices(option: SelectOption) -> list[schema.SessionConfigSelectOption]:
    """Every choice of a select option, groups flattened, in the agent's order."""
    out: list[schema.SessionConfigSelectOption] = []
    for entry in option.options:
        if isinstance(entry, schema.SessionConfigSelectGroup):
            out.extend(entry.options)
        else:
            out.append(entry)
    return out


def _select_values(option: SelectOption) -> list[tuple[str, str]]:
    """(value, name) of every choice of a select option, in order."""
    return [(c.value, c.name) for c in select_choices(option)]


def _match(wanted: str, choices: Sequence[tuple[str, str]]) -> str | None:
    """The value of the choice named `wanted`: exactly first, then ignoring case."""
    for value, name in choices:
        if wanted in (value, name):
            return value
    folded = wanted.casefold()
    for value, name in choices:
        if folded in (value.casefold(), name.casefold()):
            return value
    return None


def _listed(choices: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    return tuple(value if value == name else f"{value} ({name})" for value, name in choices)


def choose_model(
    wanted: str,
    options: Sequence[ConfigOption],
    models: Mapping[str, Any] | None,
    *,
    agent: str,
    own_way: str | None = None,
) -> ModelChoice | Unavailable:
    """How to put the agent on model `wanted` (see the module's rules).

    `models` is the legacy ``models`` object of ``session/new`` as sent
    (``{currentModelId, availableModels: [{modelId, name}]}``); `own_way` says how
    the preset passes a model at spawn (None when it has no way), which is what is
    left when the agent offers no choice."""
    for option in options:
        if option.category == "model" and isinstance(option, schema.SessionConfigOptionSelect):
            choices = _select_values(option)
            value = _match(wanted, choices)
            if value is None:
                return _not_offered(wanted, agent, _listed(choices))
            setting = None
            if value != option.current_value:
                setting = Setting(
                    "session/set_config_option",
                    {"configId": option.id, "value": value},
                    f"the model {value}, as asked",
                )
            return ModelChoice(setting, value, _listed(choices))
    available = models.get("availableModels") if isinstance(models, Mapping) else None
    if isinstance(available, list):
        choices = [
            (str(m.get("modelId")), str(m.get("name") or m.get("modelId")))
            for m in available
            if isinstance(m, Mapping) and isinstance(m.get("modelId"), str)
        ]
        value = _match(wanted, choices)
        if value is None:
            return _not_offered(wanted, agent, _listed(choices))
        current = models.get("currentModelId") if isinstance(models, Mapping) else None
        setting = None
        if value != current:
            setting = Setting("session/set_model", {"modelId": value}, f"the model {value}, as asked")
        return ModelChoice(setting, value, _listed(choices))
    if own_way is not None:
        return ModelChoice(None, wanted, ())
    return Unavailable(
        f"{agent} offers no choice of model and its preset names no way to pass one; "
        f"the model {wanted!r} cannot be set"
    )


def choose_mode(
    wanted: str,
    option: SelectOption | None,
    modes: schema.SessionModeState | None,
    *,
    agent: str,
    may_act_alone: bool,
) -> str | Unavailable:
    """The id of the mode `wanted` (``--mode``) as the agent offers it: in its
    ``mode`` config option, else its legacy ``modes``; matched as a model is. A
    mode it does not offer ends the attempt naming the offered ones, and so does
    one in which it would act without asking unless `may_act_alone` (the
    policy's ``allow_mode_switch``): asked for by name, it is still the switch
    the governor never turns on by itself."""
    if option is not None:
        choices = _select_values(option)
        value = _match(wanted, choices)
        alone = value is not None and acts_alone(option, value) is True
    elif modes is not None:
        choices = [(m.id, m.name) for m in modes.available_modes]
        value = _match(wanted, choices)
        chosen = next((m for m in modes.available_modes if m.id == value), None)
        alone = value is not None and mode_asks(value, chosen) is False
    else:
        return Unavailable(f"{agent} offers no session modes; the mode {wanted!r} cannot be set")
    if value is None:
        listed = ", ".join(_listed(choices)) or "none"
        return Unavailable(f"{agent} does not offer the mode {wanted!r}; it offers: {listed}")
    if alone and not may_act_alone:
        return Unavailable(
            f"in the mode {value} {agent} would act without asking: not set unless the "
            "policy sets allow_mode_switch"
        )
    return value


def _not_offered(wanted: str, agent: str, offered: tuple[str, ...]) -> Unavailable:
    listed = ", ".join(offered) or "none"
    return Unavailable(f"{agent} does not offer the model {wanted!r}; it offers: {listed}")


def acts_alone(option: ConfigOption, value: str | bool | None = None) -> bool | None:
    """Whether an option set to `value` (default: its current value) lets the agent
    act without asking: True, False, or None when that cannot be told.

    An option that is itself a permission switch (``allow_all``, ``yolo``, a
    boolean or an on/off select) acts alone when on; a select of modes or
    approvals is judged by the chosen value's id, name and description, as a mode
    is; any other option (a model, a thought level) says nothing."""
    current = option.current_value if value is None else value
    if _SWITCH.search(f"{option.id} {option.name}"):
        return is_on(current)
    if isinstance(option, schema.SessionConfigOptionBoolean) or not _about_modes(option):
        return None
    for choice in select_choices(option):
        if choice.value == current:
            asks = mode_asks(choice.value, choice)
            return None if asks is None else not asks
    return None


def _about_modes(option: schema.SessionConfigOptionSelect) -> bool:
    """Whether a select chooses how the agent works (its mode, its approvals),
    rather than a model or a thought level, which say nothing about asking."""
    return option.category == "mode" or bool(
        re.search(r"\bmodes?\b|approv|permission", f"{option.id} {option.name}", re.IGNORECASE)
    )


_SWITCH: Final = re.compile(
    r"allow.?all|allow.?tools|yolo|bypass|skip.?permission|dangerous|auto.?approve|accept.?all",
    re.IGNORECASE,
)
"""The names of options that are permission switches themselves (on: no asking)."""


@dataclass(frozen=True, slots=True)
class Asking:
    """What to do so that the agent asks: the requests, and the options left
    letting it act alone (no asking value offered), by id."""

    settings: tuple[Setting, ...]
    alone: tuple[str, ...]


def asking_settings(
    options: Sequence[ConfigOption], *, preferred: str | None = None
) -> Asking:
    """Switch every option that currently lets the agent act alone to a value that
    asks (the preset's `preferred` one first, when offered). A boolean is turned
    off; a select goes to its first asking choice that is not ``plan`` (a mode
    that does no work). Options already asking, or not about asking, are left."""
    settings: list[Setting] = []
    alone: list[str] = []
    for option in options:
        if acts_alone(option) is not True:
            continue
        if _SWITCH.search(f"{option.id} {option.name}"):
            off = _off_value(option)
            if off is None:
                alone.append(option.id)
                continue
            params: dict[str, Any] = {"configId": option.id, "value": off}
            if isinstance(option, schema.SessionConfigOptionBoolean):
                params["type"] = "boolean"
            settings.append(
                Setting(
                    "session/set_config_option",
                    params,
                    f"{option.id} off: on, the agent would act without asking",
                )
            )
            continue
        if not isinstance(option, schema.SessionConfigOptionSelect):
            continue  # a boolean that is no permission switch: acts_alone was None
        choices = _select_values(option)
        asking = [v for v, _ in choices if acts_alone(option, v) is False and v != "plan"]
        target = preferred if preferred in asking else (asking[0] if asking else None)
        if target is None:
            alone.append(option.id)
            continue
        settings.append(
            Setting(
                "session/set_config_option",
                {"configId": option.id, "value": target},
                f"{option.id} {target}: {option.current_value} would act without asking",
            )
        )
    return Asking(tuple(settings), tuple(alone))


def _off_value(option: ConfigOption) -> str | bool | None:
    """The value that turns a switch off: False, or a select's first value that
    does not read as on."""
    if isinstance(option, schema.SessionConfigOptionBoolean):
        return False
    return next((v for v, _ in _select_values(option) if not is_on(v)), None)


def is_on(value: str | bool) -> bool:
    """Whether a select's value or a boolean reads as "on"."""
    return value is True or (isinstance(value, str) and value.casefold() in _ON)
