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

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from governor.presets import Preset

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
    before.folder.mkdir(parents=True, exist_ok=True)
    say(f"{preset.id}: installing {wanted} into {before.folder} ...")
    started = time.monotonic()
    done = subprocess.run(
        [npm, "install", "--prefix", str(before.folder), *NPM_FLAGS, wanted],
        env=dict(os.environ if environ is None else environ),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        tail = " | ".join(line for line in done.stderr.strip().splitlines()[-3:] if line.strip())
        raise InstallError(f"{preset.id}: npm install {wanted} failed ({done.returncode}): {tail}")
    after = installed(preset, root)
    if not after.current:
        raise InstallError(
            f"{preset.id}: npm installed {after.version or 'nothing'} in {after.folder}, "
            f"not {preset.version}"
        )
    say(f"{preset.id}: {wanted} installed in {time.monotonic() - started:.0f} s")
    return after


FETCH_TIMEOUT: Final = 900
"""Seconds npm may take to fetch an agent for npx (the largest are ~100 MB)."""


async def fetch_for_npx(package: str, npx: str, environ: Mapping[str, str]) -> None:
    """Put ``package`` (``name@version``) in npm's cache and npx's install folder,
    outside any sandbox, with the agent's ``$HOME`` (so the same ``~/.npm``), so
    that the agent's ``npx --offline -y <package>`` (`governor.presets.resolve`)
    finds it there: its sandbox cannot reach the registry.

    ``npm exec --package=<package> -- true`` installs it as npx would (the same
    folder under ``~/.npm/_npx``), and runs ``true``, not the agent: nothing of
    the agent runs outside its sandbox. Raises `InstallError` naming the package
    when npm fails or takes longer than `FETCH_TIMEOUT`.
    """
    import trio

    npm = str(Path(npx).with_name("npm"))
    flags = ("--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error")
    argv = [npm, "exec", "--yes", *flags, f"--package={package}", "--", "true"]
    with trio.move_on_after(FETCH_TIMEOUT) as waited:
        done = await trio.run_process(
            argv, env=dict(environ), stdin=subprocess.DEVNULL, capture_stdout=True,
            capture_stderr=True, check=False,
        )  # fmt: skip
    if waited.cancelled_caught:
        raise InstallError(f"npm did not fetch {package} within {FETCH_TIMEOUT} s")
    if done.returncode != 0:
        lines = done.stderr.decode("utf-8", errors="replace").strip().splitlines()
        tail = " | ".join(line for line in lines[-3:] if line.strip())
        raise InstallError(f"npm could not fetch {package} for npx ({done.returncode}): {tail}")


__all__ = [
    "FETCH_TIMEOUT",
    "NPM_FLAGS",
    "InstallError",
    "Installed",
    "data_home",
    "fetch_for_npx",
    "install",
    "installed",
    "spec",
]
