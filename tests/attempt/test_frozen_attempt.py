"""Frozen paths hold for the whole attempt: the sandboxed agent cannot change a
frozen test with its own tool nor through ``fs/write_text_file`` (a refusal in
the log), a sandboxed command cannot either, and the frozen files' digest is
the same in the attempt-start and attempt-end records; beside them, a file
outside the frozen globs is written both ways."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "audit"))
from audit_helpers import records, scripted_spec

from governor import run_attempt
from governor.policies.policy import parse_policy

SPEC = "from calc import add\n\n\ndef test_spec():\n    assert add(1, 2) == 3\n"
FROZEN = parse_policy(
    'capability = "edit-workspace"\n[sandbox]\nfrozen = ["tests/acceptance/**"]\n', "loop.toml"
)


def _workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "tests" / "acceptance").mkdir(parents=True)
    (ws / "src").mkdir()
    (ws / "tests" / "acceptance" / "test_spec.py").write_text(SPEC)
    return ws


def _expected_digest() -> str:
    name = b"tests/acceptance/test_spec.py"
    data = SPEC.encode()
    blob = len(name).to_bytes(8, "big") + name + len(data).to_bytes(8, "big") + data
    return hashlib.sha256(blob).hexdigest()


async def test_a_sandboxed_agent_cannot_change_a_frozen_test_and_the_digest_proves_it(
    tmp_path: Path,
) -> None:
    ws = _workspace(tmp_path)
    spec_file = "{cwd}/tests/acceptance/test_spec.py"
    steps = [
        {
            "shell": f"echo 'def test_spec(): pass' > {spec_file}; echo $? > {{cwd}}/src/own_tool_exit"
        },
        {"shell": f"rm -f {spec_file}; echo $? > {{cwd}}/src/rm_exit"},
        {
            "request": "fs/write_text_file",
            "params": {
                "sessionId": "{session}",
                "path": spec_file,
                "content": "def test_spec():\n    pass\n",
            },
        },
        {"shell": "echo fixed > {cwd}/src/by_own_tool.py"},
        {
            "request": "fs/write_text_file",
            "params": {
                "sessionId": "{session}",
                "path": "{cwd}/src/governed.py",
                "content": "x = 1\n",
            },
        },
        {"say": "done"},
    ]
    environ = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root")}
    spec = scripted_spec(tmp_path, steps, sandbox_agent=True, policy=FROZEN, environ=environ)
    outcome = await run_attempt(spec)
    assert outcome.status == "completed", outcome.reason

    assert (ws / "tests" / "acceptance" / "test_spec.py").read_text() == SPEC
    assert (ws / "src" / "own_tool_exit").read_text().strip() != "0"
    assert (ws / "src" / "rm_exit").read_text().strip() != "0"
    # the neighbour: outside the frozen globs, both ways of writing work
    assert (ws / "src" / "by_own_tool.py").read_text() == "fixed\n"
    assert (ws / "src" / "governed.py").read_text() == "x = 1\n"

    log = records(tmp_path / "audit.jsonl")
    writes = [r for r in log if r.get("kind") == "write"]
    assert [(r["verdict"], r["rule"]) for r in writes] == [
        ("deny", "frozen: tests/acceptance/**"),
        ("allow", "capability: edit-workspace"),
    ], writes
    start = next(r for r in log if r["kind"] == "attempt-start")
    end = next(r for r in log if r["kind"] == "attempt-end")
    assert start["frozen"] == end["frozen"] == {"sha256": _expected_digest(), "files": 1}
    assert outcome.acp is not None
    assert not any("frozen files changed" in n for n in outcome.acp.notices)


def test_a_sandboxed_command_cannot_change_a_frozen_test_but_writes_beside_it(
    tmp_path: Path,
) -> None:
    ws = _workspace(tmp_path)
    policy = tmp_path / "loop.toml"
    policy.write_text(
        'capability = "edit-workspace"\n[sandbox]\nfrozen = ["tests/acceptance/**"]\n'
    )
    governor = Path(sys.executable).parent / "governor"

    def run(line: str) -> subprocess.CompletedProcess[str]:
        argv = [str(governor), "sandbox", "--policy", str(policy), "--workspace", str(ws)]
        return subprocess.run([*argv, "--", "/bin/sh", "-c", line], capture_output=True,
                              text=True, cwd=ws, timeout=60)  # fmt: skip

    attack = run("echo 'def test_spec(): pass' > tests/acceptance/test_spec.py")
    assert attack.returncode != 0 and "Read-only file system" in attack.stderr, attack
    added = run("echo x > tests/acceptance/test_new.py")
    assert added.returncode != 0, added
    assert (ws / "tests" / "acceptance" / "test_spec.py").read_text() == SPEC
    assert not (ws / "tests" / "acceptance" / "test_new.py").exists()
    neighbour = run("echo x > src/fix.py")
    assert neighbour.returncode == 0, neighbour
    assert (ws / "src" / "fix.py").read_text() == "x\n"
