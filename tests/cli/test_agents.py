"""`governor agents`: a real npm install of a small pinned package into a temporary
data directory, npx's fetch outside the sandbox, and what the CLI says."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from governor.agents.npm_installs import InstallError, data_home, fetch_for_npx, install, installed
from governor.agents.presets import Preset, load_presets

SMALL = """
[sdk]
name = "The ACP SDK (small, no dependencies)"
argv = ["acp-sdk-example"]
login = "nothing"
home = []
package = "@agentclientprotocol/sdk"
version = "1.9.0"
"""

needs_npm = pytest.mark.skipif(
    shutil.which("npm") is None and not os.environ.get("CI"), reason="npm is not installed"
)


def _sdk(version: str = "1.9.0") -> Preset:
    return load_presets(SMALL.replace("1.9.0", version), source="test.toml")["sdk"]


def test_the_data_directory_follows_xdg_data_home_when_it_is_absolute() -> None:
    assert data_home({"XDG_DATA_HOME": "/d", "HOME": "/h"}) == Path("/d/acp-governor/agents")
    relative = data_home({"XDG_DATA_HOME": "rel", "HOME": "/h"})
    assert relative == Path("/h/.local/share/acp-governor/agents")


@needs_npm
def test_an_install_puts_the_pinned_version_with_its_integrity_and_is_not_repeated(
    tmp_path: Path,
) -> None:
    said: list[str] = []
    done = install(_sdk(), tmp_path, say=said.append)
    assert done.version == "1.9.0" and done.current
    assert said[0].startswith("sdk: installing @agentclientprotocol/sdk@1.9.0 into ")
    assert said[-1].startswith("sdk: @agentclientprotocol/sdk@1.9.0 installed in ")
    lock = json.loads((tmp_path / "sdk" / "package-lock.json").read_text())
    entry = lock["packages"]["node_modules/@agentclientprotocol/sdk"]
    assert entry["version"] == "1.9.0" and entry["integrity"].startswith("sha512-")
    # there already: npm is not even looked for
    again = install(_sdk(), tmp_path, say=said.append, which=lambda name: None)
    assert again.version == "1.9.0" and said[-1].endswith(f"is installed in {tmp_path / 'sdk'}")
    # a new pin is not that install: an update is due
    assert not installed(_sdk("1.8.0"), tmp_path).current


@needs_npm
def test_a_version_the_registry_does_not_have_fails_naming_the_agent(tmp_path: Path) -> None:
    with pytest.raises(InstallError, match=r"^sdk: npm install @agentclientprotocol/sdk@0\.0\.1 failed"):
        install(_sdk("0.0.1"), tmp_path, say=lambda line: None)
    assert installed(_sdk("0.0.1"), tmp_path).version is None


def test_without_npm_an_install_says_so(tmp_path: Path) -> None:
    with pytest.raises(InstallError, match="sdk: npm is not on PATH"):
        install(_sdk(), tmp_path, say=lambda line: None, which=lambda name: None)


@needs_npm
async def test_npx_runs_offline_what_was_fetched_outside_first(tmp_path: Path) -> None:
    npx = shutil.which("npx")
    assert npx is not None
    environ = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    run = [npx, "--offline", "-y", "semver@7.6.3", "1.2.3"]
    before = subprocess.run(run, env=environ, capture_output=True, text=True, check=False)
    assert before.returncode != 0  # offline, nothing fetched yet: npx cannot run it
    await fetch_for_npx("semver@7.6.3", npx, environ)
    after = subprocess.run(run, env=environ, capture_output=True, text=True, check=False)
    assert (after.returncode, after.stdout.strip()) == (0, "1.2.3"), after.stderr


def _governor(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "governor.cli", *args], env=env, capture_output=True, text=True,
        check=False,
    )  # fmt: skip


def test_list_and_presets_say_an_agent_runs_from_the_governors_install(tmp_path: Path) -> None:
    data = tmp_path / "data"
    folder = data / "acp-governor" / "agents" / "claude" / "node_modules"
    manifest = folder / "@agentclientprotocol" / "claude-agent-acp" / "package.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text('{"version": "0.0.7"}')
    program = folder / ".bin" / "claude-agent-acp"
    program.parent.mkdir()
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_DATA_HOME": str(data)}
    listed = _governor("agents", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    claude = next(line for line in listed.stdout.splitlines() if line.startswith("claude "))
    assert "0.0.7 (pinned: " in claude and "from its install" in claude, claude
    shown = _governor("presets", "--json", env=env)
    row = next(r for r in json.loads(shown.stdout)["presets"] if r["id"] == "claude")
    assert (row["found"], row["version"], row["argv"]) == ("installed", "0.0.7", [str(program)])
    # not on PATH: the login line a person copies names the program where it is
    assert row["login"].startswith(f"{program} --cli auth login"), row["login"]
    # not installed there: another agent is not claimed to be
    codex = next(r for r in json.loads(shown.stdout)["presets"] if r["id"] == "codex")
    assert codex["found"] in ("npx", None) and codex["version"] is None


def test_install_refuses_an_unknown_or_non_npm_agent_by_name(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path)}
    unknown = _governor("agents", "install", "gpt", env=env)
    assert unknown.returncode == 2 and "no agent `gpt`" in unknown.stderr
    goose = _governor("agents", "install", "goose", env=env)
    assert goose.returncode == 2 and "goose is not an npm or a PyPI package" in goose.stderr
    none = _governor("agents", "install", env=env)
    assert none.returncode == 2 and "name the agents to install (claude, codex" in none.stderr


def test_presets_name_what_in_an_agent_s_home_folders_its_sandbox_holds(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    shown = _governor("presets", "--json", env=env)
    claude = next(r for r in json.loads(shown.stdout)["presets"] if r["id"] == "claude")
    assert str(tmp_path / ".claude" / "settings.json") in claude["holds"]
    assert str(tmp_path / ".claude" / "hooks") in claude["holds"]
    table = _governor("presets", env=env).stdout
    assert f"held there (runs code later: read-only, or a throwaway copy): {tmp_path}/.claude.json" in table
    # a variable that moves a home folder moves what in it is held too
    moved = _governor("presets", "--json", env=env | {"XDG_CONFIG_HOME": str(tmp_path / "cfg")})
    opencode = next(r for r in json.loads(moved.stdout)["presets"] if r["id"] == "opencode")
    assert str(tmp_path / "cfg" / "opencode" / "plugin") in opencode["holds"], opencode["holds"]
    assert not any(h.startswith(str(tmp_path / ".config")) for h in opencode["holds"]), opencode["holds"]
