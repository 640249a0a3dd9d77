"""`[executor]`: which agent makes the attempt, in the shape of the seed's
`external.rs`.

    [executor]
    agent = "claude"                       # a preset of presets.toml
    # or: kind = "acp", argv = [...]       # an ACP agent of your own
    # or: kind = "command", argv = [...]   # any program: prompt on stdin, judged from its diff
    model = "..."                          # optional
    mode = "..."                           # optional, an ACP agent's permission mode
    timeout_secs = 1800                    # optional

The rules, and their messages, are the seed's: `agent` and `argv` exclude each
other, `kind = "acp"`/`"command"` need `argv`, `mode` belongs to ACP agents, and
the old `kind = "claude"`/`"codex"` name their replacement. One departure: the
seed reads `kind = "native"` as "speccoder's own loop"; acp-governor has no loop
of its own, so here it is an error that says so, never a silent no-op.

Pure parsing: the preset's program is found later, by `presets.resolve`.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from governor import presets as _presets
from governor.presets import Preset

DEFAULT_TIMEOUT_SECS: Final = 1800
OLD_KINDS: Final = ("claude", "codex")
"""Kinds that were agents before they ran over ACP; now `agent = "..."`."""

_FIELDS: Final[dict[str, type]] = {
    "kind": str,
    "agent": str,
    "argv": list,
    "model": str,
    "mode": str,
    "timeout_secs": int,
}


class ExecutorError(ValueError):
    """A malformed `[executor]` table, or an agent id that names no preset."""


@dataclass(frozen=True)
class Agent:
    """An ACP agent: a preset (`id` is its id) or argv of your own (`id` is `acp`)."""

    id: str
    argv: tuple[str, ...]
    mode: str | None = None
    preset: Preset | None = None

    @property
    def name(self) -> str:
        """Its name in reports: the preset's id, or `acp`."""
        return self.id


@dataclass(frozen=True)
class Command:
    """Any program: the prompt on stdin, the summary on stdout, judged from its diff."""

    argv: tuple[str, ...]

    @property
    def name(self) -> str:
        """Its name in reports: `command`."""
        return "command"


Kind = Agent | Command


@dataclass(frozen=True)
class Executor:
    """`[executor]`: which agent, its model, and how long one attempt may take."""

    kind: Kind
    model: str | None = None
    timeout_secs: int = DEFAULT_TIMEOUT_SECS


def _ids(table: Mapping[str, Preset]) -> str:
    return ", ".join(table)


def of_preset(preset: Preset, mode: str | None = None) -> Agent:
    """The ACP agent a preset describes."""
    return Agent(preset.id, preset.argv, mode, preset)


def for_agent(
    agent_id: str,
    configured: Executor | None,
    *,
    table: Mapping[str, Preset] | None = None,
) -> Executor:
    """The executor for preset `agent_id`, for one run (`run --agent`).

    The configured executor's model and mode carry over only when it names the
    same agent (another agent's model name would mean nothing to this one); its
    timeout always carries over.
    """
    table = _presets.presets() if table is None else table
    preset = table.get(agent_id)
    if preset is None:
        raise ExecutorError(f"no agent `{agent_id}` ({_ids(table)})")
    same = configured if configured is not None and configured.kind.name == agent_id else None
    mode = same.kind.mode if same is not None and isinstance(same.kind, Agent) else None
    return Executor(
        kind=of_preset(preset, mode),
        model=same.model if same is not None else None,
        timeout_secs=configured.timeout_secs if configured is not None else DEFAULT_TIMEOUT_SECS,
    )


def parse_executor(text: str, *, table: Mapping[str, Preset] | None = None) -> Executor | None:
    """Read `[executor]` from a TOML document; `None` when there is none.

    Raises `ExecutorError` (one line, naming the key) for anything malformed.
    """
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ExecutorError(f"invalid TOML: {e}") from None
    if "executor" not in doc:
        return None
    raw = doc["executor"]
    if not isinstance(raw, dict):
        raise ExecutorError("[executor] must be a table")
    _check_fields(raw)
    table = _presets.presets() if table is None else table
    kind_s: str | None = raw.get("kind")
    agent_id: str | None = raw.get("agent")
    argv: tuple[str, ...] = tuple(raw.get("argv", ()))
    mode: str | None = raw.get("mode")
    kind = _kind(kind_s, agent_id, argv, mode, table)
    if mode is not None and isinstance(kind, Command):
        raise ExecutorError("[executor]: `mode` is an ACP agent's permission mode")
    timeout: int = raw.get("timeout_secs", DEFAULT_TIMEOUT_SECS)
    return Executor(kind=kind, model=raw.get("model"), timeout_secs=timeout)


