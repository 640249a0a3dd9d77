"""A first npx start says it is fetching (issue 37): ``governor run --agent codex``
through the console script, the preset resolving to npx (nothing on PATH,
nothing installed by the governor), npm against a local registry
(`npm_registry`) serving the preset's pinned package with the scripted ACP
agent as its program. The first start prints a progress line naming the
package before the agent starts; the second, from npx's cache, does not."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from checkout import needs_a_visible_checkout
from npm_registry import Registry, serving

from governor.agents.presets import presets

pytestmark = [
    needs_a_visible_checkout(),
    pytest.mark.skipif(
        not os.path.exists("/usr/bin/npx") and not os.environ.get("CI"), reason="npm is not installed"
    ),
]

REPO = Path(__file__).resolve().parents[2]
GOVERNOR = Path(sys.executable).with_name("governor")
SCRIPTED = REPO / "tests" / "audit" / "scripted_agent.py"
PRESET = presets()["codex"]
PACKAGE = f"{PRESET.package}@{PRESET.version}"


@pytest.fixture
def registry() -> Iterator[Registry]:
    with serving() as served:
        launcher = (
            "#!/bin/sh\n"
            'here=$(dirname "$(readlink -f "$0")")\n'
            f'exec python3 {shlex.quote(str(SCRIPTED))} --script "$here/script.json"\n'
        )
        served.publish(
            PRESET.package or "", PRESET.version or "",
            {"agent.sh": launcher, "script.json": json.dumps([{"say": "done"}])},
            {PRESET.argv[0]: "agent.sh"},
        )  # fmt: skip
        yield served


def _run(tmp_path: Path, registry: Registry, *flags: str) -> subprocess.CompletedProcess[str]:
    home, ws = tmp_path / "home", tmp_path / "ws"
    home.mkdir(exist_ok=True)
    ws.mkdir(exist_ok=True)
    registry.npmrc(home)
    env = {
        "HOME": str(home),
        "XDG_DATA_HOME": str(tmp_path / "data"),  # nothing installed: the preset runs through npx
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "npm_config_registry": registry.url,
    }
    if "PYTHONPATH" in os.environ:  # a checkout run as is: the governor its code
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    argv = [str(GOVERNOR), "run", "--agent", "codex", "--capability", "edit-workspace",
            "--env", "npm_config_registry", "--workspace", str(ws),
            "--log", str(tmp_path / f"audit-{os.urandom(2).hex()}.jsonl"), *flags, "do the task"]  # fmt: skip
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600, check=False)


def test_a_first_npx_start_says_on_stderr_it_is_fetching_the_package_and_a_later_start_does_not(
    tmp_path: Path, registry: Registry
) -> None:
    first = _run(tmp_path, registry)
    assert first.returncode == 0, first.stderr[-3000:]
    lines = first.stderr.splitlines()
    fetching = [i for i, line in enumerate(lines) if f"fetching {PACKAGE}" in line]
    started = [i for i, line in enumerate(lines) if "started " in line]
    assert fetching and started and fetching[0] < started[0], first.stderr[-3000:]
    assert "first start through npx" in lines[fetching[0]]
    # --json keeps stdout: the line is still said, on stderr; here from the
    # cache, so not at all
    second = _run(tmp_path, registry, "--json")
    assert second.returncode == 0, second.stderr[-3000:]
    assert json.loads(second.stdout)["status"] == "completed"
    assert "fetching" not in second.stderr, second.stderr[-3000:]


def test_a_first_npx_start_under_json_says_it_is_fetching_on_stderr_and_stdout_holds_the_outcome_only(
    tmp_path: Path, registry: Registry
) -> None:
    done = _run(tmp_path, registry, "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["status"] == "completed"
    assert f"governor: fetching {PACKAGE}" in done.stderr, done.stderr[-3000:]
