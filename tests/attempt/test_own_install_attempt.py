"""A real attempt, its governor started from a venv inside the workspace (a
project's ``.venv`` with acp-governor in it): the sandboxed agent cannot plant
a ``.pth`` in that venv, which the next ``governor`` start would run outside
any sandbox, and still writes the rest of the workspace (`governor.confine.own_install`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path

SCRIPTED = Path(__file__).resolve().parents[1] / "audit" / "scripted_agent.py"


def test_the_agent_cannot_plant_a_pth_in_the_governors_venv_inside_the_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    venv = ws / ".venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    site = venv / "lib" / version / "site-packages"
    ours = sysconfig.get_paths()["purelib"]  # where this checkout's install is
    (site / "acp_governor_here.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
    script = tmp_path / "script.json"
    steps = [{"shell": f"echo 'import os' > {site}/evil.pth; echo made > {ws}/made.txt"}, {"message": "done"}]
    script.write_text(json.dumps(steps))
    policy = tmp_path / "edit.toml"
    policy.write_text('capability = "edit-workspace"\n')
    run = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "governor.cli", "run", "--policy", str(policy),
         "--workspace", str(ws), "--log", str(tmp_path / "a.jsonl"), "play",
         "--", sys.executable, str(SCRIPTED), "--script", str(script)],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")},
    )  # fmt: skip
    assert run.returncode in (0, 1), run.stderr
    assert not (site / "evil.pth").exists(), run.stdout
    assert (ws / "made.txt").read_text() == "made\n"  # the neighbour: the workspace is writable