def _kind(
    kind: str | None,
    agent_id: str | None,
    argv: tuple[str, ...],
    mode: str | None,
    table: Mapping[str, Preset],
) -> Kind:
    """The seed's match over (`kind`, `agent`), one arm per combination."""
    if kind == "native":
        raise ExecutorError(
            '[executor]: kind = "native" is not available: acp-governor has no loop of its '
            'own; name an agent (agent = "…") or kind = "acp" / "command" with `argv`'
        )
    if kind in OLD_KINDS and agent_id is None:
        raise ExecutorError(
            f'[executor]: kind = "{kind}" is now agent = "{kind}" (it runs over ACP)'
        )
    if kind in (None, "acp") and agent_id is not None:
        if argv:
            raise ExecutorError(
                "[executor]: `agent` and `argv` exclusive: an agent of your own is "
                'kind = "acp" with `argv`'
            )
        preset = table.get(agent_id)
        if preset is None:
            raise ExecutorError(f'[executor]: agent = "{agent_id}" ({_ids(table)})')
        return of_preset(preset, mode)
    if kind in ("acp", "command") and agent_id is None:
        if not argv or not argv[0]:
            raise ExecutorError(f'[executor]: kind = "{kind}" needs `argv`')
        return Agent("acp", argv, mode) if kind == "acp" else Command(argv)
    if kind is None:
        raise ExecutorError(
            f'[executor]: say which agent: agent = "…" ({_ids(table)}), '
            'or kind = "acp" / "command" with `argv`'
        )
    if kind == "command":
        raise ExecutorError(
            '[executor]: kind = "command" runs `argv`, not an agent: drop `agent` or `kind`'
        )
    hint = f'agent = "{kind}"' if kind in table else 'agent = "…"'
    raise ExecutorError(f'[executor]: kind = "{kind}" (acp or command; an agent is {hint})')


def _check_fields(raw: Mapping[str, Any]) -> None:
    """Unknown keys and wrong types, each named (serde's `deny_unknown_fields`)."""
    for key, value in raw.items():
        want = _FIELDS.get(key)
        if want is None:
            close = difflib.get_close_matches(key, _FIELDS, n=1)
            hint = f" (did you mean `{close[0]}`?)" if close else f" (known: {', '.join(_FIELDS)})"
            raise ExecutorError(f"[executor]: unknown key `{key}`{hint}")
        # bool is an int to Python, never to TOML.
        if not isinstance(value, want) or isinstance(value, bool):
            raise ExecutorError(
                f"[executor]: `{key}` must be {_WANT[key]}, not {_toml_type(value)}"
            )
    argv = raw.get("argv", [])
    if not all(isinstance(a, str) for a in argv):
        raise ExecutorError("[executor]: `argv` must be a list of strings")
    if raw.get("timeout_secs", 1) <= 0:
        raise ExecutorError("[executor]: `timeout_secs` must be a positive number of seconds")


def _toml_type(v: object) -> str:
    names = {dict: "a table", list: "a list", str: "a string", bool: "a boolean", int: "an integer"}
    return names.get(type(v), f"a {type(v).__name__}")


_WANT: Final = {
    "kind": "a string",
    "agent": "a string",
    "argv": "a list of strings",
    "model": "a string",
    "mode": "a string",
    "timeout_secs": "an integer (seconds)",
}


__all__ = [
    "DEFAULT_TIMEOUT_SECS",
    "Agent",
    "Command",
    "Executor",
    "ExecutorError",
    "Kind",
    "for_agent",
    "of_preset",
    "parse_executor",
]
