"""An outside attack on the host boundary of issue 35 (the helper "breaker",
who built none of it): where the agent can still make a change escape the
record or get a secret out, and where the new mechanisms held.

Each hole is a test marked ``xfail(strict=True)``: it fails today because the
attack works, and the fixer removes the mark. Attacks that held are ordinary
tests.

Real attempts through the real CLI (``python -m governor.cli run --json``), as
root and as the unprivileged govtest user, ``TMPDIR`` under the box (not
``/tmp``) and ``$HOME`` the box's own home (not the passwd home); the agent
does its work with its own shell inside its sandbox (tests/audit/scripted_agent.py),
or turns on the MCP servers it is handed (mcp_agent.py, encoding_server.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from escape_harness import REPO, USERS, Account, Box

SCRIPTED = REPO / "tests" / "audit" / "scripted_agent.py"
MCP_AGENT = Path(__file__).with_name("mcp_agent.py")
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
    box: Box, argv: list[str], *, environ: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """The real CLI as the box's user, ``TMPDIR`` and ``$HOME`` under the box."""
    driver = box.account.driver
    if driver is not None:
        args = [str(a) for a in driver.proc.args]  # runuser ... env -i K=V ... PYTHON DRIVER
        python, prefix = args[-2], args[:-2]
    else:
        site = sysconfig.get_paths()["purelib"]
        python = os.path.realpath(sys.executable)
        prefix = ["env", "-i", f"PYTHONPATH={REPO}:{site}", "PATH=/usr/bin:/bin", "LANG=C.UTF-8"]
    given = {"HOME": str(box.home), "TMPDIR": str(box.dir / "tmp"), **(environ or {})}
    full = [*prefix, *[f"{k}={v}" for k, v in given.items()], python, "-m", "governor.cli", *argv]
    return subprocess.run(full, capture_output=True, text=True, timeout=600)


def python_of(box: Box) -> str:
    driver = box.account.driver
    return (
        [str(a) for a in driver.proc.args][-2]
        if driver is not None
        else os.path.realpath(sys.executable)
    )


def outcome_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.stdout.strip(), f"no outcome (exit {done.returncode}): {done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def scripted_run(box: Box, name: str, policy: str, steps: list[Any]) -> dict[str, Any]:
    """``governor run --json`` with the scripted agent playing ``steps``; the outcome."""
    policy_path = box.write(box.dir / f"{name}.toml", f'capability = "edit-workspace"\n{policy}\n')
    script = box.write(box.dir / f"{name}.json", json.dumps(steps))
    log = box.dir / f"{name}.jsonl"
    python = python_of(box)
    argv = ["run", "--json", "--policy", str(policy_path), "--workspace", str(box.ws), "--log", str(log),
            "go", "--", python, str(SCRIPTED), "--script", str(script)]  # fmt: skip
    return outcome_of(governor(box, argv))


# -- the walk's bound: what git would track is always seen ------------------------------------

BOUND = 50_000  # governor.confine.workspace.MAX_FILES

