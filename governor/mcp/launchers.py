"""What a stdio MCP server really runs: launchers resolved outside, before start.

A server configured the common way, ``command = ["npx", "-y",
"@modelcontextprotocol/server-github"]``, names a *launcher*, not a program:
npx looks for the package in the ``node_modules`` of its cwd first, then in
npm's cache, and runs whatever bin of that name it finds there. Both are places
an agent can write (a governed ``npm install`` in the workspace leaves
``node_modules/.bin``), and the program found runs as the server, with the
server's token and network hosts. So:

- **npx and ``npm exec`` are resolved outside**: the package is installed by
  the governor, on the host, through `governor.sandbox.host.processes` (no lifecycle
  script, nothing of the package run), into a folder of its own under the
  governor's data folder (``.../acp-governor/mcp-servers/<digest>``, shown
  read-only in the server's sandbox), and the server runs its bin there by
  absolute path, never npx;
- **the other launchers that fetch or resolve code as they start** (pnpm and
  yarn ``dlx``, ``bunx``, ``uvx``, ``uv tool run``, ``pipx run``) are refused
  before start, naming the launcher and what to configure instead: the
  program's absolute path;
- what runs is recorded: the ``mcp-server`` record's ``program`` is the argv
  that really starts (`Launch.argv`), beside the configured ``command``.

The server's cwd is the governor's empty folder (`governor.sandbox.host.processes.empty_folder`),
never the workspace, so a relative name resolves to nothing an agent wrote.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from governor.agents.npm_installs import FETCH_TIMEOUT, data_home
from governor.sandbox.host import processes

REFUSED: Final[Mapping[tuple[str, ...], str]] = {
    ("pnpm", "dlx"): "pnpm dlx",
    ("pnpm", "exec"): "pnpm exec",
    ("yarn", "dlx"): "yarn dlx",
    ("bunx",): "bunx",
    ("bun", "x"): "bun x",
    ("uvx",): "uvx",
    ("uv", "tool", "run"): "uv tool run",
    ("uv", "run"): "uv run",
    ("pipx", "run"): "pipx run",
}
"""Launchers that fetch or resolve code from their cwd or a cache as they
start, by their leading words (the program's base name first)."""

NPX_SWITCHES: Final = frozenset(
    {"-y", "--yes", "-q", "--quiet", "-s", "--silent", "--offline", "--prefer-offline",
     "--prefer-online", "--no-audit", "--no-fund"}
)  # fmt: skip
"""npx's and ``npm exec``'s flags that take no value and change nothing of what runs."""

REGISTRY_SPEC: Final = re.compile(r"(@[a-z0-9][\w.-]*/)?[a-z0-9][\w.-]*(@[\w.^~<>=|* -]+)?\Z", re.I)
"""A package from the registry, ``name`` or ``@scope/name``, with an optional
version or range: not a path, a URL or a git repository."""


class LauncherError(Exception):
    """A server's launcher is refused, or its package could not be fetched; the
    message names the server, the launcher and what to configure instead."""


@dataclass(frozen=True)
class NpxLaunch:
    """An ``npx``/``npm exec`` command taken apart: the package, the bin named
    (None: the package's own), the arguments after it."""

    package: str
    bin: str | None
    args: tuple[str, ...]


def _words(command: Sequence[str]) -> tuple[str, ...]:
    return (os.path.basename(command[0]), *command[1:]) if command else ()


def refused(name: str, command: Sequence[str]) -> str | None:
    """Why ``command`` may not start server ``name`` (None: it may, as it is or
    once its npx package is fetched)."""
    words = _words(command)
    for lead, launcher in REFUSED.items():
        if words[: len(lead)] == lead:
            return (
                f"MCP server {name}: {launcher} fetches or resolves its program as it "
                "starts, from places an agent can write; install the server and give "
                "its program's absolute path as `command`"
            )
    try:
        npx_launch(name, command)
    except LauncherError as e:
        return str(e)
    return None


def npx_launch(name: str, command: Sequence[str]) -> NpxLaunch | None:
    """``command`` as an npx launch, None when it is not one; `LauncherError`
    for a form the governor cannot resolve outside (say which)."""
    words = _words(command)
    if words[:1] == ("npx",):
        rest = list(words[1:])
    elif words[:2] == ("npm", "exec") or words[:2] == ("npm", "x"):
        rest = list(words[2:])
    else:
        return None
    packages: list[str] = []
    while rest and rest[0].startswith("-"):
        flag = rest.pop(0)
        if flag == "--":
            break
        if flag in ("-p", "--package") and rest:
            packages.append(rest.pop(0))
        elif flag.startswith("--package="):
            packages.append(flag.split("=", 1)[1])
        elif flag not in NPX_SWITCHES:
            raise LauncherError(
                f"MCP server {name}: {words[0]} {flag} cannot be resolved before start; "
                "name one package (`npx -y PACKAGE ARGS`) or give the program's absolute path"
            )
    if len(packages) > 1 or not rest:
        raise LauncherError(
            f"MCP server {name}: {' '.join(words[:2])} needs exactly one package to run"
        )
    if packages:
        package, bin_name, args = packages[0], rest[0], tuple(rest[1:])
    else:
        package, bin_name, args = rest[0], None, tuple(rest[1:])
    if not REGISTRY_SPEC.match(package):
        raise LauncherError(
            f"MCP server {name}: {package!r} is not a package of the registry (a path, a URL "
            "or a git repository is resolved from where npx stands); give the program's "
            "absolute path"
        )
    return NpxLaunch(package, bin_name, args)


def server_folder(package: str, environ: Mapping[str, str]) -> Path:
    """The governor's own folder for ``package``: under its data folder, beside
    `governor agents install`'s."""
    digest = hashlib.sha256(package.encode()).hexdigest()[:16]
    return data_home(environ).parent / "mcp-servers" / digest


def _bin_of(folder: Path, launch: NpxLaunch) -> Path:
    """The program npx would have run: the named bin, else the package's only
    one, else the one named like the package (npm's own rule)."""
    bins = folder / "node_modules" / ".bin"
    if launch.bin is not None:
        found = bins / launch.bin
    else:
        manifest = json.loads((folder / "package.json").read_text(encoding="utf-8"))
        (installed,) = manifest.get("dependencies") or {"": ""}
        own = json.loads(
            (folder / "node_modules" / installed / "package.json").read_text(encoding="utf-8")
        )
        declared = own.get("bin")
        unscoped = installed.rsplit("/", 1)[-1]
        if isinstance(declared, str):
            found = bins / unscoped
        elif isinstance(declared, dict) and len(declared) == 1:
            found = bins / next(iter(declared))
        else:
            found = bins / unscoped
    if not os.access(found, os.X_OK):
        raise LauncherError(f"the package has no program {found.name!r}")
    return found


def _lookup(
    name: str,
    program: str,
    places: processes.Places,
    environ: Mapping[str, str],
    *,
    search: str | None = None,
    near: str | None = None,
    passed: list[str],
) -> str | None:
    """``program`` found by the host door's lookup (`processes.find_program`):
    never in a place the attempt's agent, or an earlier one, may have written,
    nor a project's own folder on ``search``; `LauncherError` naming the server
    when an absolute one is refused."""
    try:
        return processes.find_program(
            program, near=near, path=search, places=places, environ=environ, passed=passed
        )
    except processes.HostProcessRefused as e:
        raise LauncherError(f"MCP server {name}: {e}") from None


WORKSPACE: Final = "{workspace}"
"""Stands for the job's workspace in a server's arguments: the server starts
from the governor's empty folder, so ``.`` no longer names it."""


def placed(command: Sequence[str], workspace: str) -> tuple[str, ...]:
    """``command`` with `WORKSPACE` replaced in each argument (never the program)."""
    return (*command[:1], *(arg.replace(WORKSPACE, workspace) for arg in command[1:]))


async def resolve(
    name: str,
    command: Sequence[str],
    environ: Mapping[str, str],
    places: processes.Places,
    workspace: str | None = None,
) -> tuple[str, ...]:
    """The argv server ``name`` really starts with: an npx launch's package
    fetched into `server_folder` and its bin by absolute path; any other
    program by its absolute path on the servers' ``PATH`` (left as configured
    when it is not found: the sandbox then says so); `WORKSPACE` in an
    argument replaced by ``workspace``. `LauncherError` naming the server when
    the launcher is refused or the fetch fails."""
    import trio

    if workspace is not None:
        command = placed(command, workspace)
    launch = npx_launch(name, command)
    search = environ.get("PATH") or os.environ.get("PATH")
    passed: list[str] = []
    if launch is None:
        why = refused(name, command)
        if why is not None:
            raise LauncherError(why)
        if "/" in command[0]:
            return (os.path.abspath(command[0]), *command[1:])
        found = _lookup(name, command[0], places, environ, search=search, passed=passed)
        if found is None and passed:  # only where an agent may have left it: never that one
            raise LauncherError(
                f"MCP server {name}: {command[0]} was found only where an agent may have "
                f"left it: {'; '.join(passed)}; give its absolute path, or install it elsewhere"
            )
        return (found or command[0], *command[1:])
    # npm beside the npx that would have run (nvm's, wherever it is), never one of the cwd
    npx = _lookup(name, command[0], places, environ, search=search, passed=passed)
    near = os.path.dirname(npx) if npx is not None else None
    npm = _lookup(name, "npm", places, environ, near=near, passed=passed)
    if npm is None:
        raise LauncherError(
            f"MCP server {name}: npm is not installed, so {command[0]} cannot be resolved"
            + (f" (passed over: {'; '.join(passed)})" if passed else "")
        )
    folder = server_folder(launch.package, environ)
    folder.mkdir(parents=True, exist_ok=True)
    flags = ("--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
    argv = [npm, "install", "--prefix", str(folder), *processes.npm_flags(), *flags, launch.package]
    try:
        host = processes.command(argv, places=places, env=environ)
        with trio.fail_after(FETCH_TIMEOUT):
            done = await processes.run_async(host)
    except processes.HostProcessRefused as e:
        raise LauncherError(f"MCP server {name}: {e}") from None
    except trio.TooSlowError:
        raise LauncherError(
            f"MCP server {name}: npm did not fetch {launch.package} within {FETCH_TIMEOUT} s"
        ) from None
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
        tail = " | ".join(line for line in lines[-3:] if line.strip())
        raise LauncherError(f"MCP server {name}: npm could not fetch {launch.package}: {tail}")
    try:
        program = _bin_of(folder, launch)
    except (OSError, ValueError, LauncherError) as e:
        raise LauncherError(f"MCP server {name}: {launch.package}: {e}") from None
    return (str(program), *launch.args)


__all__ = [
    "REFUSED",
    "WORKSPACE",
    "LauncherError",
    "NpxLaunch",
    "npx_launch",
    "placed",
    "refused",
    "resolve",
    "server_folder",
]
