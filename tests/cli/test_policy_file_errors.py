"""A policy file that cannot be used is one message on every surface that reads
one (`governor run`, `check`, `sandbox`, `audit replay`, a batch's `policy`
key): the file, the line where the TOML parser gives one, the key."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

GOVERNOR = str(Path(sys.executable).parent / "governor")

BadFile = tuple[str, bytes | None, Callable[[str], str]]

BAD_FILES: list[BadFile] = [
    (
        "a syntax error",
        b'capability = "edit-workspace"\n[limits]\nwall = 60\nmemory = = 3\n',
        lambda p: f"{p}: line 4: limits.memory: not valid TOML: Invalid value (column 10)",
    ),
    (
        "an array never closed (the parser names no line: the last key written is)",
        b'capability = "edit-workspace"\n[limits]\nwall = 60\n[network]\nallow = ["a.example",\n',
        lambda p: f"{p}: line 5: network.allow: not valid TOML: Invalid value at the end of the file "
        "(is the value begun here closed?)",
    ),
    (
        "an unknown key",
        b'[sandbox]\nkeeps = ["/opt"]\n',
        lambda p: f"{p}: sandbox.keeps: unknown key; did you mean `keep`?",
    ),
    (
        "no such file",
        None,
        lambda p: f"{p}: cannot read the policy: No such file or directory",
    ),
    ("not UTF-8", b'capability = "read-only"\n# \xff\n', lambda p: f"{p}: line 2: not UTF-8 text"),
]


def governor(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "ACP_GOVERNOR_CEILING"}
    return subprocess.run(
        [GOVERNOR, *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )


def repository(path: Path) -> Path:
    path.mkdir()
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "first"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *args],
            cwd=path,
            check=True,
            capture_output=True,
        )
    return path


@pytest.mark.parametrize(("case", "content", "message"), BAD_FILES, ids=[c[0] for c in BAD_FILES])
def test_a_bad_policy_file_is_the_same_message_naming_the_file_line_and_key_everywhere(
    tmp_path: Path, case: str, content: bytes | None, message: Callable[[str], str]
) -> None:
    policy = tmp_path / "job.toml"
    if content is not None:
        policy.write_bytes(content)
    expected = message(str(policy))
    ws = tmp_path / "ws"
    ws.mkdir()
    jobs = tmp_path / "jobs.jsonl"
    line = {"id": "j", "prompt": "p", "agent": "demo", "repo": str(repository(tmp_path / "r"))}
    jobs.write_text(json.dumps({**line, "policy": str(policy)}) + "\n")
    surfaces = {
        "check": governor("check", "--policy", str(policy)),
        "run": governor(
            *("run", "--agent", "demo", "--policy", str(policy), "--workspace", str(ws)),
            *("--log", str(tmp_path / "audit.jsonl"), "a task"),
        ),
        "sandbox": governor("sandbox", "--policy", str(policy), "--", "true", cwd=ws),
        "audit replay": governor(
            "audit", "replay", str(tmp_path / "x.jsonl"), "--policy", str(policy)
        ),
        "batch": governor("batch", str(jobs), "--out", str(tmp_path / "out")),
    }
    for surface, done in surfaces.items():
        assert done.returncode == 2, (surface, done.stderr)
        assert expected in done.stderr, (surface, expected, done.stderr)
        assert "Traceback" not in done.stderr, (surface, done.stderr)
    assert "line 1 (j): key 'policy': " + expected in surfaces["batch"].stderr
    assert not (tmp_path / "audit.jsonl").exists() and not (tmp_path / "out").exists()


def test_a_good_policy_file_is_taken_where_a_bad_one_is_refused(tmp_path: Path) -> None:
    policy = tmp_path / "job.toml"
    policy.write_text('capability = "read-only"\n[limits]\nwall = 60\n')
    done = governor("check", "--policy", str(policy))
    assert done.returncode == 0 and f"policy {policy} fits" in done.stdout, done.stderr
    done = governor("sandbox", "--policy", str(policy), "--", "echo ran", cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "ran\n", done.stderr


def test_a_policy_file_with_several_problems_names_every_one_in_a_round(tmp_path: Path) -> None:
    policy = tmp_path / "job.toml"
    policy.write_text(
        'capability = "root"\nonask = "x"\nnetwork = 3\n'
        '[sandbox]\ngit = "push"\n[limits]\nwall = 0\n[deny]\ntools = ["nope"]\n'
    )
    ws = tmp_path / "ws"
    ws.mkdir()
    expected = [
        f"{policy}: capability: unknown capability 'root'",
        f"{policy}: onask: unknown key; did you mean `on_ask`?",
        f"{policy}: network: expected true or false, got an integer",
        f"{policy}: sandbox.git: 'push' is not accepted",
        f"{policy}: limits.wall: expected a positive number of seconds",
        f"{policy}: deny.tools: 'nope' is not a tool kind",
    ]
    run = governor(
        *("run", "--agent", "demo", "--policy", str(policy), "--workspace", str(ws)),
        *("--log", str(tmp_path / "audit.jsonl"), "a task"),
    )
    check = governor("check", "--policy", str(policy))
    sandbox = governor("sandbox", "--policy", str(policy), "--", "true", cwd=ws)
    jobs = tmp_path / "jobs.jsonl"
    line = {"id": "j", "prompt": "p", "agent": "demo", "repo": str(repository(tmp_path / "r"))}
    jobs.write_text(json.dumps({**line, "policy": str(policy)}) + "\n")
    batch = governor("batch", str(jobs), "--out", str(tmp_path / "out"))
    prefixes = {"run": "governor: ", "check": "governor: ", "sandbox": "governor sandbox: "}
    surfaces = {"run": run, "check": check, "sandbox": sandbox, "batch": batch}
    for surface, done in surfaces.items():
        assert done.returncode == 2, (surface, done.stderr)
        lines = done.stderr.splitlines()
        prefix = prefixes.get(surface, "")
        for message in expected:
            assert any(
                line.startswith(prefix + message)
                or (surface == "batch" and f"line 1 (j): key 'policy': {message}" in line)
                for line in lines
            ), (
                surface,
                message,
                done.stderr,
            )
    assert not (tmp_path / "audit.jsonl").exists()
    policy.write_text('capability = "read-only"\nnetwork = false\n[limits]\nwall = 60\n')
    fixed = governor("check", "--policy", str(policy))
    assert fixed.returncode == 0, fixed.stderr
