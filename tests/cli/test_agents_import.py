"""An agent we do not ship, added with a file (issue 39): `governor agents
import agent.json` reads an ACP registry entry (its schema's shape: id, name,
version, distribution as npx, uvx or binary) into the operator's own presets
file, pinned at the entry's version, with the entry's ``env`` set for the
agent; what the registry does not say (model API hosts, home folders,
credential variables) is never guessed, and is said in the preset's notes.

The operator's presets file names programs the governor starts, so it is read
only when it is the operator's alone, never through a link, and never when a
preset's home folders (what an agent may write) hold it.

Through the real console script, with an empty $HOME; the imported agent is
the demo agent behind a program named as the entry's package, on PATH, run
through the governor in its sandbox."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

GOVERNOR = str(Path(sys.executable).parent / "governor")
DEMO = Path(__file__).resolve().parents[2] / "governor" / "agents" / "demo.py"
SAID = "hello from agent.json"


def entry(**distribution: Any) -> dict[str, Any]:
    return {
        "id": "demo-registry",
        "name": "Demo from a registry entry",
        "version": "1.2.3",
        "description": "the demo agent, as the registry would list it",
        "distribution": distribution
        or {
            "npx": {
                "package": "@example/demo-registry-agent@1.2.3",
                "args": ["--steps", "1"],
                "env": {"REGISTRY_SAID": SAID},
            }
        },
    }


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """An empty $HOME, and on PATH the program the entry's package installs:
    it runs the demo agent only when the entry's env reached it."""
    (tmp_path / "home").mkdir()
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    program = bin_dir / "demo-registry-agent"
    program.write_text(
        "#!/bin/sh\n"
        f'[ "$REGISTRY_SAID" = "{SAID}" ] || {{ echo "REGISTRY_SAID unset" >&2; exit 9; }}\n'
        f'exec {sys.executable} {DEMO} "$@"\n'
    )
    program.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("XDG_")}
    env.update(HOME=str(tmp_path / "home"), PATH=f"{bin_dir}:{os.environ['PATH']}")
    return env


def governor(env: dict[str, str], *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [GOVERNOR, *args], capture_output=True, text=True, timeout=180, env=env, cwd=cwd
    )


def presets_file(env: dict[str, str]) -> Path:
    return Path(env["HOME"]) / ".config" / "acp-governor" / "presets.toml"


def test_a_registry_entry_becomes_a_preset_the_governor_runs_with_the_entrys_env(
    home: dict[str, str], tmp_path: Path
) -> None:
    agent_json = tmp_path / "agent.json"
    agent_json.write_text(json.dumps(entry()))
    added = governor(home, "agents", "import", str(agent_json), "--home", "~/.demo-registry")
    assert added.returncode == 0, added.stderr
    assert "added demo-registry" in added.stdout and "api_hosts" in added.stdout, added.stdout
    assert presets_file(home).stat().st_mode & 0o777 == 0o600
    listed = json.loads(governor(home, "presets", "--json").stdout)["presets"]
    (mine,) = [p for p in listed if p["id"] == "demo-registry"]
    assert mine["found"] == "PATH" and mine["argv"][1:] == ["--steps", "1"], mine
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ran = governor(home, "run", "--agent", "demo-registry", "--json", "hi", cwd=workspace)
    outcome = json.loads(ran.stdout)
    assert (ran.returncode, outcome["status"]) == (0, "completed"), ran.stderr[-2000:]
    assert outcome["acp"]["preset"] == "demo-registry" and outcome["acp"]["sandboxed_agent"]
    assert outcome["acp"]["tally"]["asked"] >= 1  # its requests went through the gate


def test_without_the_entrys_env_the_same_program_does_not_start(
    home: dict[str, str], tmp_path: Path
) -> None:
    plain = entry(npx={"package": "@example/demo-registry-agent@1.2.3", "args": ["--steps", "1"]})
    agent_json = tmp_path / "agent.json"
    agent_json.write_text(json.dumps(plain))
    assert governor(home, "agents", "import", str(agent_json)).returncode == 0
    workspace = tmp_path / "ws"
    workspace.mkdir()
    ran = governor(home, "run", "--agent", "demo-registry", "--json", "hi", cwd=workspace)
    assert json.loads(ran.stdout)["status"] == "failed", ran.stdout[-2000:]


