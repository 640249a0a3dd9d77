"""An ACP registry entry (``agent.json``) as a preset: how an operator adds an
agent we do not ship with a file, not a release of ours (issue 39).

The registry's shape (its ``agent.schema.json``, v1, at
https://cdn.agentclientprotocol.com/registry/v1/latest/agent.schema.json): ``id``, ``name``,
``version``, ``description`` and ``distribution``, one or more of
``npx{package, args, env}``, ``uvx{package, args, env}`` and
``binary{<os>-<arch>: {archive, sha256, cmd, args, env}}``. A package may carry
its version (``cline@3.0.4``, ``fast-agent-acp==0.10.1``).

What the registry says becomes the preset's ``argv``, ``package``/``pypi`` and
``version`` (pinned: the entry's), ``set_env`` (its ``env``) and
``registry_entry`` (``id@version``, the entry it follows). What the registry
does not say, the governor cannot guess, and a wrong guess is a hole or a
broken run: the model API hosts its sandbox may reach, the home folders that
hold its sign-in, its credential variables, the files there that run code
later. They come from the operator (`Extra`), and `convert` says in ``notes``
which were left empty, so `governor presets` shows it.

A binary distribution is not installed by the governor: its archive is named
with its sha256 in ``install``, and its ``cmd`` is looked for on PATH.
"""

from __future__ import annotations

import os
import platform
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from governor.boundary import spelling
from governor.boundary.display import acting
from governor.policies import config_values as values

"""The registry schema this reading follows."""

_ID: Final = re.compile(r"[a-z][a-z0-9-]*\Z")
_VERSION: Final = re.compile(r"\d+\.\d+\.\d+")
_NPM_SPEC: Final = re.compile(r"(?P<name>(@[a-z0-9][\w.-]*/)?[a-z0-9][\w.-]*)(@(?P<version>[^@\s]+))?\Z")
_PYPI_SPEC: Final = re.compile(r"(?P<name>[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?)(==(?P<version>\S+))?\Z")
_KINDS: Final = ("npx", "uvx", "binary")


class RegistryError(ValueError):
    """The entry is not one the registry's schema allows, or cannot be run here."""


@dataclass(frozen=True)
class Extra:
    """What the operator says that the registry does not."""

    api_hosts: Sequence[str] = ()
    home: Sequence[str] = ()
    env: Sequence[str] = ()
    program: str | None = None
    login: str | None = None
    runs_code: Sequence[str] = field(default_factory=tuple)


def platform_key() -> str:
    """This machine as the registry names a binary's target (``linux-x86_64``)."""
    machine = platform.machine().lower()
    arch = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    return f"{platform.system().lower()}-{arch}"


