"""The agents the governor installs itself (`governor agents install`): each
preset's npm package (or, for a Python agent, its PyPI distribution in a venv
of its own) at the version `presets.toml` pins, in a folder of its own under
the governor's data directory, installed outside any sandbox.

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
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from governor.agents.presets import Preset
from governor.boundary.person_files import read_input, write_output
from governor.sandbox.host import processes

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
    """``package@version``: what npm installs (and npx runs) for `preset`;
    ``name==version`` for a Python agent (what pip installs)."""
    if preset.pypi:
        return f"{preset.pypi}=={preset.version}"
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
        """The installed package's program ``name`` (npm's link in ``.bin``, a
        Python agent's console script in its venv's ``bin``), if there."""
        bin_dir = VENV_BIN if self.preset.pypi else Path("node_modules/.bin")
        link = self.folder / bin_dir / name
        return link if self.version is not None and os.access(link, os.X_OK) else None


def installed(preset: Preset, root: Path) -> Installed:
    """What `root` holds of `preset` (read from its package's package.json)."""
    folder = root / preset.id
    version = None
    if preset.pypi:
        version = pypi_version(folder / VENV, preset.pypi) if venv_in_place(folder / VENV) else None
    elif preset.package:
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
    which: Callable[[str], str | None] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Installed:
    """Install `preset`'s pinned package into ``root/<id>`` with npm, outside any
    sandbox; nothing is fetched when that version is there already.

    npm (and a Python agent's interpreter) is found by the host door's own
    lookup (`host_lookup`), never ``shutil.which``: the ``PATH`` of a person in
    their project (an activated ``.venv/bin``, direnv's ``node_modules/.bin``)
    holds what an earlier attempt there may have left.

    Raises `InstallError` naming the agent when npm is missing or fails (its
    last lines of output quoted), or when the folder does not hold the pinned
    version afterwards.
    """
    before = installed(preset, root)
    wanted = spec(preset)
    if before.current:
        say(f"{preset.id}: {wanted} is installed in {before.folder}")
        return before
    passed: list[str] = []
    which = which or host_lookup(environ, passed)
    if preset.pypi:
        return _install_pypi(preset, root, say=say, which=which, environ=environ, passed=passed)
    npm = which("npm")
    if npm is None:
        raise InstallError(
            f"{preset.id}: npm is not on PATH (install Node.js >= 18, which brings it)"
            + _passed_over(passed)
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


def host_lookup(
    environ: Mapping[str, str] | None, passed: list[str]
) -> Callable[[str], str | None]:
    """A program's lookup for an install on the host: `processes.find_program`
    over the system folders and the trusted entries of ``environ``'s ``PATH``;
    each program it passed over is added to ``passed``."""
    env = os.environ if environ is None else environ

    def which(name: str) -> str | None:
        try:
            return processes.find_program(name, path=env.get("PATH"), environ=env, passed=passed)
        except processes.HostProcessRefused as e:
            passed.append(str(e))
            return None

    return which


def _passed_over(passed: list[str]) -> str:
    """The programs the lookup passed over, for an error that says none was found."""
    if not passed:
        return ""
    return "; passed over, as a host process could not trust them: " + "; ".join(passed)


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

    from governor.policies.capability import Capability
    from governor.sandbox import BwrapUnavailable, Profile, ProfileError
    from governor.sandbox.run.runner import Command, run

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


VENV: Final = "venv"
"""A Python agent's venv, in its folder: ``<data>/agents/<id>/venv``."""
VENV_BIN: Final = Path(VENV) / "bin"
LOCK: Final = "requirements.lock"
"""What a Python agent's install resolved: every distribution in its venv,
``name==version --hash=sha256:...`` (pip's requirements format), written
from pip's installation report next to the venv."""
PYTHON_VARIABLE: Final = "ACP_GOVERNOR_PYTHON"
"""Names the interpreter a Python agent's venv is made with (else the newest
``python3.N`` on ``PATH`` that is new enough)."""
PIP_FLAGS: Final = (
    "--only-binary", ":all:",
    "--no-input",
    "--disable-pip-version-check",
    "--no-warn-script-location",
)  # fmt: skip
"""Wheels only: pip builds nothing, so no ``setup.py`` nor build backend of any
package runs on the host (a release with a dependency that has no wheel for
this platform fails to install, naming it, rather than be built)."""


def _normal(name: str) -> str:
    """A distribution name as PEP 503 compares them (``Mistral_Vibe`` is ``mistral-vibe``)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def pypi_version(venv: Path, name: str) -> str | None:
    """The version of distribution ``name`` in ``venv`` (from its ``.dist-info``
    folder's ``METADATA``), or None when it is not there."""
    wanted = _normal(name)
    for meta in sorted(venv.glob("lib/python3*/site-packages/*.dist-info/METADATA")):
        found_name = found_version = None
        try:
            with meta.open(encoding="utf-8", errors="replace") as f:
                for line in f:
                    if not line.strip():
                        break
                    key, _, value = line.partition(":")
                    if key == "Name":
                        found_name = value.strip()
                    elif key == "Version":
                        found_version = value.strip()
        except OSError:
            continue
        if found_name is not None and _normal(found_name) == wanted and found_version:
            return found_version
    return None


def venv_in_place(venv: Path) -> bool:
    """Whether ``venv`` is where it was made: its console scripts name its
    ``bin/python`` by absolute path (pip's own, ``bin/pip``, tells), so a data
    folder moved or copied elsewhere holds programs that no longer start, and
    counts as not installed (`install` makes it anew)."""
    try:
        with (venv / "bin" / "pip").open("rb") as f:
            first = f.readline().strip()
    except OSError:
        return False
    named = first.removeprefix(b"#!")
    return named.startswith(os.fsencode(venv / "bin" / "python")) and os.path.exists(named)


def _minor(version: str) -> tuple[int, int]:
    major, _, minor = version.partition(".")
    return int(major), int(minor.partition(".")[0] or 0)


def find_python(
    preset: Preset,
    environ: Mapping[str, str],
    which: Callable[[str], str | None] | None = None,
    passed: list[str] | None = None,
) -> str:
    """An interpreter at least as new as the preset's `python`: the one
    ``$ACP_GOVERNOR_PYTHON`` names, else the newest ``python3.N`` (then
    ``python3``) found on ``PATH`` that runs and is new enough. Each candidate
    is asked its version through the one door (`governor.sandbox.host.processes`), and
    the path it reports (``sys.executable``: the interpreter, not a version
    manager's shim) is the one used. `InstallError` naming what was found.
    ``which``: the lookup (default: `host_lookup`, which adds to ``passed``
    what it passed over)."""
    passed = [] if passed is None else passed
    which = which or host_lookup(environ, passed)
    oldest = _minor(preset.python or "3.0")
    named = environ.get(PYTHON_VARIABLE, "")
    candidates = (
        [c for c in [named if os.path.isabs(named) else which(named)] if c is not None]
        if named
        else [c for n in [f"python3.{m}" for m in range(30, oldest[1] - 1, -1)] + ["python3"]
              if (c := which(n)) is not None]
    )  # fmt: skip
    seen: list[str] = []
    for candidate in dict.fromkeys(candidates):
        try:
            host = processes.command(
                [os.path.abspath(candidate), "-I", "-c",
                 "import sys; print('%d.%d' % sys.version_info[:2]); print(sys.executable)"],
                env=environ,
            )  # fmt: skip
            done = processes.run(host, timeout=60)
        except (processes.HostProcessRefused, OSError, subprocess.TimeoutExpired) as e:
            seen.append(f"{candidate} ({e})")
            continue
        lines = done.stdout.split()
        if done.returncode != 0 or len(lines) != 2:
            seen.append(f"{candidate} (does not run)")
            continue
        if _minor(lines[0]) >= oldest and os.path.isabs(lines[1]):
            return lines[1]
        seen.append(f"{candidate} ({lines[0]})")
    where = f"${PYTHON_VARIABLE}" if named else "PATH"
    raise InstallError(
        f"{preset.id}: {preset.pypi}=={preset.version} needs Python >= {preset.python}, and "
        f"{where} has none ({', '.join(seen) or 'no python3'}): set {PYTHON_VARIABLE} to one"
        + _passed_over(passed)
    )


def _install_pypi(
    preset: Preset,
    root: Path,
    *,
    say: Callable[[str], None],
    which: Callable[[str], str | None],
    environ: Mapping[str, str] | None,
    passed: list[str],
) -> Installed:
    """A venv of its own in ``root/<id>/venv``, made with an interpreter new
    enough (`find_python`), and the pinned release installed in it by that
    venv's pip, wheels only (`PIP_FLAGS`), both through the one door; then
    `LOCK` written from pip's report. A venv holding another version is made
    anew: its dependencies are resolved again, not upgraded in place."""
    assert preset.pypi is not None
    env = dict(os.environ if environ is None else environ)
    wanted = spec(preset)
    folder = root / preset.id
    venv = folder / VENV
    python = find_python(preset, env, which, passed)
    folder.mkdir(parents=True, exist_ok=True)
    if folder.is_symlink() or venv.is_symlink():
        raise InstallError(f"{preset.id}: {folder} or its venv is a symbolic link: remove it")
    if venv.exists():
        shutil.rmtree(venv)
    report = folder / "pip-report.json"
    for made in (report, folder / LOCK):  # never written through: a link left here is removed
        made.unlink(missing_ok=True)
    say(f"{preset.id}: installing {wanted} into {venv} (Python {python}) ...")
    started = time.monotonic()
    steps = (
        ("python -m venv", [python, "-I", "-m", "venv", str(venv)]),
        ("pip install", [str(venv / "bin" / "python"), "-I", "-m", "pip", "install",
                         *PIP_FLAGS, "--report", str(report), wanted]),
    )  # fmt: skip
    for what, argv in steps:
        try:
            done = processes.run(processes.command(argv, env=env))
        except processes.HostProcessRefused as e:
            raise InstallError(f"{preset.id}: {e}") from None
        if done.returncode != 0:
            lines = [x for x in done.stderr.strip().splitlines() if x.startswith("ERROR")]
            tail = " | ".join((lines or done.stderr.strip().splitlines())[-3:])
            raise InstallError(f"{preset.id}: {what} {wanted} failed ({done.returncode}): {tail}")
    try:
        write_output(folder / LOCK, lock_lines(json.loads(read_input(report))))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise InstallError(f"{preset.id}: pip's report of {wanted} is unreadable: {e}") from None
    finally:
        report.unlink(missing_ok=True)
    after = installed(preset, root)
    if not after.current:
        raise InstallError(
            f"{preset.id}: pip installed {after.version or 'nothing'} in {venv}, "
            f"not {preset.version}"
        )
    say(f"{preset.id}: {wanted} installed in {time.monotonic() - started:.0f} s")
    return after


def lock_lines(report: Mapping[str, object]) -> str:
    """`LOCK`'s text from pip's installation report (``pip install --report``):
    one ``name==version --hash=sha256:...`` line per distribution, sorted, with
    a header saying where it came from."""
    lines = []
    items = report["install"]
    assert isinstance(items, list)
    for item in items:
        meta = item["metadata"]
        hashes = item.get("download_info", {}).get("archive_info", {}).get("hashes", {})
        pin = f"{_normal(meta['name'])}=={meta['version']}"
        lines.append(f"{pin} --hash=sha256:{hashes['sha256']}" if "sha256" in hashes else pin)
    head = "# resolved by `governor agents install` (pip --only-binary :all:); pip's requirements format\n"
    return head + "".join(f"{line}\n" for line in sorted(lines))


FETCH_TIMEOUT: Final = 900
"""Seconds npm may take to fetch an agent for npx (the largest are ~100 MB)."""


def npx_folder(cache: str, package: str) -> Path:
    """Where npx keeps ``package`` (``name@version``, as npx is given it):
    ``<cache>/_npx/<the first 16 hex digits of its SHA-512>``, as npm's
    libnpmexec names it for one package."""
    digest = hashlib.sha512(package.encode()).hexdigest()[:16]
    return Path(cache) / "_npx" / digest


async def fetch_for_npx(
    package: str,
    npx: str,
    environ: Mapping[str, str],
    places: processes.Places | None = None,
    fetching: Callable[[str], None] | None = None,
) -> None:
    """Put ``package`` (``name@version``) in npm's cache and npx's install folder,
    outside any sandbox, with the agent's ``$HOME`` (so the same ``~/.npm``), so
    that the agent's ``npx --offline -y <package>`` (`governor.agents.presets.resolve`)
    finds it there: its sandbox cannot reach the registry.

    The fetch runs nothing of any package: ``npm cache add`` (the metadata
    npx reads) and ``npm install --ignore-scripts`` into npx's own folder for
    it (`npx_folder`), from the governor's empty
    folder, through `governor.sandbox.host.processes` (``npm exec ... -- true`` would
    run ``true`` through a script shell looked up on a ``PATH`` that starts
    with that folder's ``node_modules/.bin``, and the cwd's). ``places``: where
    the agent may have written (its roots, its writable home folders), refused
    as the cwd or on the ``PATH``. Raises `InstallError` naming the package
    when npm is refused, fails or takes longer than `FETCH_TIMEOUT`.
    ``fetching`` is told the package when npx's folder does not hold it yet (a
    first start: up to ~100 MB from the registry, a minute or more, with
    nothing else to show for it); a later start, from the cache, says nothing.
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
        name = package.rsplit("@", 1)[0] if package.rfind("@") > 0 else package
        if fetching is not None and not (folder / "node_modules" / name / "package.json").is_file():
            fetching(package)
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
    "LOCK",
    "NPM_FLAGS",
    "PIP_FLAGS",
    "PYTHON_VARIABLE",
    "VENV",
    "InstallError",
    "Installed",
    "data_home",
    "fetch_for_npx",
    "find_python",
    "host_lookup",
    "install",
    "installed",
    "lock_lines",
    "npx_folder",
    "pypi_version",
    "run_install_scripts",
    "spec",
    "venv_in_place",
    "with_install_scripts",
]
