"""The operator's audit signing key is masked in every sandbox of the job: an agent
that read it could sign a log it rewrote, and the signature would verify."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

GOVERNOR = Path(sys.executable).parent / "governor"
SCRIPTED = Path(__file__).resolve().parents[1] / "audit" / "scripted_agent.py"


@pytest.fixture
def keys() -> Iterator[Path]:
    """A key pair in a folder every sandbox shows (not under a private /tmp or /var/tmp)."""
    if not os.access("/srv", os.W_OK):  # a folder beside the homes: root's to make
        pytest.skip("making a folder under /srv needs root")
    folder = Path("/srv") / f"acp-governor-key-{uuid.uuid4().hex[:8]}"
    folder.mkdir()
    try:
        done = subprocess.run([str(GOVERNOR), "audit", "keygen", str(folder / "key")],
                              capture_output=True, text=True, timeout=60)  # fmt: skip
        assert done.returncode == 0, done.stderr
        (folder / "beside.txt").write_text("readable neighbour\n")
        yield folder / "key"
    finally:
        shutil.rmtree(folder)


def test_the_agent_cannot_read_the_ceilings_signing_key_and_reads_the_file_beside_it(
    tmp_path: Path, keys: Path
) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    ceiling = tmp_path / "ceiling.toml"
    ceiling.write_text(f'allowed_agents = ["acp"]\naudit_key = "{keys}"\n')
    line = f"cat {keys} || echo key-refused; cat {keys.parent / 'beside.txt'}"
    (tmp_path / "script.json").write_text(json.dumps([{"shell": line}, {"say": "done"}]))
    argv = [str(GOVERNOR), "run", "--workspace", str(ws), "--ceiling", str(ceiling), "--json"]
    argv += ["--log", str(tmp_path / "a.jsonl"), "go", "--"]
    argv += [sys.executable, str(SCRIPTED), "--script", str(tmp_path / "script.json")]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=180)
    outcome = json.loads(done.stdout)
    said = json.dumps(outcome) + done.stderr
    assert outcome["acp"]["sandboxed_agent"] is True
    assert "PRIVATE KEY" not in said and "key-refused" in said  # the key: not opened
    assert "readable neighbour" in said  # the neighbour: read as before
    assert outcome["log_key"]  # and the log was signed with it all the same