def _strings(value: object, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RegistryError(f"{where} must be a list of strings")
    return list(value)


def _env(value: object, where: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        raise RegistryError(f"{where} must be an object of string values")
    bad = [k for k in value if not values.ENV_NAME.match(k)]
    if bad:
        raise RegistryError(f"{where}: {bad[0]!r} is not an environment variable's name")
    return dict(value)


def _no_controls(value: object, source: str, where: str) -> None:
    """Refuse an entry any of whose texts (keys too, at any depth) holds a
    character a terminal acts on: an entry's name, archive and cmd become the
    preset's words, which `governor presets`, `governor doctor` and a run's
    errors print for the operator; no registry entry needs an escape sequence,
    a BEL or a line break, and one that has them is writing to that terminal."""
    if isinstance(value, dict):
        for key, item in value.items():
            _no_controls(key, source, where or "a key")
            if key == "env" and isinstance(item, dict):
                # its values are set for the agent, never shown (a line break in
                # one is the variable's own): its names are checked, by `_env` too
                for name in item:
                    _no_controls(name, source, f"{where}.env")
                continue
            _no_controls(item, source, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _no_controls(item, source, f"{where}[{i}]")
    elif isinstance(value, str) and (c := acting(value)) is not None:
        raise RegistryError(
            f"{source}: `{acting_free(where)}` holds the control character {ord(c):#04x}: "
            "a registry entry's text is shown on the operator's terminal, so it is refused"
        )


def acting_free(where: str) -> str:
    """``where`` (a key path of the entry) with any character a terminal acts on shown escaped."""
    return where.encode("unicode_escape").decode("ascii") if acting(where) else where


def _text(entry: Mapping[str, Any], key: str, source: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise RegistryError(f"{source}: `{key}` must be a non-empty string")
    return value


def convert(entry: object, extra: Extra, *, source: str, pid: str | None = None) -> dict[str, Any]:
    """The preset table (as `governor.agents.presets` reads it) for the registry
    ``entry``; `RegistryError` naming ``source`` and the key for an entry the
    registry's schema refuses, or one with no distribution this machine runs."""
    if not isinstance(entry, dict):
        raise RegistryError(f"{source}: an agent.json is one JSON object")
    rid = _text(entry, "id", source)
    if not _ID.match(rid):
        raise RegistryError(f"{source}: `id` {rid!r} is not a registry id (lowercase, digits, -)")
    name = _text(entry, "name", source)
    version = _text(entry, "version", source)
    if not _VERSION.match(version):
        raise RegistryError(f"{source}: `version` {version!r} is not a semantic version")
    distribution = entry.get("distribution")
    if not isinstance(distribution, dict) or not distribution:
        raise RegistryError(f"{source}: `distribution` must name npx, uvx or binary")
    unknown = [k for k in distribution if k not in _KINDS]
    if unknown:
        raise RegistryError(f"{source}: `distribution.{unknown[0]}` is not npx, uvx or binary")
    table: dict[str, Any] = {"name": name, "registry_entry": f"{rid}@{version}"}
    if "npx" in distribution:
        how = _npx(distribution["npx"], version, source, extra, table)
    elif "uvx" in distribution:
        how = _uvx(distribution["uvx"], version, source, extra, table)
    else:
        how = _binary(distribution["binary"], source, extra, table)
    empty = [
        f"{key} ({meaning})"
        for key, given, meaning in (
            ("api_hosts", extra.api_hosts, "its sandbox reaches no model API"),
            ("home", extra.home, "it keeps no sign-in"),
            ("env", extra.env, "no credential variable reaches it"),
        )
        if not given
    ]
    table["login"] = extra.login or f"run {table['argv'][0]} once as its docs say (the registry does not say how it signs in)"
    table["home"] = list(extra.home)
    if extra.runs_code:
        table["runs_code"] = list(extra.runs_code)
    if extra.api_hosts:
        table["api_hosts"] = list(extra.api_hosts)
    if extra.env:
        table["env"] = list(extra.env)
    said = [f"Imported from the ACP registry's {rid} {version} ({how})."]
    if empty:
        said.append(f"The registry does not say, and no one gave: {'; '.join(empty)}.")
    table["notes"] = " ".join(said)
    _no_controls(entry, source, "")  # after the schema's own checks, which name the culprit better
    return {pid or rid: table}


def _args_env(dist: Mapping[str, Any], where: str, table: dict[str, Any]) -> list[str]:
    args = _strings(dist.get("args", []), f"{where}.args")
    if "env" in dist:
        set_env = _env(dist["env"], f"{where}.env")
        if set_env:
            table["set_env"] = set_env
    return args


def _npx(dist: object, version: str, source: str, extra: Extra, table: dict[str, Any]) -> str:
    where = f"{source}: `distribution.npx`"
    if not isinstance(dist, dict) or not isinstance(dist.get("package"), str):
        raise RegistryError(f"{where} must be an object with a `package`")
    spec = _NPM_SPEC.match(dist["package"])
    if spec is None:
        raise RegistryError(f"{where}: `package` {dist['package']!r} is not an npm package")
    args = _args_env(dist, where, table)
    program = extra.program or spec["name"].rsplit("/", 1)[-1]  # npx runs the bin named as the package
    table.update(argv=[program, *args], package=spec["name"], version=spec["version"] or version, npx=True)
    return f"npx {spec['name']}@{table['version']}"


def _uvx(dist: object, version: str, source: str, extra: Extra, table: dict[str, Any]) -> str:
    where = f"{source}: `distribution.uvx`"
    if not isinstance(dist, dict) or not isinstance(dist.get("package"), str):
        raise RegistryError(f"{where} must be an object with a `package`")
    spec = _PYPI_SPEC.match(dist["package"].replace("@", "==", 1) if "==" not in dist["package"] else dist["package"])
    if spec is None:
        raise RegistryError(f"{where}: `package` {dist['package']!r} is not a PyPI project")
    args = _args_env(dist, where, table)
    program = extra.program or spec["name"]  # uvx runs the script named as the project
    table.update(argv=[program, *args], pypi=spec["name"], version=spec["version"] or version)
    return f"uvx {spec['name']}=={table['version']}"


def _binary(dist: object, source: str, extra: Extra, table: dict[str, Any]) -> str:
    where = f"{source}: `distribution.binary`"
    if not isinstance(dist, dict):
        raise RegistryError(f"{where} must be an object of targets")
    here = platform_key()
    target = dist.get(here)
    if not isinstance(target, dict):
        raise RegistryError(f"{where} has no {here} target ({', '.join(map(str, dist)) or 'none'})")
    archive, cmd = target.get("archive"), target.get("cmd")
    if not isinstance(archive, str) or not isinstance(cmd, str) or not cmd.strip():
        raise RegistryError(f"{where}.{here} needs `archive` and `cmd`")
    sha = target.get("sha256")
    if not isinstance(sha, str) or not re.fullmatch(r"[0-9a-fA-F]{64}", sha):
        raise RegistryError(
            f"{where}.{here} gives no sha256: an archive nobody can check is not run"
        )
    args = _args_env(target, f"{where}.{here}", table)
    program = extra.program or os.path.basename(cmd)
    table.update(
        argv=[program, *args],
        install=f"download {archive}, check its sha256 is {sha.lower()}, and put its {cmd} on PATH as {program}",
    )
    return f"binary {here}"


def toml_table(pid: str, table: Mapping[str, Any]) -> str:
    """``[pid]`` and its keys as TOML text (strings as JSON strings, which TOML reads)."""
    lines = [f"[{pid}]"]
    for key, value in table.items():
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, dict):
            # keys quoted too: a key is text of the entry's, never TOML of its own
            text = "{ " + ", ".join(f"{spelling.dumps(k)} = {spelling.dumps(v)}" for k, v in value.items()) + " }"
        else:
            text = spelling.dumps(value)
        lines.append(f"{key} = {text}")
    return "\n".join(lines) + "\n"
