"""Resource limits of one attempt: the policy's ``[limits]``, parsed and rendered.

A job says how much one attempt may take (``memory``, ``processes``, ``tmp``,
``cpu_seconds``, ``wall``, ``log``, ``workspace``, ``patch``, and the budgets
``tool_calls``, ``tokens``, ``cost_usd``); the ceiling says the most any job may
ask for (`governor.policies.ceiling`). A limit the job leaves out takes `DEFAULTS`, or the
ceiling's maximum where that is lower: the job asked for nothing, so nothing is
clamped. The budgets have no default (None: no limit), so an unset one is the
ceiling's maximum when it has one. A limit the job sets over the maximum is
refused, with every other violation.

Sizes are bytes, written as an integer or as a string with a binary suffix
(``"512M"``, ``"4G"``, ``"1.5G"``; K, M, G, T are powers of 1024). What each
limit means for the sandbox (rlimits or a cgroup, per process or per sandbox)
is `governor.sandbox.host.limits`'s business; this file is pure.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any, Final

from governor.policies.errors import ConfigError, unknown_key

LIMIT_KEYS: Final = (
    "memory", "processes", "tmp", "cpu_seconds", "wall", "log", "workspace",
    "tool_calls", "tokens", "cost_usd", "patch", "attempt_processes", "attempt_memory",
)  # fmt: skip
SIZE_KEYS: Final = frozenset({"memory", "tmp", "log", "workspace", "patch", "attempt_memory"})
_SUFFIX: Final = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
_SIZE: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)(?:i?B|i)?\s*$", re.IGNORECASE)
MIN_SIZE: Final = 1 << 20
"""A size below 1 MiB is a typo (``memory = 512`` meant ``"512M"``), not a limit."""


@dataclass(frozen=True, slots=True)
class Limits:
    """How much one attempt may use. None: not said (a default applies, see
    `effective`); every value is positive."""

    memory: int | None = None
    """Bytes of memory each process may allocate."""
    processes: int | None = None
    """Processes (threads count) a sandbox may hold at once."""
    tmp: int | None = None
    """Bytes of each private tmpfs (``/tmp``, ``/var/tmp``, the empty homes)."""
    cpu_seconds: int | None = None
    """CPU seconds each process may use."""
    wall: float | None = None
    """Seconds for the attempt (its timeout)."""
    log: int | None = None
    """Bytes of audit log one attempt may write: past it the attempt ends
    ``failed`` (an agent's flood of requests must not fill the disk)."""
    workspace: int | None = None
    """Bytes the writable roots may hold while the attempt runs (checked as it
    runs): past it the attempt is stopped and ends ``failed``."""
    tool_calls: int | None = None
    """Tool calls the agent may make (each new tool call id it reports or asks
    about counts once): past it the turn is cancelled and the attempt ends ``failed``."""
    tokens: int | None = None
    """Tokens the agent may report using (`governor.attempt.budget` says how they are read)."""
    cost_usd: float | None = None
    """US dollars the agent may report spending (its ``usage_update`` cost)."""
    patch: int | None = None
    """Bytes of a batch job's patch (its workspace's diff), streamed to disk:
    past it the job ends ``failed`` and keeps an empty patch (a cut one would
    apply half the work)."""
    attempt_processes: int | None = None
    """Processes (threads count) all the attempt's sandboxes may hold together:
    the agent's, each session's commands, each MCP server's, each check's
    (`governor.sandbox.host.budget`). ``processes`` stays the bound of each one."""
    attempt_memory: int | None = None
    """Bytes of private memory (resident anonymous and shared-memory pages) all
    the attempt's sandboxes may hold together. ``memory`` stays the bound of
    each process."""

    def effective(self, maxima: Limits | None = None) -> Limits:
        """Every limit set: this one's, else the default, lowered to ``maxima``'s
        where that is lower (a default is never over the ceiling)."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                value = getattr(DEFAULTS, f.name)
                bound = None if maxima is None else getattr(maxima, f.name)
                if bound is not None and (value is None or bound < value):
                    value = bound
            out[f.name] = value
        return Limits(**out)

    def over(self, maxima: Limits) -> list[tuple[str, str, str]]:
        """Every limit above its maximum: (key, this value, the maximum), rendered."""
        found = []
        for name in LIMIT_KEYS:
            value, bound = getattr(self, name), getattr(maxima, name)
            if value is not None and bound is not None and value > bound:
                found.append((name, render(name, value), render(name, bound)))
        return found

    def with_wall(self, wall: float | None) -> Limits:
        """The same limits with ``wall`` (None keeps this one's)."""
        return self if wall is None else replace(self, wall=wall)


DEFAULTS: Final = Limits(
    memory=4 << 30,
    processes=1024,
    tmp=1 << 30,
    cpu_seconds=1800,
    wall=1800.0,
    log=256 << 20,
    workspace=16 << 30,
    patch=512 << 20,
    attempt_processes=4096,
    attempt_memory=16 << 30,
)
"""One attempt on a developer machine: 4 GiB per process, 1,024 processes in a
sandbox, 4,096 processes and 16 GiB of private memory across all its sandboxes, a 1 GiB ``/tmp``, 30 CPU minutes per process, 30 minutes in all,
256 MiB of audit log, 16 GiB in the writable roots, a 512 MiB batch patch; no
budget (tool calls, tokens, cost) but the ceiling's."""


def size_text(value: int) -> str:
    """A byte count the way a policy writes it: ``512M``, ``4G``, ``1536K``."""
    for suffix in ("T", "G", "M", "K"):
        unit = _SUFFIX[suffix]
        if value % unit == 0:
            return f"{value // unit}{suffix}"
    return str(value)


def render(name: str, value: float) -> str:
    """One limit's value for a message: sizes with a suffix, times with ``s``."""
    if name in SIZE_KEYS:
        return size_text(int(value))
    if name in ("cpu_seconds", "wall"):
        return f"{value:g} s"
    if name == "cost_usd":
        return f"{value:g} USD"
    return str(int(value))


def parse_size(text: str) -> int:
    """Bytes from ``"512M"``-style text; `ValueError` naming what is accepted."""
    match = _SIZE.match(text)
    if match is None:
        raise ValueError(f'{text!r} is not a size (e.g. "512M", "4G", or bytes)')
    number, suffix = match.groups()
    return int(float(number) * _SUFFIX[suffix.upper()])


def limits_from_mapping(
    source: str, key: str, body: Mapping[str, Any], *, prefix: str = ""
) -> Limits:
    """`Limits` from a TOML table (the policy's ``[limits]``, or the ceiling's
    ``max_*`` keys with ``prefix="max_"``); strict, errors name the key."""
    names = {f"{prefix}{name}": name for name in LIMIT_KEYS}
    values: dict[str, Any] = {}
    for raw, value in body.items():
        if raw not in names:
            raise unknown_key(source, key, raw, names)
        name = names[raw]
        where = f"{key}.{raw}" if key else raw
        values[name] = _value(source, where, name, value)
    return Limits(**values)


def _value(source: str, where: str, name: str, value: Any) -> int | float:
    if isinstance(value, bool):
        raise ConfigError(source, where, "expected a number, got a boolean")
    if name in SIZE_KEYS:
        if isinstance(value, str):
            try:
                size = parse_size(value)
            except ValueError as e:
                raise ConfigError(source, where, str(e)) from None
        elif isinstance(value, int):
            size = value
        else:
            raise ConfigError(source, where, 'expected a size such as "512M" or "4G"')
        if size < MIN_SIZE:
            raise ConfigError(
                source, where, f'{size} bytes is below 1M; write a suffix ("512M", "4G")'
            )
        return size
    if name in ("wall", "cost_usd"):
        if not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            unit = "seconds" if name == "wall" else "US dollars (0.5 for 50 cents)"
            raise ConfigError(source, where, f"expected a positive number of {unit}")
        return float(value)
    if not isinstance(value, int) or value < 1:
        raise ConfigError(source, where, "expected a positive integer")
    return value
