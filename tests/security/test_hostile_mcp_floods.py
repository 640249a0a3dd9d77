"""What an agent can do with the MCP servers it is handed, and what it cannot
(issue 35, findings 6 and 7): the governor's own secret reaches no server,
an encoded secret is masked like a clear one, a flood of connections or
sessions ends no attempt and starts no unbounded servers, and a request the
relay does not know is refused and recorded.

Real attempts: ``governor run --json`` as root and as govtest (``TMPDIR`` and
``$HOME`` under the box, not ``/tmp`` nor the passwd home), the agent
mcp_agent.py inside its sandbox, the relay, its shim and a stdlib server
(encoding_server.py) in its own bwrap sandbox, the real audit log read back
with ``governor audit``.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from escape_harness import REPO, USERS, Account, Box

from governor.boundary.secrets import SIGNING_KEY_VARIABLE

AGENT = Path(__file__).with_name("mcp_agent.py")
SERVER = Path(__file__).with_name("encoding_server.py")
PY = "/usr/bin/python3"
TOKEN = "tok_9fQ2xLr7vB4mZ8kP1sW6"
"""A server's secret (its variable's name looks secret: masked)."""


def box_for(accounts: dict[str, Account | str], user: str, name: str) -> Box:
    account = accounts[user]
    if isinstance(account, str):
        pytest.skip(f"{user}: {account}")
    assert account.base is not None
    box = Box(user, account, account.base / f"{name}-{os.urandom(3).hex()}")
    box.mkdir(box.dir / "tmp")
    return box


def governor(
    box: Box, argv: list[str], *, environ: dict[str, str] | None = None, nofile: int | None = None
) -> subprocess.CompletedProcess[str]:
    """The real CLI (``python -m governor.cli``) as the box's user, ``TMPDIR``
    and ``$HOME`` under the box; ``nofile``: its descriptor limit, soft and hard."""
    driver = box.account.driver
    if driver is not None:
        args = [str(a) for a in driver.proc.args]  # runuser ... env -i K=V ... PYTHON DRIVER
        python, prefix = args[-2], args[:-2]
    else:
        site = sysconfig.get_paths()["purelib"]
        python = os.path.realpath(sys.executable)
        prefix = ["env", "-i", f"PYTHONPATH={REPO}:{site}", "PATH=/usr/bin:/bin", "LANG=C.UTF-8"]
    given = {"HOME": str(box.home), "TMPDIR": str(box.dir / "tmp"), **(environ or {})}
    limit = [] if nofile is None else ["prlimit", f"--nofile={nofile}:{nofile}", "--"]
    full = [*prefix, *[f"{k}={v}" for k, v in given.items()], *limit, python, "-m", "governor.cli", *argv]
    return subprocess.run(full, capture_output=True, text=True, timeout=600)


def run(
    box: Box,
    policy: str,
    agent: list[str],
    *,
    environ: dict[str, str] | None = None,
    nofile: int | None = None,
) -> tuple[subprocess.CompletedProcess[str], Path]:
    """``governor run --json`` with the MCP agent playing ``agent``; the run and its log."""
    policy_path = box.write(box.dir / "policy.toml", policy)
    log = box.dir / "audit.jsonl"
    python = PY
    argv = ["run", "--json", "--policy", str(policy_path), "--workspace", str(box.ws), "--log", str(log),
            "go", "--", python, str(AGENT), *agent]  # fmt: skip
    return governor(box, argv, environ=environ, nofile=nofile), log


def outcome_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.stdout.strip(), f"no outcome (exit {done.returncode}): {done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def records(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def answers(box: Box) -> Any:
    return json.loads((box.ws / "answers.json").read_text())


def verify(box: Box, log: Path, *more: str) -> subprocess.CompletedProcess[str]:
    return governor(box, ["audit", "verify", *more, str(log)])


def server(name: str = "enc", env: str = "[]", extra: str = "") -> str:
    return f"""