# Was a hole for an unprivileged governor: git got HOME=/nonexistent and the host door
# made its empty cwd from the child's HOME, so git was never asked what it ignores.
# Closed: the door's folder comes from the governor's own environment.
@pytest.mark.parametrize("user", USERS)
def test_a_file_git_would_track_is_seen_in_a_workspace_with_more_ignored_files_than_the_walks_bound(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Class: a change escapes the record (the walk's bound). The workspace holds
    more ignored build products than the walk's bound (a ``vendor/`` of ``.o``
    files beside a tracked file); the agent plants ``vendor/plugins/conftest.py``
    with its own shell. What git tracks or would track is walked whatever the
    ignored files number (docs: "a new conftest.py ... is always seen"), so the
    planted file is an unasked change. Unprivileged, git is never asked: the
    host door's empty folder is made under the ``HOME=/nonexistent`` git_ignored
    hands it, which only root can create, the refusal is swallowed, and the
    walk stops at the bound before ``vendor/plugins``."""
    box = box_for(accounts, user, "bound")
    box.write(box.ws / ".gitignore", "*.o\n")
    box.write(box.ws / "vendor" / "keep.txt", "tracked, so vendor/ is no ignored folder")
    box.git("add", ".gitignore", "vendor/keep.txt")
    box.git("commit", "-q", "-m", "vendor")
    made = box.host(
        PY, "-c", f"[open(f'vendor/{{i}}.o', 'w').close() for i in range({BOUND + 100})]"
    )
    assert made.returncode == 0, made.stderr
    steps = [{"shell": "cd {cwd} && mkdir vendor/plugins && printf 'import os\\n' > vendor/plugins/conftest.py"},
             {"say": "Done."}]  # fmt: skip
    outcome = scripted_run(box, "bound", "", steps)
    assert outcome["status"] == "completed", outcome.get("reason")
    planted = str(box.ws / "vendor" / "plugins" / "conftest.py")
    assert planted in outcome["acp"]["unasked_paths"], (
        outcome["acp"]["unasked_paths"],
        outcome["acp"]["notices"],
    )


@pytest.mark.parametrize("user", USERS)
def test_a_new_file_beside_a_few_ignored_ones_is_seen_by_every_governor(
    accounts: dict[str, Account | str], user: str
) -> None:
    """The neighbour of the walk's bound: below it, root and govtest alike see
    the planted file (the walk itself works; only the bound's exemption fails)."""
    box = box_for(accounts, user, "few")
    box.write(box.ws / ".gitignore", "*.o\n")
    box.write(box.ws / "vendor" / "keep.txt", "tracked")
    box.write(box.ws / "vendor" / "1.o", "")
    steps = [{"shell": "cd {cwd} && mkdir vendor/plugins && printf 'import os\\n' > vendor/plugins/conftest.py"},
             {"say": "Done."}]  # fmt: skip
    outcome = scripted_run(box, "few", "", steps)
    assert outcome["status"] == "completed", outcome.get("reason")
    assert str(box.ws / "vendor" / "plugins" / "conftest.py") in outcome["acp"]["unasked_paths"]


# -- masking: a server's secret in spellings the masker does not list -------------------------


def mcp_run(
    box: Box, policy: str, agent: list[str], environ: dict[str, str]
) -> tuple[dict[str, Any], Path]:
    policy_path = box.write(box.dir / "policy.toml", policy)
    log = box.dir / "audit.jsonl"
    argv = ["run", "--json", "--policy", str(policy_path), "--workspace", str(box.ws), "--log", str(log),
            "go", "--", PY, str(MCP_AGENT), *agent]  # fmt: skip
    return outcome_of(governor(box, argv, environ=environ)), log


ENC_POLICY = f"""capability = "edit-workspace"
[[mcp.servers]]
name = "enc"
command = ["{PY}", "{SERVER}"]
env = ["SERVICE_TOKEN"]

[mcp.allow]
tools = ["enc.*"]
"""


@pytest.mark.xfail(
    strict=True,
    reason="hole: masking is a list of spellings (clear, base64, hex, URL); a server the agent "
    "can steer hands its secret over reversed, in base32 or in two halves, and the agent "
    "puts it back together",
)
@pytest.mark.parametrize("encoding", ["reversed", "base32", "halves"])
@pytest.mark.parametrize("user", USERS)
def test_a_servers_secret_reaches_the_agent_in_no_spelling_it_can_undo(
    accounts: dict[str, Account | str], user: str, encoding: str
) -> None:
    """Class: a secret gets out (masking by spelling). The operator hands a
    server its token (``env = ["SERVICE_TOKEN"]``); the agent has the server's
    tool give it back in a spelling the masker does not list (a shell-like
    server's ``echo $T | rev``, ``base32``, ``${T:0:10} ${T:10}``) and undoes it.
    The masker knows clear, base64 (three alignments), hex and URL spellings;
    every other reversible transform passes. Closing the class needs the
    secret never to be in what the agent can steer a server to print (a server
    that can run what it is told holds no secret the agent may not have), not a
    longer list of spellings."""
    import base64

    box = box_for(accounts, user, "spell")
    outcome, _log = mcp_run(box, ENC_POLICY, ["call", "enc", "secret",
                                             json.dumps({"name": "SERVICE_TOKEN", "encoding": encoding})],
                           {"SERVICE_TOKEN": TOKEN})  # fmt: skip
    assert outcome["status"] == "completed", outcome
    text = json.loads((box.ws / "answers.json").read_text())["results"][0].split(": ", 1)[1]
    undone = {
        "reversed": lambda t: t[::-1],
        "base32": lambda t: base64.b32decode(t).decode(errors="replace"),
        "halves": lambda t: t.replace(" ", ""),
    }[encoding](text)
    assert undone != TOKEN, f"the agent read the server's secret: {text!r} -> {undone!r}"


@pytest.mark.parametrize("user", USERS)
def test_a_servers_secret_in_clear_or_base64_is_masked_and_ordinary_text_passes(
    accounts: dict[str, Account | str], user: str
) -> None:
    """The spellings the masker does list hold (the neighbour of the hole above)."""
    box = box_for(accounts, user, "listed")
    calls = [
        a
        for e in ("plain", "base64-inside")
        for a in ("secret", json.dumps({"name": "SERVICE_TOKEN", "encoding": e}))
    ]
    outcome, log = mcp_run(box, ENC_POLICY, ["call", "enc", *calls, "echo", json.dumps({"text": "plain words"})],
                           {"SERVICE_TOKEN": TOKEN})  # fmt: skip
    assert outcome["status"] == "completed", outcome
    results = json.loads((box.ws / "answers.json").read_text())["results"]
    assert all("[secret]" in r for r in results[:2]), results
    assert results[2] == "plain words"
    assert TOKEN not in log.read_text()


# -- a batch's output folder: one job's results in every later job's sandbox --------------------


@pytest.fixture
def outside_homes(tmp_path: Path) -> Any:
    """A folder outside every home and temporary folder (where a person keeps a
    batch's results: ``/srv/results``, a data disk), made by root, removed after."""
    import shutil

    if os.getuid() != 0:
        pytest.skip("making a folder outside the homes needs root")
    base = Path("/var/lib") / f"acp-governor-outside-attack-{os.urandom(3).hex()}"
    base.mkdir(mode=0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


# Was a hole: the batch's --out folder and its jobs file were readable from every later
# job's sandbox when they lay outside the homes. Closed: every path the batch reads or
# writes for its operator is masked in every job's sandboxes (batch.runner.operator_paths).
@pytest.mark.parametrize("user", USERS)
def test_a_batch_job_reads_no_other_jobs_results_nor_the_jobs_file(
    accounts: dict[str, Account | str], user: str, outside_homes: Path
) -> None:
    """Class: one attempt reaches another's files. Job b writes its answer;
    job a, run after it, reads ``OUT/b/changes.patch``, ``OUT/outcomes.jsonl``
    and the jobs file (every job's prompt, argv and checks) with its own shell
    and keeps them in its workspace, so its patch carries them. issue 35 moved
    the live job folders under the hidden attempts folder, but what the batch
    writes for the person (``--out``) and reads from them (the jobs file) stay
    where the person put them, shown read-only like the rest of the host. The
    mechanism that closes the class: every path a batch writes or reads for
    its jobs (out folder, jobs file, ``--log`` folders) hidden from every
    sandbox of the batch, as the source repository already is (or a sandbox
    whose host view is a list of what it may see, not of what it may not)."""
    box = box_for(accounts, user, "out")
    place = outside_homes / "batch"
    box.mkdir(place)
    out = place / "out"
    python = python_of(box)
    answer = "THE-ANSWER-OF-JOB-B-" + os.urandom(4).hex()
    held = "held-out-check-" + os.urandom(4).hex()
    jobs_file = place / "jobs.jsonl"

    def job(name: str, shell: str, **more: Any) -> dict[str, Any]:
        script = box.write(
            box.dir / f"{name}.json", json.dumps([{"shell": shell}, {"say": "Done."}])
        )
        return {"id": name, "prompt": "go", "repo": str(box.ws), "capability": "edit-workspace",
                "timeout": 120, "argv": [python, str(SCRIPTED), "--script", str(script)], **more}  # fmt: skip

    steal = (f"cd {{cwd}} && (cat {out}/b/changes.patch {out}/outcomes.jsonl {jobs_file}; true)"
             " > leaked.txt 2>&1")  # fmt: skip
    jobs = [job("b", f"cd {{cwd}} && echo {answer} > answer.txt", checks=[f"echo {held}"]),
            job("a", steal)]  # fmt: skip
    box.write(jobs_file, "".join(json.dumps(j) + "\n" for j in jobs))
    done = governor(box, ["batch", str(jobs_file), "--out", str(out), "--jobs", "1"])
    assert (out / "outcomes.jsonl").exists(), done.stdout[-2000:] + done.stderr[-3000:]
    lines = {
        json.loads(line)["job"]: json.loads(line)
        for line in (out / "outcomes.jsonl").read_text().splitlines()
    }
    assert {j: line["status"] for j, line in lines.items()} == {"b": "completed", "a": "completed"}
    assert answer in (out / "b" / "changes.patch").read_text()  # the neighbour: b's own patch
    stolen = (out / "a" / "changes.patch").read_text()
    assert "b/leaked.txt" in stolen  # a wrote what it found
    assert answer not in stolen and held not in stolen, stolen[:2000]


@pytest.mark.parametrize("user", USERS)
def test_a_run_reads_none_of_the_files_it_writes_or_reads_for_the_person(
    accounts: dict[str, Account | str], user: str, outside_homes: Path
) -> None:
    """Class: an attempt reads what the governor keeps for the person. With
    ``--log``, ``--events``, ``--policy`` and ``--ceiling`` outside the homes
    (a data disk), the agent's own shell reads each and keeps what it found in
    its workspace: the live audit log and event stream (and, with ``--tries``,
    an earlier try's checks' output), the operator's rules. Each is masked in
    every sandbox of the attempt, as a batch's output is; the neighbour: the
    agent still writes its own workspace and the run completes."""
    box = box_for(accounts, user, "runfiles")
    place = outside_homes / "run"
    box.mkdir(place)
    marker = "operator-only-" + os.urandom(4).hex()
    policy = box.write(place / "policy.toml", f'# {marker}\ncapability = "edit-workspace"\n')
    ceiling = box.write(place / "ceiling.toml", f'# {marker}\nallowed_agents = ["acp"]\n')
    log, events = place / "audit.jsonl", place / "events.jsonl"
    shell = (f"cd {{cwd}} && echo mine > mine.txt && (cat {log} {events} {policy} {ceiling}; true)"
             " > leaked.txt 2>&1")  # fmt: skip
    script = box.write(box.dir / "s.json", json.dumps([{"shell": shell}, {"say": "Done."}]))
    python = python_of(box)
    argv = ["run", "--json", "--policy", str(policy), "--ceiling", str(ceiling), "--workspace",
            str(box.ws), "--log", str(log), "--events", str(events),
            "go", "--", python, str(SCRIPTED), "--script", str(script)]  # fmt: skip
    outcome = outcome_of(governor(box, argv))
    assert outcome["status"] == "completed", outcome
    assert (box.ws / "mine.txt").read_text() == "mine\n"  # the neighbour: its own workspace
    leaked = (box.ws / "leaked.txt").read_text()
    assert "attempt-start" not in leaked and marker not in leaked, leaked[:2000]
    assert "attempt-start" in log.read_text()  # the log was there to read


@pytest.mark.parametrize("user", USERS)
def test_a_later_try_and_its_checks_read_no_tries_log(
    accounts: dict[str, Account | str], user: str, outside_homes: Path
) -> None:
    """The same for ``--tries``: each try's log is beside ``--log``
    (``NAME.tryN.jsonl``) and holds its checks' output; a check (workspace code
    in a sandbox of its own) prints every try's log it can read, and the
    outcome keeps the tail: none is readable. The neighbour: both tries run and
    fail on the check, which did run."""
    box = box_for(accounts, user, "trylogs")
    place = outside_homes / "tries"
    box.mkdir(place)
    log = place / "audit.jsonl"
    script = box.write(box.dir / "s.json", json.dumps(
        [{"shell": "cd {cwd} && echo mine > mine.txt"}, {"say": "Done."}]
    ))  # fmt: skip
    check = f"echo checked; cat {log} {place / 'audit.try2.jsonl'} 2>&1; exit 1"
    argv = ["run", "--json", "--policy", "edit-workspace", "--workspace", str(box.ws),
            "--log", str(log), "--tries", "2", "--check", check,
            "go", "--", python_of(box), str(SCRIPTED), "--script", str(script)]  # fmt: skip
    outcome = outcome_of(governor(box, argv))
    assert outcome["verdict"] == "failed", outcome
    assert len(outcome["tries"]) == 2, outcome["tries"]
    tail = outcome["checks_run"][0]["tail"]
    assert "checked" in tail and "attempt-start" not in tail, tail
    assert (place / "audit.try2.jsonl").exists()


@pytest.mark.parametrize("user", USERS)
def test_a_policy_file_in_the_workspace_stays_the_agents_to_read(
    accounts: dict[str, Account | str], user: str
) -> None:
    """The neighbour of the run's masked files: a ``--policy`` (or prompt) file
    inside the workspace is the workspace's, shown as it is (masked, it would
    read as empty and git would see it changed)."""
    box = box_for(accounts, user, "inpolicy")
    policy = box.write(box.ws / "governor.toml", '# ours\ncapability = "edit-workspace"\n')
    box.git("add", "governor.toml")
    box.git("commit", "-q", "-m", "policy")
    shell = "cd {cwd} && cat governor.toml > seen.txt && git status --porcelain > status.txt"
    script = box.write(box.dir / "s.json", json.dumps([{"shell": shell}, {"say": "Done."}]))
    argv = ["run", "--json", "--policy", str(policy), "--workspace", str(box.ws),
            "go", "--", python_of(box), str(SCRIPTED), "--script", str(script)]  # fmt: skip
    outcome = outcome_of(governor(box, argv))
    assert outcome["status"] == "completed", outcome
    assert (box.ws / "seen.txt").read_text() == policy.read_text()
    assert "governor.toml" not in (box.ws / "status.txt").read_text()


# -- a file name that is not UTF-8 ----------------------------------------------------------------

PLANT_BYTES = (
    "cd {cwd} && printf x > \"$(printf 'bad\\377name')\""
    " && mkdir \"$(printf 'd\\376')\" && printf y > \"$(printf 'd\\376')/conftest.py\""
)
"""Files whose names are bytes, not UTF-8 (Linux allows any byte but / and NUL)."""


@pytest.mark.parametrize("user", USERS)
def test_a_batch_job_that_names_a_file_in_bytes_that_are_not_utf8_loses_no_job(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Class: an attempt ends without its records (and a batch loses another
    job). Job b creates ``bad\\xffname`` and ``d\\xfe/conftest.py`` with its own
    shell; a path the governor read with ``os`` holds surrogates, and a
    writer that encodes strictly (the batch's outcome line) raises. Job a asked
    for nothing. The mechanism that closes the class: one spelling for a path
    in every record, outcome and output (its bytes escaped, e.g. JSON with
    ``ensure_ascii`` or ``surrogateescape`` written as ``\\\\xff``), used by every
    writer, so no name an agent chooses can stop a writer."""
    box = box_for(accounts, user, "bytes")
    python = python_of(box)

    def job(name: str, shell: str) -> dict[str, Any]:
        script = box.write(
            box.dir / f"{name}.json", json.dumps([{"shell": shell}, {"say": "Done."}])
        )
        return {"id": name, "prompt": "go", "repo": str(box.ws), "capability": "edit-workspace",
                "timeout": 120, "argv": [python, str(SCRIPTED), "--script", str(script)]}  # fmt: skip

    jobs_file = box.write(box.dir / "jobs.jsonl", "".join(
        json.dumps(j) + "\n" for j in [job("b", PLANT_BYTES), job("a", "cd {cwd} && printf n > notes.txt")]
    ))  # fmt: skip
    out = box.dir / "out"
    done = governor(box, ["batch", str(jobs_file), "--out", str(out), "--jobs", "1"])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    raw = (out / "outcomes.jsonl").read_bytes()
    lines = {json.loads(line)["job"]: json.loads(line) for line in raw.decode().splitlines()}
    assert {j: line["status"] for j, line in lines.items()} == {"b": "completed", "a": "completed"}
    assert "b/notes.txt" in (out / "a" / "changes.patch").read_text()


# Was a hole: `governor run --json` wrote a planted name's raw bytes and the audit log
# spelled it with U+FFFD (two names one). Closed: one spelling, the lone surrogate as its
# JSON escape, in every writer (governor.boundary.spelling).
@pytest.mark.parametrize("user", USERS)
def test_a_file_named_in_bytes_that_are_not_utf8_is_recorded_by_a_name_that_is_its_own(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Class: a change escapes the record (a name the record cannot spell).
    The outcome a ``--json`` reader parses must be UTF-8 JSON, and the log must
    name the very file: ``d\\xfe/conftest.py`` and ``d\\xfd/conftest.py`` are two
    files, not one ``d\\ufffd/conftest.py``."""
    box = box_for(accounts, user, "name")
    policy_path = box.write(box.dir / "p.toml", 'capability = "edit-workspace"\n')
    script = box.write(box.dir / "s.json", json.dumps([{"shell": PLANT_BYTES}, {"say": "Done."}]))
    log = box.dir / "audit.jsonl"
    driver = box.account.driver
    if driver is not None:
        args = [str(a) for a in driver.proc.args]
        python, prefix = args[-2], args[:-2]
    else:
        site = sysconfig.get_paths()["purelib"]
        python = os.path.realpath(sys.executable)
        prefix = ["env", "-i", f"PYTHONPATH={REPO}:{site}", "PATH=/usr/bin:/bin", "LANG=C.UTF-8"]
    argv = [*prefix, f"HOME={box.home}", f"TMPDIR={box.dir / 'tmp'}", python, "-m", "governor.cli",
            "run", "--json", "--policy", str(policy_path), "--workspace", str(box.ws), "--log", str(log),
            "go", "--", python, str(SCRIPTED), "--script", str(script)]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, timeout=600)
    outcome = json.loads(done.stdout.decode("utf-8"))  # strict: what a --json reader does
    assert outcome["status"] == "completed"
    assert len(outcome["acp"]["unasked_paths"]) == 2
    assert "\ufffd" not in log.read_text(), "the log names a file that does not exist"
    # each name is its own: the very bytes back, in the outcome and in the log's records
    planted = {bytes(box.ws) + b"/bad\xffname", bytes(box.ws) + b"/d\xfe/conftest.py"}
    assert {os.fsencode(p) for p in outcome["acp"]["unasked_paths"]} == planted
    named = {os.fsencode(r["subject"]["path"]) for line in log.read_text().splitlines()
             if (r := json.loads(line)).get("kind") == "unasked"}  # fmt: skip
    assert named == planted, named
    # the governor's own readers read it back: the chain verifies, the story names both
    read = [*prefix, f"HOME={box.home}", python, "-m", "governor.cli", "audit"]
    verified = subprocess.run([*read, "verify", str(log)], capture_output=True, timeout=120)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    story = subprocess.run([*read, "--attempt", outcome["run_id"], str(log)],
                           capture_output=True, timeout=120)  # fmt: skip
    assert story.returncode == 0, story.stderr
    shown = story.stdout.decode("utf-8")  # strict: what a terminal gets is UTF-8
    assert "bad\\udcffname" in shown and "d\\udcfe/conftest.py" in shown, shown[-3000:]
    page = subprocess.run([*read, "report", str(log), "-o", "-"], capture_output=True, timeout=120)
    assert page.returncode == 0, page.stderr[-3000:]
    assert "bad\\udcffname" in page.stdout.decode("utf-8")


@pytest.mark.parametrize("user", USERS)
def test_a_signed_attempt_that_names_a_file_in_bytes_that_are_not_utf8_ends_signed(
    accounts: dict[str, Account | str], user: str
) -> None:
    """The same names in a signed log: the end record (which names what
    changed) is parsed back after masking to take its signature, and a name's
    escape must not stop it. The attempt completes, and the chain verifies
    signed by the operator's key."""
    box = box_for(accounts, user, "signed")
    key = box.dir / "key"
    made = governor(box, ["audit", "keygen", str(key)])
    assert made.returncode == 0, made.stderr
    ceiling = box.write(box.dir / "c.toml", f'allowed_agents = ["acp"]\naudit_key = "{key}"\n')
    script = box.write(box.dir / "s.json", json.dumps([{"shell": PLANT_BYTES}, {"say": "Done."}]))
    log = box.dir / "audit.jsonl"
    argv = ["run", "--json", "--ceiling", str(ceiling), "--policy", "edit-workspace",
            "--workspace", str(box.ws), "--log", str(log),
            "go", "--", python_of(box), str(SCRIPTED), "--script", str(script)]  # fmt: skip
    outcome = outcome_of(governor(box, argv))
    assert outcome["status"] == "completed", outcome
    assert len(outcome["acp"]["unasked_paths"]) == 2
    verified = governor(box, ["audit", "verify", "--public-key", f"{key}.pub", str(log)])
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert "signed by key" in verified.stdout
