"""Attempts never touch each other, whatever ``TMPDIR`` is, and a batch job
never sees its source: through the real ``governor batch``, as root and as
govtest, with ``TMPDIR`` under ``/srv`` (which no sandbox makes private).

Job ``a`` is the attacker: its agent (the scripted agent's own shell, as an
agent's Bash tool) looks for job ``b``'s folder, workspace, live log and relay
socket under the governor's folder for attempts and under ``TMPDIR``,
connects to every socket it finds without the attempt's token, and reads the
source repository by its absolute path. Job ``b`` writes a secret into its
own workspace and stays alive meanwhile. The neighbours: each job reads its
own workspace, and both complete. The batch's patch is streamed and bounded:
a job over ``[limits] patch`` ends ``failed`` with an empty patch, the
other's patch is the diff as before.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from escape_harness import REPO, USERS, Account, Box

SCRIPTED = REPO / "tests" / "audit" / "scripted_agent.py"
SECRET = "SECRET-OF-JOB-B"
FIX = "THE-FIX-IN-A-LATER-COMMIT"

# connects to every socket it is given without a token, as a found socket would be used
PROBE_SOCKETS = """
import socket, sys
for path in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(20)
    try:
        s.connect(path)
        s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}\\n')
        data = s.recv(65536)
        print(path, "ANSWERED" if data else "closed-unanswered")
    except ConnectionResetError:
        print(path, "closed-unanswered")
    except OSError as e:
        print(path, "unreachable", e)