[[mcp.servers]]
name = "{name}"
command = ["{PY}", "{SERVER}"]
env = {env}
{extra}
"""


ALLOW = """
[mcp.allow]
tools = ["enc.*"]
"""


# -- finding 6: the signing key reaches no server, header or check ------------------------------

NAMED = {
    "server env": ('capability = "edit-workspace"\n' + server(env='["{var}"]') + ALLOW),
    "header": (
        'capability = "edit-workspace"\n'
        '[[mcp.servers]]\nname = "remote"\nurl = "http://127.0.0.1:9/mcp"\n'
        'headers = {{ Authorization = "{var}" }}\n' + server() + ALLOW
    ),
    "check env": ('capability = "edit-workspace"\nenv = ["{var}"]\n[checks]\ncommands = ["true"]\n' + server() + ALLOW),
}


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("where", list(NAMED))
def test_the_signing_keys_variable_named_for_a_server_a_header_or_a_check_is_refused_before_start_naming_it(
    accounts: dict[str, Account | str], user: str, where: str, tmp_path: Path
) -> None:
    from governor.audit.signing import keygen

    box = box_for(accounts, user, "key")
    keygen(tmp_path / "key")
    key = (tmp_path / "key").read_text()
    done, log = run(box, NAMED[where].format(var=SIGNING_KEY_VARIABLE), ["call", "enc", "echo", '{"text": "hi"}'],
                    environ={SIGNING_KEY_VARIABLE: key})  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    problem = [line for line in done.stderr.splitlines() if SIGNING_KEY_VARIABLE in line]
    assert problem and "holds the audit log's signing key" in problem[0], done.stderr
    assert ("mcp.servers" in problem[0]) == (where != "check env"), problem
    body = "".join(line for line in key.splitlines() if "-----" not in line)
    assert body[16:40] not in done.stderr + done.stdout
    assert not log.exists() and not (box.ws / "answers.json").exists()  # nothing started
    # the neighbour: an ordinary variable in the same place passes, and the run completes
    box2 = box_for(accounts, user, "plain")
    done, log = run(box2, NAMED[where].format(var="ORDINARY_NAME"), ["call", "enc", "echo", '{"text": "hi"}'],
                    environ={"ORDINARY_NAME": "plain value"})  # fmt: skip
    outcome = outcome_of(done)
    assert outcome["status"] == "completed", outcome
    assert answers(box2) == {"results": ["hi"]}


@pytest.mark.parametrize("user", USERS)
def test_the_signing_key_under_another_name_is_refused_by_its_value(
    accounts: dict[str, Account | str], user: str, tmp_path: Path
) -> None:
    from governor.audit.signing import keygen

    box = box_for(accounts, user, "value")
    private = tmp_path / "key"
    keygen(private)
    pem = private.read_text()
    policy = 'capability = "edit-workspace"\n' + server(env='["SERVICE_TOKEN"]') + ALLOW
    done, _ = run(box, policy, ["call", "enc", "echo", '{"text": "hi"}'],
                  environ={SIGNING_KEY_VARIABLE: pem, "SERVICE_TOKEN": pem})  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "SERVICE_TOKEN holds the audit log's signing key" in done.stderr, done.stderr
    assert "[[mcp.servers]] enc env" in done.stderr
    body = "".join(line for line in pem.splitlines() if "-----" not in line)
    assert body[:20] not in done.stderr


# -- masking: a secret's encodings ---------------------------------------------------------------

ENCODINGS = ("plain", "base64", "base64-inside", "base64url-inside", "hex", "HEX", "url")


@pytest.mark.parametrize("user", USERS)
def test_a_secret_a_server_hands_back_encoded_is_masked_for_the_agent_and_in_the_log(
    accounts: dict[str, Account | str], user: str
) -> None:
    box = box_for(accounts, user, "encoded")
    policy = 'capability = "edit-workspace"\n' + server(env='["SERVICE_TOKEN"]') + ALLOW
    calls = [a for e in ENCODINGS for a in ("secret", json.dumps({"name": "SERVICE_TOKEN", "encoding": e}))]
    ordinary = "ordinary words, aGVsbG8gd29ybGQ= and 68656c6c6f and a%20b stay as they are"
    done, log = run(box, policy, ["call", "enc", *calls, "echo", json.dumps({"text": ordinary})],
                    environ={"SERVICE_TOKEN": TOKEN})  # fmt: skip
    outcome = outcome_of(done)
    assert outcome["status"] == "completed", outcome
    results = answers(box)["results"]
    assert [r.split(":")[0] for r in results[:-1]] == list(ENCODINGS), results
    assert all("[secret]" in r for r in results[:-1]), results
    assert results[-1] == ordinary  # ordinary text (and ordinary base64, hex, %20) unaffected
    raw = TOKEN.encode()
    leaks = [TOKEN, base64.b64encode(raw).decode()[:24], base64.b64encode(b"X" + raw).decode()[4:28],
             base64.urlsafe_b64encode(b"YZ" + raw).decode()[4:28], raw.hex()[:24], raw.hex().upper()[:24],
             quote(TOKEN, safe="")]  # fmt: skip
    seen = json.dumps(results) + log.read_text() + done.stdout
    assert not [leak for leak in leaks if leak in seen], [leak for leak in leaks if leak in seen]


# -- unknown methods ------------------------------------------------------------------------------


@pytest.mark.parametrize("user", USERS)
def test_an_unknown_request_method_is_refused_and_recorded_and_a_notification_still_passes(
    accounts: dict[str, Account | str], user: str
) -> None:
    box = box_for(accounts, user, "unknown")
    policy = 'capability = "edit-workspace"\n' + server() + ALLOW
    done, log = run(box, policy, ["unknown", "enc"])
    outcome = outcome_of(done)
    assert outcome["status"] == "completed", outcome
    said = answers(box)
    error = said["unknown"].get("error") or {}
    assert error.get("code") == -32601 and "Refused by the governor" in error.get("message", ""), said
    received = json.loads(said["received"])
    assert "notifications/tools/call" not in received, received  # the server never saw it
    assert "notifications/message" in received and "tools/call" in received, received
    refused = [r for r in records(log) if r.get("kind") == "mcp" and r.get("verdict") == "deny"]
    assert [(r["subject"]["method"], r["rule"]) for r in refused] == [
        ("notifications/tools/call", "mcp.unknown-method")
    ], refused
    assert verify(box, log).returncode == 0


# -- finding 7: sessions and descriptors ----------------------------------------------------------


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize(("processes", "served"), [(None, 8), (3, 3)])
def test_sixty_sessions_to_one_server_the_first_are_served_the_rest_refused_and_recorded(
    accounts: dict[str, Account | str], user: str, processes: int | None, served: int
) -> None:
    box = box_for(accounts, user, "sessions")
    limits = "" if processes is None else f"[limits]\nprocesses = {processes}\n"
    policy = 'capability = "edit-workspace"\n' + limits + server() + ALLOW
    done, log = run(box, policy, ["sessions", "enc", "60"])
    outcome = outcome_of(done)
    assert outcome["status"] == "completed", outcome
    assert answers(box) == {"answered": served, "closed": 60 - served, "other": 0}
    refused = [r for r in records(log) if r.get("kind") == "mcp" and r["subject"].get("method") == "session"]
    assert len(refused) == 60 - served and all(r["verdict"] == "deny" for r in refused), refused[:2]
    assert all(r["rule"] == "mcp.sessions" for r in refused)
    assert any("sessions refused" in n for n in outcome["acp"]["notices"]), outcome["acp"]["notices"]
    assert verify(box, log).returncode == 0


FLOODED = 'capability = "edit-workspace"\n[mcp]\ngovernor_tools = true\n' + server() + ALLOW


@pytest.mark.parametrize("user", USERS)
def test_twelve_hundred_held_connections_at_a_1024_descriptor_limit_end_the_attempt_with_its_records(
    accounts: dict[str, Account | str], user: str
) -> None:
    box = box_for(accounts, user, "flood")
    done, log = run(box, FLOODED, ["flood", "governor", "1200", "enc"], nofile=1024)
    outcome = outcome_of(done)  # an outcome, no traceback
    assert outcome["status"] in ("completed", "failed"), outcome
    said = answers(box)
    assert said["connected"] > 1024 - 64, said  # the flood was held (none of it by the governor)
    assert said["neighbour"] == ["still here"], said  # another server still answers, mid-flood
    kinds = [r.get("kind") for r in records(log)]
    assert kinds[0] == "attempt-start" and kinds[-1] == "attempt-end", kinds[-3:]
    assert "before.txt" in json.dumps(outcome), outcome  # the file written before the flood is accounted for
    assert verify(box, log).returncode == 0


def test_a_log_cut_before_its_end_record_does_not_verify_as_signed(
    accounts: dict[str, Account | str], tmp_path: Path
) -> None:
    """What ``audit verify --public-key`` says of a log with no end record (a
    governor that died mid-attempt): never exit 0, which would vouch for it."""
    from governor.audit.signing import keygen

    box = box_for(accounts, "root", "cut")
    private = tmp_path / "key"
    public, _ = keygen(private)
    policy = 'capability = "edit-workspace"\n' + server() + ALLOW
    done, log = run(box, policy, ["call", "enc", "echo", '{"text": "hi"}'],
                    environ={SIGNING_KEY_VARIABLE: private.read_text()})  # fmt: skip
    assert outcome_of(done)["status"] == "completed"
    assert verify(box, log, "--public-key", str(public)).returncode == 0  # the whole log: signed
    lines = log.read_text().splitlines(keepends=True)
    log.write_text("".join(lines[:-1]))  # the end record cut off, as a crash leaves it
    cut = verify(box, log, "--public-key", str(public))
    assert cut.returncode != 0, cut.stdout + cut.stderr


@pytest.mark.parametrize("user", USERS)
def test_in_a_batch_a_job_that_floods_at_a_1024_descriptor_limit_loses_no_other_job(
    accounts: dict[str, Account | str], user: str
) -> None:
    box = box_for(accounts, user, "batch")
    policy = box.write(box.dir / "flood.toml", FLOODED)
    jobs = [
        {"id": "flood", "prompt": "go", "repo": str(box.ws), "policy": str(policy),
         "argv": [PY, str(AGENT), "flood", "governor", "1200", "enc"]},
        {"id": "quiet", "prompt": "go", "repo": str(box.ws), "policy": str(policy),
         "argv": [PY, str(AGENT), "call", "enc", "echo", '{"text": "quiet"}']},
    ]  # fmt: skip
    jobs_path = box.write(box.dir / "jobs.jsonl", "".join(json.dumps(j) + "\n" for j in jobs))
    out = box.dir / "out"
    done = governor(box, ["batch", str(jobs_path), "--out", str(out), "--jobs", "2"], nofile=1024)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    lines = [json.loads(line) for line in (out / "outcomes.jsonl").read_text().splitlines()]
    by_job = {line["job"]: line for line in lines}
    assert sorted(by_job) == ["flood", "quiet"], done.stderr[-3000:]
    assert by_job["quiet"]["status"] == "completed", by_job["quiet"]
    assert by_job["flood"]["status"] in ("completed", "failed"), by_job["flood"]
    for job in by_job:
        assert verify(box, out / job / "audit.jsonl").returncode == 0


@pytest.mark.parametrize("user", USERS)
def test_governor_sandbox_refuses_to_pass_the_signing_keys_variable_and_passes_an_ordinary_one(
    accounts: dict[str, Account | str], user: str
) -> None:
    box = box_for(accounts, user, "sandbox")
    shown = ["--workspace", str(box.ws), "--"]
    done = governor(box, ["sandbox", "--env", SIGNING_KEY_VARIABLE, *shown, "sh", "-c", f"echo ${{#{SIGNING_KEY_VARIABLE}}}"],
                    environ={SIGNING_KEY_VARIABLE: "not-for-any-sandbox"})  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{SIGNING_KEY_VARIABLE} holds the audit log's signing key, named in --env" in done.stderr
    assert "not-for-any-sandbox" not in done.stdout + done.stderr
    done = governor(box, ["sandbox", "--env", "ORDINARY_NAME", *shown, "sh", "-c", "echo $ORDINARY_NAME"],
                    environ={"ORDINARY_NAME": "plain value"})  # fmt: skip
    assert done.returncode == 0 and done.stdout.strip() == "plain value", done.stdout + done.stderr