def test_a_uvx_entry_pins_its_pypi_release_and_a_binary_one_names_its_archive_and_sha256(
    home: dict[str, str], tmp_path: Path
) -> None:
    uvx = entry(uvx={"package": "fast-agent-acp==0.10.1", "args": ["-x"]})
    uvx["id"] = "fa"
    sha = "ab" * 32
    binary = entry(binary={f"linux-{os.uname().machine}": {
        "archive": "https://example.invalid/kimi.tar.gz", "sha256": sha, "cmd": "./kimi", "args": ["acp"]}})  # fmt: skip
    binary["id"] = "bin-agent"
    for made in (uvx, binary):
        path = tmp_path / f"{made['id']}.json"
        path.write_text(json.dumps(made))
        done = governor(home, "agents", "import", str(path))
        assert done.returncode == 0, done.stderr
    listed = {p["id"]: p for p in json.loads(governor(home, "presets", "--json").stdout)["presets"]}
    text = presets_file(home).read_text()
    assert 'pypi = "fast-agent-acp"' in text and 'version = "0.10.1"' in text, text
    assert f"its sha256 is {sha}" in listed["bin-agent"]["install"], listed["bin-agent"]
    assert 'argv = ["kimi", "acp"]' in text, text  # its cmd, looked for on PATH


@pytest.mark.parametrize(
    ("made", "said"),
    [
        ({"id": "x", "name": "x", "version": "1.0.0", "description": "d"}, "`distribution`"),
        ({**entry(), "version": "latest"}, "`version`"),
        (entry(pip={"package": "x"}), "`distribution.pip`"),
        (entry(binary={"linux-x86_64": {"archive": "https://e.invalid/a.zip", "cmd": "a"},
                       "linux-aarch64": {"archive": "https://e.invalid/a.zip", "cmd": "a"}}), "sha256"),
        ({**entry(), "id": "claude"}, "shipped preset"),
    ],
)  # fmt: skip
def test_an_entry_that_cannot_be_a_preset_is_refused_naming_why_and_nothing_is_written(
    home: dict[str, str], tmp_path: Path, made: dict[str, Any], said: str
) -> None:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(made))
    done = governor(home, "agents", "import", str(path))
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert not presets_file(home).exists()


def test_a_second_import_of_an_id_needs_replace_and_replaces_it_whole(
    home: dict[str, str], tmp_path: Path
) -> None:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(entry()))
    assert governor(home, "agents", "import", str(path)).returncode == 0
    again = governor(home, "agents", "import", str(path), "--api-host", "api.example.com")
    assert again.returncode == 2 and "--replace" in again.stderr
    replaced = governor(home, "agents", "import", str(path), "--api-host", "api.example.com", "--replace")
    assert replaced.returncode == 0, replaced.stderr
    text = presets_file(home).read_text()
    assert text.count("[demo-registry]") == 1 and 'api_hosts = ["api.example.com"]' in text, text


@pytest.mark.parametrize("shape", ["others-write", "link", "in-a-home"])
def test_a_presets_file_an_agent_or_another_user_could_write_is_refused(
    home: dict[str, str], tmp_path: Path, shape: str
) -> None:
    path = tmp_path / "agent.json"
    path.write_text(json.dumps(entry()))
    assert governor(home, "agents", "import", str(path)).returncode == 0
    mine = presets_file(home)
    assert governor(home, "presets").returncode == 0  # the allowed neighbour: the operator's own
    if shape == "others-write":
        mine.chmod(0o666)
    elif shape == "link":
        real = tmp_path / "elsewhere.toml"
        mine.rename(real)
        mine.symlink_to(real)
    else:  # a preset whose sandbox keeps ~/.config writable could rewrite it
        mine.write_text(mine.read_text().replace('home = []', 'home = ["~/.config"]'))
    shown = governor(home, "presets")
    assert shown.returncode != 0 and str(mine) in shown.stderr, (shown.stdout, shown.stderr)