"""


@pytest.fixture
def srv(accounts: dict[str, Account | str]) -> Iterator[Path]:
    """A folder under /srv: not private in any sandbox (TMPDIR and the source go there)."""
    if not os.access("/srv", os.W_OK):  # a folder beside the homes: root's to make
        pytest.skip("making a folder under /srv needs root")
    base = Path("/srv") / f"govattempts-{secrets.token_hex(4)}"
    base.mkdir(mode=0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _box(accounts: dict[str, Account | str], user: str, name: str) -> Box:
    account = accounts[user]
    if isinstance(account, str):
        pytest.skip(f"{user}: {account}")
    assert account.base is not None
    return Box(user, account, account.base / f"{name}-{os.urandom(3).hex()}")


def _owned(box: Box, path: Path) -> Path:
    box.mkdir(path)
    return path


def _attempts(box: Box) -> str:
    """The governor's folder for attempts of the box's user (no XDG_STATE_HOME set)."""
    return f"{box.account.home}/.local/state/acp-governor/attempts"


def _python(box: Box) -> str:
    """A Python the box's user can run (govtest cannot reach root's pyenv)."""
    driver = box.account.driver
    return str(driver.proc.args[-2]) if driver is not None else os.path.realpath(sys.executable)  # type: ignore[index]


def governor(box: Box, *args: str, environ: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The real ``governor`` CLI as the box's user, with a clean environment."""
    driver = box.account.driver
    if driver is not None:
        argv = [str(a) for a in driver.proc.args]  # runuser ... env -i K=V ... PYTHON DRIVER
        python, prefix = argv[-2], argv[:-2]
    else:
        site = sysconfig.get_paths()["purelib"]
        python = os.path.realpath(sys.executable)
        prefix = ["env", "-i", f"PYTHONPATH={REPO}:{site}", f"HOME={box.account.home}",
                  "PATH=/usr/bin:/bin", "LANG=C.UTF-8"]  # fmt: skip
    extra = [f"{k}={v}" for k, v in environ.items()]
    return subprocess.run(
        [*prefix, *extra, python, "-m", "governor.cli", *args],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip


def governor_process(box: Box, *args: str, environ: dict[str, str]) -> subprocess.Popen[str]:
    """`governor` as the box's user (see `governor`), started and left running."""
    driver = box.account.driver
    if driver is not None:
        argv = [str(a) for a in driver.proc.args]
        python, prefix = argv[-2], argv[:-2]
    else:
        site = sysconfig.get_paths()["purelib"]
        python = os.path.realpath(sys.executable)
        prefix = ["env", "-i", f"PYTHONPATH={REPO}:{site}", f"HOME={box.account.home}",
                  "PATH=/usr/bin:/bin", "LANG=C.UTF-8"]  # fmt: skip
    extra = [f"{k}={v}" for k, v in environ.items()]
    return subprocess.Popen(
        [*prefix, *extra, python, "-m", "governor.cli", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def _source(box: Box, srv: Path) -> Path:
    """A repository outside /tmp whose later commit holds the answer."""
    repo = _owned(box, srv / "source")
    box.write(repo / "README.md", "a project\n")
    box.git("init", "-q", cwd=repo)
    box.git("add", ".", cwd=repo)
    box.git("commit", "-qm", "first", cwd=repo)
    box.git("tag", "job", cwd=repo)
    box.write(repo / "fix.txt", f"{FIX}\n")
    box.git("add", ".", cwd=repo)
    box.git("commit", "-qm", "the fix", cwd=repo)
    return repo


def _job(box: Box, name: str, repo: Path, steps: list[Any], policy: str = "") -> dict[str, Any]:
    script = box.write(box.dir / f"{name}.json", json.dumps(steps))
    job: dict[str, Any] = {
        "id": name, "prompt": "the task", "repo": str(repo), "ref": "job",
        "capability": "edit-workspace", "timeout": 300,
        "argv": [_python(box), str(SCRIPTED), "--script", str(script)],
    }  # fmt: skip
    if policy:
        job["policy"] = str(box.write(box.dir / f"{name}.toml", f'capability = "edit-workspace"\n{policy}'))
    return job


def _batch(box: Box, srv: Path, jobs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    jobs_file = box.write(box.dir / "jobs.jsonl", "".join(json.dumps(j) + "\n" for j in jobs))
    tmpdir = _owned(box, srv / "tmp")
    out = box.dir / "out"
    done = governor(
        box, "batch", str(jobs_file), "--out", str(out), "--jobs", str(len(jobs)),
        environ={"TMPDIR": str(tmpdir)},
    )  # fmt: skip
    assert (out / "outcomes.jsonl").exists(), done.stderr[-3000:]
    lines = [json.loads(x) for x in (out / "outcomes.jsonl").read_text().splitlines()]
    assert len(lines) == len(jobs), done.stderr[-3000:]
    return {x["job"]: x for x in lines}


def _said(line: dict[str, Any]) -> str:
    return json.dumps(line)


@pytest.mark.parametrize("user", USERS)
def test_a_jobs_agent_reaches_no_other_jobs_folder_log_or_socket_nor_the_source_and_both_complete(
    accounts: dict[str, Account | str], srv: Path, user: str
) -> None:
    box = _box(accounts, user, "attempts")
    repo = _source(box, srv)
    attempts, tmpdir = _attempts(box), srv / "tmp"
    tools = "[mcp]\ngovernor_tools = true\n"
    probe = box.write(srv / "probe_sockets.py", PROBE_SOCKETS)  # where sandboxes see it
    look = (
        f"sleep 3; for f in {attempts}/*/b/secret-b.txt {tmpdir}/*/b/secret-b.txt; do cat $f; done; "
        f"find {attempts} {tmpdir} -name '*.jsonl' -exec cat {{}} + ; "
        f"python3 -I {probe} $(find {attempts} {tmpdir} -name '*.sock'); "
        f"cat {repo}/fix.txt; git -C {repo} log --all --format=%s; "
        f"cat {{cwd}}/README.md; echo probe-done"
    )
    a = _job(box, "a", repo, [{"shell": f"{look} 2>&1"}, {"say": "a done"}], tools)
    b = _job(box, "b", repo, [
        {"write": "{cwd}/secret-b.txt", "text": SECRET},
        {"shell": "sleep 12; cat {cwd}/secret-b.txt"},
        {"say": "b done"},
    ], tools)  # fmt: skip
    lines = _batch(box, srv, [a, b])
    said_a, said_b = _said(lines["a"]), _said(lines["b"])
    assert "probe-done" in said_a and "a project" in said_a, said_a  # it ran, in its own clone
    assert SECRET not in said_a, said_a  # b's workspace: not seen
    assert '"kind": "attempt-start"' not in said_a and "attempt-start" not in said_a  # no live log
    assert "ANSWERED" not in said_a, said_a  # no socket answered without the token
    assert FIX not in said_a and "the fix" not in said_a, said_a  # the source: not seen
    assert SECRET in said_b, said_b  # the neighbour: b reads its own workspace
    assert lines["a"]["status"] == lines["b"]["status"] == "completed", (said_a, said_b)


@pytest.mark.parametrize("user", USERS)
def test_a_connection_without_the_attempts_token_answers_nothing_and_is_recorded(
    accounts: dict[str, Account | str], srv: Path, user: str
) -> None:
    box = _box(accounts, user, "token")
    repo = _source(box, srv)
    probe = box.write(srv / "probe_sockets.py", PROBE_SOCKETS)  # where sandboxes see it
    line = f"python3 -I {probe} $(find {_attempts(box)} {srv / 'tmp'} -name '*.sock') 2>&1"
    job = _job(box, "a", repo, [{"shell": line}, {"say": "done"}], "[mcp]\ngovernor_tools = true\n")
    lines = _batch(box, srv, [job])
    said = _said(lines["a"])
    assert "governor.sock closed-unanswered" in said, said  # its own socket, found: closed
    assert "ANSWERED" not in said
    records = [json.loads(x) for x in Path(lines["a"]["log"]).read_text().splitlines()]
    refused = [r for r in records if r.get("kind") == "mcp-connection"]
    assert refused and refused[0]["subject"]["verdict"] == "deny", records[-3:]
    notices = lines["a"]["acp"]["notices"]
    assert any("1 connection(s) refused" in n for n in notices), notices
    assert lines["a"]["status"] == "completed"


@pytest.mark.parametrize("user", USERS)
def test_a_patch_over_the_patch_limit_fails_its_job_with_an_empty_patch_and_the_other_keeps_its_diff(
    accounts: dict[str, Account | str], srv: Path, user: str
) -> None:
    box = _box(accounts, user, "patch")
    repo = _source(box, srv)
    big = _job(box, "big", repo, [
        {"shell": "head -c 3000000 /dev/urandom > {cwd}/big.bin"}, {"say": "wrote"},
    ], '[limits]\npatch = "1M"\n')  # fmt: skip
    small = _job(box, "small", repo, [{"write": "{cwd}/notes.txt", "text": "a note\n"}, {"say": "wrote"}])
    lines = _batch(box, srv, [big, small])
    assert lines["big"]["status"] == "failed", lines["big"]
    assert "over the patch limit 1M" in lines["big"]["reason"], lines["big"]["reason"]
    assert Path(lines["big"]["changes"]).read_bytes() == b""  # never half a patch
    assert lines["small"]["status"] == "completed", lines["small"]
    patch = Path(lines["small"]["changes"]).read_text()
    assert "+++ b/notes.txt" in patch and "+a note" in patch
    assert lines["small"]["patch_bytes"] == len(patch.encode())
    assert not list(Path(lines["small"]["changes"]).parent.glob(".tmp-*"))  # committed, nothing left


# calls the governor's own `write` through every socket it is given, as the agent of
# another attempt that found them would
PROBE_WRITE = """
import json, socket, sys
for path in sys.argv[1:]:
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(20)
        s.connect(path)
        f = s.makefile("rwb")
        for body in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18",
             "capabilities": {}, "clientInfo": {"name": "x", "version": "1"}}},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
             "params": {"name": "write", "arguments": {"path": "escaped.txt", "content": "from another attempt"}}},
        ):
            f.write(json.dumps(body).encode() + b"\\n")
            f.flush()
        print(path, "ANSWERED" if f.readline() else "closed-unanswered")
    except OSError as e:
        print(path, "refused", e)
"""


@pytest.mark.parametrize("user", USERS)
def test_two_governor_runs_one_agent_cannot_use_the_others_relay_and_both_complete(
    accounts: dict[str, Account | str], srv: Path, user: str
) -> None:
    box = _box(accounts, user, "runs")
    tmpdir = _owned(box, srv / "tmp")
    probe = box.write(srv / "probe_write.py", PROBE_WRITE)
    policy = box.write(box.dir / "tools.toml", 'capability = "edit-workspace"\n[mcp]\ngovernor_tools = true\n')
    runs = {}
    # a first, b once a's sandbox is up (a socket made after a sandbox was built is
    # no host socket its scan could cover); a probes once b's agent runs, relay open
    wait = f"for i in $(seq 240); do [ -e {srv / 'ws-b' / 'started'} ] && break; sleep 0.5; done"
    for name, steps in (
        ("a", [{"write": "{cwd}/started", "text": "yes"},
               {"shell": f"{wait}; python3 -I {probe} $(find {_attempts(box)} {tmpdir} -name '*.sock') 2>&1"},
               {"say": "a done"}]),
        ("b", [{"write": "{cwd}/started", "text": "yes"},
               {"shell": "sleep 8; echo b-own-work > {cwd}/own.txt"}, {"say": "b done"}]),
    ):  # fmt: skip
        ws = _owned(box, srv / f"ws-{name}")
        script = box.write(box.dir / f"{name}.json", json.dumps(steps))
        args = ["run", "--json", "--policy", str(policy), "--workspace", str(ws),
                "--log", str(box.dir / f"{name}.jsonl"), "the task", "--",
                _python(box), str(SCRIPTED), "--script", str(script)]  # fmt: skip
        runs[name] = (ws, governor_process(box, *args, environ={"TMPDIR": str(tmpdir)}))
        for _ in range(600):  # its agent started (a wait for the test's order, not a timing assert)
            if (ws / "started").exists() or runs[name][1].poll() is not None:
                break
            time.sleep(0.2)
    outcomes = {}
    for name, (_, process) in runs.items():
        out, err = process.communicate(timeout=600)
        assert out, err[-3000:]
        outcomes[name] = json.loads(out)
    said_a = json.dumps(outcomes["a"])
    assert "ANSWERED" not in said_a, said_a  # no relay of b's (nor its own) answered it
    assert not (runs["b"][0] / "escaped.txt").exists() and not (runs["a"][0] / "escaped.txt").exists()
    b_log = (box.dir / "b.jsonl").read_text()
    kinds = [json.loads(x)["kind"] for x in b_log.splitlines()]
    assert "write" not in kinds and "escaped" not in b_log, kinds  # nothing of a's in b's record
    assert (runs["b"][0] / "own.txt").read_text() == "b-own-work\n"  # the neighbour: b did its work
    assert outcomes["a"]["status"] == outcomes["b"]["status"] == "completed", outcomes
