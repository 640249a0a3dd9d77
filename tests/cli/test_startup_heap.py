"""`governor run` pauses the garbage collector while it starts (imports, the
schema's models) and freezes that heap once; the attempt itself runs with the
collector on, so that cycles an attempt makes are still freed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "governor" / "agents" / "demo.py")
EDIT = str(ROOT / "policies" / "edit-workspace.toml")

WATCH = """
import gc, json, sys
from governor.cli import main, run

seen = {}
attempt = run.run_until_signalled

async def watched(prepared, *rest):
    seen["enabled"], seen["frozen"] = gc.isenabled(), gc.get_freeze_count()
    return await attempt(prepared, *rest)

run.run_until_signalled = watched
code = main(sys.argv[1:])
print(json.dumps({"code": code, **seen}))
"""


def test_the_attempt_runs_with_the_collector_on_and_the_startup_heap_frozen(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    argv = ["run", "--no-sandbox-agent", "--policy", EDIT, "--workspace", str(ws),
            "--log", str(tmp_path / "audit.jsonl"), "the task", "--", sys.executable, DEMO]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", WATCH, *argv], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["code"] == 0
    assert seen["enabled"] is True
    assert seen["frozen"] > 10_000  # the imports and the schema's models
