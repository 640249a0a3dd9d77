"""A preset table's values: the kinds a preset holds and the checker of each key.

`presets.toml` is read strictly (`governor.agents.presets.load_presets`): each
key of a preset has one checker here (`_SCHEMA`: required or not, and the
checker, of `governor.policies.config_values`'s family: ``check(source, key,
value)``, one wording) and a default (`_DEFAULTS`). The kinds only presets hold
are here too: a home entry relocated by a variable (`Relocation`), where a
credential may go (`KeyHosts`), and the markers an argv names the bundled
agents and the interpreter with. Pure: no I/O beyond the package's own path.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Final

from governor.policies import config_values as values
from governor.policies.network import HostPatternError, parse_pattern

AGENTS_DIR: Final = Path(str(resources.files("governor") / "agents"))
"""The bundled agents (`governor/agents`), package data of the wheel."""

PYTHON_MARKER: Final = "{python}"
AGENTS_MARKER: Final = "{agents}"
"""Stands for the directory of the bundled agents (`governor/agents`): a script
path, not ``-m governor.agents...``, so a sandboxed agent needs only that file
visible, wherever the project is checked out (even under a private ``/tmp``)."""
"""An argv element standing for the interpreter running acp-governor."""

_VERSION = re.compile(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?\Z")
_PEP440 = re.compile(r"\d+(\.\d+)+((a|b|rc|\.post|\.dev)\d+)*\Z")
"""An exact PyPI release (``6.1``, ``2.25.5``, ``1.0rc1``, ``1.0.post1``)."""
_PYPI = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?\Z")
_PYTHON = re.compile(r"3\.\d+\Z")
_REGISTRY_ENTRY = re.compile(r"[a-z][a-z0-9-]*@\d+\.\d+\.\d+\S*\Z")

@dataclass(frozen=True)
class Relocation:
    """When `var` is set to an absolute path, home entry `entry` lives at `$var/sub`."""

    var: str
    entry: str
    sub: str


@dataclass(frozen=True)
class KeyHosts:
    """Where one credential variable of a preset may go: its own API hosts, the
    base-URL variables naming its gateway, and, per host, the calls its agent
    makes there with it (``METHOD /path-glob``; a host not named takes any
    call). A key is sent only here, never to another key's host: a preset
    that names several keys (OpenCode's Anthropic and OpenAI keys) must not
    hand one company's key to the other's API, or to a gateway of the other."""

    var: str
    hosts: tuple[str, ...]
    base_url: tuple[str, ...] = ()
    calls: tuple[tuple[str, tuple[str, ...]], ...] = ()
    """``(host pattern, ("GET /copilot_internal/**", ...))``: on that host the
    real value goes into these calls only (a GitHub token's whole authority
    on ``api.github.com`` is far more than Copilot's token exchange)."""

def _argv(source: str, key: str, v: object) -> tuple[str, ...]:
    agents = str(AGENTS_DIR)
    return tuple(
        sys.executable if a == PYTHON_MARKER else a.replace(AGENTS_MARKER, agents)
        for a in values.argv(source, key, v)
    )


def _argvs(source: str, key: str, v: object) -> tuple[tuple[str, ...], ...]:
    if not isinstance(v, list):
        raise values.expected(source, key, "an array of argv arrays", values.type_name(v))
    return tuple(_argv(source, f"{key}[{i}]", a) for i, a in enumerate(v))


def _env_names(source: str, key: str, v: object) -> tuple[str, ...]:
    names = values.text_list(source, key, v)
    for n in names:
        if not values.ENV_NAME.match(n):
            raise values.expected(source, key, "environment variable names", values.shown(n))
    return names


def _env_name(source: str, key: str, v: object) -> str:
    if not isinstance(v, str) or not values.ENV_NAME.match(v):
        raise values.expected(source, key, "an environment variable name", values.shown(v))
    return v


def _home(source: str, key: str, v: object) -> tuple[str, ...]:
    entries = values.text_list(source, key, v)
    for e in entries:
        rest = e.removeprefix("~/")
        if rest == e or not rest or ".." in Path(rest).parts:
            raise values.expected(source, key, "paths under ~/", values.shown(e))
    return entries


def _inside(path: str, entry: str) -> bool:
    return path == entry or path.startswith(entry.rstrip("/") + "/")


def _relocate(source: str, key: str, v: object) -> tuple[Relocation, ...]:
    if not isinstance(v, dict):
        raise values.expected(source, key, "a table of tables", values.type_name(v))
    out: list[Relocation] = []
    for var, moves in v.items():
        if not values.ENV_NAME.match(var):
            raise values.expected(
                source, key, "a table keyed by environment variable names", values.shown(var)
            )
        if not isinstance(moves, dict) or not moves:
            what = f'{{ "~/entry" = "path under ${var}" }}'
            raise values.expected(source, f"{key}.{var}", what, values.shown(moves))
        for entry, sub in moves.items():
            if not isinstance(sub, str) or os.path.isabs(sub) or ".." in Path(sub).parts:
                what = f"relative paths under ${var}"
                raise values.expected(source, f"{key}.{var}", what, values.shown(sub))
            out.append(Relocation(var, entry, sub))
    return tuple(out)


_CALL = re.compile(r"(\*|[A-Z]+) (/\S*)\Z")
_KEY_HOSTS_KEYS: Final = ("hosts", "base_url", "calls")


def _keys(source: str, key: str, v: object) -> tuple[KeyHosts, ...]:
    """``keys = { VAR = { hosts = [...], base_url = [...], calls = {...} } }``, each
    ``calls`` entry ``"host" = ["GET /p/**", ...]``."""
    if not isinstance(v, dict):
        raise values.expected(source, key, "a table of tables", values.type_name(v))
    out: list[KeyHosts] = []
    for var, entry in v.items():
        where = f"{key}.{var}"
        if not values.ENV_NAME.match(var) or not values.is_credential(var):
            what = "a table keyed by credential variable names (ending in _KEY or _TOKEN)"
            raise values.expected(source, key, what, values.shown(var))
        if not isinstance(entry, dict):
            what = "{ hosts = [...], base_url = [...], calls = {...} }"
            raise values.expected(source, where, what, values.type_name(entry))
        for name in entry:
            if name not in _KEY_HOSTS_KEYS:
                what = f"keys {', '.join(_KEY_HOSTS_KEYS)}"
                raise values.expected(source, where, what, values.shown(name))
        hosts = _host_patterns(source, f"{where}.hosts", entry.get("hosts", []))
        base_url = _env_names(source, f"{where}.base_url", entry.get("base_url", []))
        calls_table = entry.get("calls", {})
        if not isinstance(calls_table, dict):
            what = 'a table { "host" = ["METHOD /path"] }'
            raise values.expected(source, f"{where}.calls", what, values.type_name(calls_table))
        calls: list[tuple[str, tuple[str, ...]]] = []
        for host, listed in calls_table.items():
            if host not in hosts:
                what = "hosts named in `hosts`"
                raise values.expected(source, f"{where}.calls", what, values.shown(host))
            each = values.text_list(source, f"{where}.calls.{host}", listed)
            for call in each:
                if not _CALL.match(call):
                    what = "calls like GET /copilot_internal/** (a method or *, a path glob)"
                    raise values.expected(source, f"{where}.calls.{host}", what, values.shown(call))
            calls.append((host, each))
        if not hosts and not base_url:
            what = "at least one of `hosts` and `base_url`"
            raise values.expected(source, where, what, "neither")
        out.append(KeyHosts(var, hosts, base_url, tuple(calls)))
    return tuple(out)


def _set_env(source: str, key: str, v: object) -> tuple[tuple[str, str], ...]:
    if not isinstance(v, dict):
        raise values.expected(source, key, 'a table { NAME = "value" }', values.type_name(v))
    for name, value in v.items():
        if not values.ENV_NAME.match(name) or not isinstance(value, str) or "\x00" in value:
            what = "environment variable names and string values"
            raise values.expected(source, key, what, f"{values.shown(name)} = {values.shown(value)}")
        if name in GOVERNOR_READS or name.startswith("ACP_GOVERNOR"):
            what = "variables of the agent's own (HOME, PATH and the governor's are the governor's)"
            raise values.expected(source, key, what, values.shown(name))
    return tuple(v.items())


GOVERNOR_READS: Final = frozenset({"HOME", "PATH", "TMPDIR", "USER", "LOGNAME", "SHELL"})
"""What the governor itself reads from the agent's environment (where its home
folders are bound, where its programs are found): a preset's ``set_env`` does not set these."""


def _registry_entry(source: str, key: str, v: object) -> str:
    if not isinstance(v, str) or not _REGISTRY_ENTRY.match(v):
        what = "an ACP registry entry's id@version like cline@3.0.4"
        raise values.expected(source, key, what, values.shown(v))
    return v


def _version(source: str, key: str, v: object) -> str:
    if not isinstance(v, str) or not (_VERSION.match(v) or _PEP440.match(v)):
        raise values.expected(source, key, "an exact version like 1.2.3", values.shown(v))
    return v


def _host_patterns(source: str, key: str, v: object) -> tuple[str, ...]:
    hosts = values.text_list(source, key, v)
    for host in hosts:
        try:
            parse_pattern(host)
        except HostPatternError as e:
            what = "an array of host[:port] patterns"
            raise values.expected(source, key, what, f"{values.shown(host)} ({e})") from None
    return hosts


def _pypi(source: str, key: str, v: object) -> str:
    if not isinstance(v, str) or not _PYPI.match(v):
        raise values.expected(source, key, "a PyPI project name like mistral-vibe", values.shown(v))
    return v


def _python(source: str, key: str, v: object) -> str:
    if not isinstance(v, str) or not _PYTHON.match(v):
        raise values.expected(source, key, "a Python version like 3.12", values.shown(v))
    return v


# key -> (required, checker); a checker returns the converted value or raises a ConfigError.
_SCHEMA: Final[dict[str, tuple[bool, values.Check[Any]]]] = {
    "name": (True, values.text),
    "argv": (True, _argv),
    "alternatives": (False, _argvs),
    "package": (False, values.text),
    "old_packages": (False, values.text_list),
    "install": (False, values.text),
    "npx": (False, values.boolean),
    "login": (True, values.text),
    "home": (True, _home),
    "relocate": (False, _relocate),
    "env": (False, _env_names),
    "notes": (False, values.string),
    "model_env": (False, _env_name),
    "asking_mode": (False, values.text),
    "alone_env": (False, _env_names),
    "api_hosts": (False, _host_patterns),
    "base_url_env": (False, _env_names),
    "keys": (False, _keys),
    "version": (False, _version),
    "runs_code": (False, _home),
    "pypi": (False, _pypi),
    "python": (False, _python),
    "set_env": (False, _set_env),
    "registry_entry": (False, _registry_entry),
}
_DEFAULTS: Final[dict[str, object]] = {
    "alternatives": (),
    "package": None,
    "old_packages": (),
    "install": None,
    "npx": False,
    "relocate": (),
    "env": (),
    "notes": "",
    "model_env": None,
    "asking_mode": None,
    "alone_env": (),
    "api_hosts": (),
    "base_url_env": (),
    "keys": (),
    "version": None,
    "runs_code": (),
    "pypi": None,
    "python": None,
    "set_env": (),
    "registry_entry": None,
}
