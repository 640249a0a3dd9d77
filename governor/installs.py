"""The agents the governor installs itself (`governor agents install`): each
preset's npm package at the version `presets.toml` pins, in a folder of its
own under the governor's data directory, installed outside any sandbox.

Why not `npx -y <package>` at every run: npx fetches whatever the registry
serves that day, and it does so from inside the agent's sandbox, whose only way
out is the model API. An install made here, by npm, checks each tarball against
the integrity the registry publishes and records it in the folder's
``package-lock.json``; the agent then runs from that folder, offline.

Everything here but `install` is a path computation or a file read; `install`
runs npm, once per agent, and says what it does on one progress line, and
`fetch_for_npx`, the only async function, imports trio itself: `governor
presets` reads the installs and must answer without it.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from governor.presets import Preset
from sandbox.host import processes

NPM_FLAGS: Final = (
    "--no-audit",
    "--no-fund",
    "--save-exact",
    "--prefer-offline",
    "--loglevel=error",
)
"""What `.ci/agents` passes too: the exact version saved in the folder's
package.json and lock (with each tarball's integrity), npm's cache used before
the registry, and only errors printed."""


class InstallError(RuntimeError):
    """npm is missing, or `npm install` failed: the message names the agent and says why."""


def data_home(environ: Mapping[str, str]) -> Path:
    """``$XDG_DATA_HOME/acp-governor/agents`` (absolute values only, as the XDG
    spec says), else ``~/.local/share/acp-governor/agents``."""
    xdg = environ.get("XDG_DATA_HOME", "")
    base = (
        Path(xdg)
        if os.path.isabs(xdg)
        else Path(environ.get("HOME") or Path.home()) / ".local/share"
    )
    return base / "acp-governor" / "agents"


def spec(preset: Preset) -> str:
    """``package@version``: what npm installs (and npx runs) for `preset`."""
    if not preset.package:
        raise InstallError(f"{preset.id} is not an npm package: {preset.install}")
    return f"{preset.package}@{preset.version}" if preset.version else preset.package


@dataclass(frozen=True)
class Installed:
    """An agent the governor installed: its folder, the version there, the pin."""

    preset: Preset
    folder: Path
    version: str | None
    """The version of the package in the folder; None when it is not installed."""

    @property
    def current(self) -> bool:
        """Installed at the version `presets.toml` pins (or at all, with no pin)."""
        return self.version is not None and self.preset.version in (None, self.version)

    def program(self, name: str) -> Path | None:
        """The installed package's program ``name`` (npm's link in ``.bin``), if there."""
        link = self.folder / "node_modules" / ".bin" / name
        return link if self.version is not None and os.access(link, os.X_OK) else None


def installed(preset: Preset, root: Path) -> Installed:
    """What `root` holds of `preset` (read from its package's package.json)."""
    folder = root / preset.id
    version = None
    if preset.package:
        manifest = folder / "node_modules" / preset.package / "package.json"
        try:
            found = json.loads(manifest.read_text(encoding="utf-8")).get("version")
        except (OSError, ValueError):
            found = None
        version = found if isinstance(found, str) and found else None
    return Installed(preset, folder, version)


def install(
    preset: Preset,
    root: Path,
    *,
    say: Callable[[str], None] = print,
    which: Callable[[str], str | None] = shutil.which,
    environ: Mapping[str, str] | None = None,
) -> Installed:
    """Install `preset`'s pinned package into ``root/<id>`` with npm, outside any
    sandbox; nothing is fetched when that version is there already.

    Raises `InstallError` naming the agent when npm is missing or fails (its
    last lines of output quoted), or when the folder does not hold the pinned
    version afterwards.
    """
    before = installed(preset, root)
    wanted = spec(preset)
    if before.current:
        say(f"{preset.id}: {wanted} is installed in {before.folder}")
        return before
    npm = which("npm")
    if npm is None:
        raise InstallError(
            f"{preset.id}: npm is not on PATH (install Node.js >= 18, which brings it)"
        )
    environ = dict(os.environ if environ is None else environ)
    before.folder.mkdir(parents=True, exist_ok=True)
    try:
        host = processes.command(
            [os.path.abspath(npm), "install", "--prefix", str(before.folder),
             *processes.npm_flags(), *NPM_FLAGS, wanted],
            env=environ,
        )  # fmt: skip
    except processes.HostProcessRefused as e:
        raise InstallError(f"{preset.id}: {e}") from None
    say(f"{preset.id}: installing {wanted} into {before.folder} ...")
    started = time.monotonic()
    done = processes.run(host)
    if done.returncode != 0:
        tail = " | ".join(line for line in done.stderr.strip().splitlines()[-3:] if line.strip())
        raise InstallError(f"{preset.id}: npm install {wanted} failed ({done.returncode}): {tail}")
    try:
        import trio

        trio.run(run_install_scripts, before.folder, os.path.abspath(npm), environ)
    except InstallError as e:
        raise InstallError(f"{preset.id}: {e}") from None
    after = installed(preset, root)
    if not after.current:
        raise InstallError(
            f"{preset.id}: npm installed {after.version or 'nothing'} in {after.folder}, "
            f"not {preset.version}"
        )
    say(f"{preset.id}: {wanted} installed in {time.monotonic() - started:.0f} s")
    return after


INSTALL_SCRIPTS: Final = ("preinstall", "install", "postinstall")
"""The lifecycle scripts npm runs when it installs a package (``prepare`` runs
only for a git or local one, which the governor never fetches)."""


def with_install_scripts(folder: Path) -> list[str]:
    """The packages under ``folder/node_modules`` that declare an install script
    (opencode's ``postinstall`` puts its platform binary in place)."""
    modules = folder / "node_modules"
    manifests = [*modules.glob("*/package.json"), *modules.glob("@*/*/package.json")]
    found = []
    for manifest in manifests:
        try:
            scripts = json.loads(manifest.read_text(encoding="utf-8")).get("scripts") or {}
        except (OSError, ValueError):
            continue
        if isinstance(scripts, dict) and any(scripts.get(k) for k in INSTALL_SCRIPTS):
            found.append(str(manifest.parent.relative_to(modules)))
    return sorted(found)


async def run_install_scripts(folder: Path, npm: str, environ: Mapping[str, str]) -> None:
    """Run the install scripts of what ``folder`` holds, if any declares one, in a
    sandbox: only ``folder`` writable, no network, the homes hidden, npm's
    script shell ``/bin/sh``. The host never runs a package's code (the
    install itself was ``--ignore-scripts``); an agent whose package needs its
    script still works. `InstallError` naming the packages when it fails."""
    import trio

    from policies.capability import Capability
    from sandbox import BwrapUnavailable, Profile, ProfileError
    from sandbox.run.runner import Command, run

    packages = with_install_scripts(folder)
    if not packages:
        return
    profile = Profile(
        capability=Capability.EDIT_WORKSPACE,
        workspace=folder,
        network=False,
        env={"HOME": environ.get("HOME", "/")} if os.path.isabs(environ.get("HOME", "")) else {},
        path=processes.host_path(os.path.dirname(npm)),
        cwd=folder,
        toolchains=False,
    )
    argv = [npm, "rebuild", "--foreground-scripts", f"--script-shell={processes.SCRIPT_SHELL}",
            "--no-audit", "--no-fund", "--loglevel=error"]  # fmt: skip
    try:
        with trio.fail_after(FETCH_TIMEOUT):
            result = await run(
                Command.of(argv), profile, bwrap=os.environ.get("ACP_GOVERNOR_BWRAP") or None
            )
    except trio.TooSlowError:
        raise InstallError(f"the install scripts of {', '.join(packages)} took too long") from None
    except (BwrapUnavailable, ProfileError, OSError) as e:
        raise InstallError(
            f"the install scripts of {', '.join(packages)} need a sandbox, which could not "
            f"be started: {e}"
        ) from None
    if result.status.shell_code != 0:
        tail = " | ".join(line for line in result.text.strip().splitlines()[-3:] if line.strip())
        raise InstallError(
            f"the install scripts of {', '.join(packages)} failed in their sandbox "
            f"({result.status.shell_code}): {tail}"
        )


FETCH_TIMEOUT: Final = 900
"""Seconds npm may take to fetch an agent for npx (the largest are ~100 MB)."""


def npx_folder(cache: str, package: str) -> Path:
    """Where npx keeps ``package`` (``name@version``, as npx is given it):
    ``<cache>/_npx/<the first 16 hex digits of its SHA-512>``, as npm's
    libnpmexec names it for one package."""
    digest = hashlib.sha512(package.encode()).hexdigest()[:16]
    return Path(cache) / "_npx" / digest


async def fetch_for_npx(
    package: str, npx: str, environ: Mapping[str, str], places: processes.Places | None = None
) -> None:
    """Put ``package`` (``name@version``) in npm's cache and npx's install folder,
    outside any sandbox, with the agent's ``$HOME`` (so the same ``~/.npm``), so
    that the agent's ``npx --offline -y <package>`` (`governor.presets.resolve`)
    finds it there: its sandbox cannot reach the registry.

    The fetch runs nothing of any package: ``npm cache add`` (the metadata
    npx reads) and ``npm install --ignore-scripts`` into npx's own folder for
    it (`npx_folder`), from the governor's empty
    folder, through `sandbox.host.processes` (``npm exec ... -- true`` would
    run ``true`` through a script shell looked up on a ``PATH`` that starts
    with that folder's ``node_modules/.bin``, and the cwd's). ``places``: where
    the agent may have written (its roots, its writable home folders), refused
    as the cwd or on the ``PATH``. Raises `InstallError` naming the package
    when npm is refused, fails or takes longer than `FETCH_TIMEOUT`.
    """
    import trio

    npm = str(Path(npx).with_name("npm"))
    flags = ("--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
    where = places if places is not None else processes.Places.of(environ=environ)
    with trio.move_on_after(FETCH_TIMEOUT) as waited:
        try:
            ask = processes.command([npm, "config", "get", "cache"], places=where, env=environ)
            found = await processes.run_async(ask)
        except processes.HostProcessRefused as e:
            raise InstallError(f"npm could not fetch {package} for npx: {e}") from None
        cache = found.stdout.decode(errors="replace").strip()
        if found.returncode != 0 or not os.path.isabs(cache):
            said = found.stderr.decode(errors="replace").strip()[-300:]
            raise InstallError(f"npm could not say where its cache is ({found.returncode}): {said}")
        folder = npx_folder(cache, package)
        folder.mkdir(parents=True, exist_ok=True)
        # the same door as `ask`, so not refused: first the package's metadata
        # as npx will ask for it, then its folder (neither runs a script)
        for argv in (
            [npm, "cache", "add", *processes.npm_flags(), *flags, package],
            [npm, "install", "--prefix", str(folder), *processes.npm_flags(), *flags, package],
        ):
            done = await processes.run_async(processes.command(argv, places=where, env=environ))
            if done.returncode != 0:
                break
    if waited.cancelled_caught:
        raise InstallError(f"npm did not fetch {package} within {FETCH_TIMEOUT} s")
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
        tail = " | ".join(line for line in lines[-3:] if line.strip())
        raise InstallError(f"npm could not fetch {package} for npx ({done.returncode}): {tail}")
    await run_install_scripts(folder, npm, environ)


__all__ = [
    "FETCH_TIMEOUT",
    "NPM_FLAGS",
    "InstallError",
    "Installed",
    "data_home",
    "fetch_for_npx",
    "install",
    "installed",
    "npx_folder",
    "run_install_scripts",
    "spec",
    "with_install_scripts",
]
