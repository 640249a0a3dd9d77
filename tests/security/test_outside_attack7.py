"""A seventh outside attack (the helper "breakbase", who built none of it): a
paused attempt's saved state and its resume, and ``governor agents import
AGENT.json``, attacked from the agent's side and from a hostile registry
entry's.

Each hole is a test marked ``xfail(strict=True)``: it fails today because the
attack works, and the fixer removes the mark. Its allowed neighbour, and the
attacks that held, are ordinary tests. Real attempts through the real CLI
(``python -m governor.cli``), as root and as the unprivileged govtest user,
``TMPDIR`` under the box and ``$HOME`` the box's own home; the agent is
tests/audit/scripted_agent.py. The harness is test_outside_attack.py's and
test_outside_attack3.py's.

The holes, by class:

- a grant keyed on what is shown, not on what is asked: a person's
  ``--always`` on the paused request (matched on its key, the request whole)
  becomes a grant on its shown text, a permission's *title*, which the agent
  writes; every later permission with that title is allowed "by a person's
  grant", whatever it edits;
- a key that leaves out part of the request: a ``terminal/create``'s key and
  subject hold its environment's names, not their values, so the approved
  command runs again with other values (what the person approved never ran);
- an identity taken from a shared container, on the command line: the
  ``governor approve LOG --request N`` a pause prints decides the log's
  *last* attempt, and every attempt numbers its requests from 1: a second
  attempt paused into the same log gets the person's yes to the first's;
- a limit whose count is not carried across a pause: the tokens the proxy saw
  on the wire (the governor's own count, for an agent whose key the governor
  holds) are not in the paused state, so each part has the whole
  ``[limits] tokens`` again;
- an entry's text printed as it is: a registry entry's ``name``, ``archive``
  and ``cmd`` (escape sequences, BEL, a newline and a line of its own) reach
  the operator's terminal raw through ``governor presets``, ``governor
  doctor`` and a run's not-installed error;
- a file read without checking whose it is: the paused state and its
  pickled baseline are read from whatever state folder the resuming
  process is given, never checked to be its own: root resuming an
  unprivileged user's paused attempt unpickles what that user left, and runs
  it as root.

Closed (issue 38, the helper "resume7"), each by its class's mechanism: a
command's environment values (a digest) and output limit are in its request's
key and its "always" grant, and shown masked; a pause prints its attempt's id
and ``approve``/``resume`` take ``--attempt``, refusing a log of several
paused attempts that names none; the paused state keeps the wire's token
count; the state and its baseline (now JSON) are read only when the reader's
own; an entry with a control character is refused at import, and preset text
reaches a terminal through `governor.boundary.display.terminal`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys as system
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from escape_harness import REPO, USERS, Account, Box
from test_outside_attack import box_for, governor, outcome_of
from test_outside_attack3 import Paused, asking, paused, permission

# -- a person's "always" on one request grants every request with its title -------------------

POLICY_EDITS = '[ask]\ntools = ["edit"]\n'
"""Every edit is asked about."""

TITLE = "Edit notes.md"


def edit(path: str, call: str) -> dict[str, Any]:
    """The agent asks to edit ``path`` (in the workspace) under the one title."""
    return asking(permission(TITLE, "edit", paths=("{cwd}/" + path,), call=call))


def approved_always(accounts: dict[str, Account | str], user: str, name: str) -> tuple[Box, Paused]:
    """The pause on "Edit notes.md" naming ``notes.md``, approved ``--always``
    by the person (the approval shows that request: its title and its path)."""
    box = box_for(accounts, user, name)
    job = Paused(box, name, POLICY_EDITS)
    outcome = paused(job.run([edit("notes.md", "tc-1"), {"say": "Done."}]))
    pending = outcome["pending"]
    assert pending["subject"]["paths"] == [str(box.ws / "notes.md")], pending
    done = job.approve("--request", str(pending["request"]), "--always")
    assert done.returncode == 0, done.stderr
    assert job.records()[-1]["answer"] == "always"
    return box, job


def rulings(job: Paused, seq: int) -> list[dict[str, Any]]:
    """The ruling on each permission past record ``seq``: its request's first
    record (a second one says what the capability makes of the paths it names)."""
    first: dict[int, dict[str, Any]] = {}
    for r in job.records():
        if r["seq"] > seq and r.get("kind") == "permission":
            first.setdefault(r["request"], r)
    return list(first.values())


@pytest.mark.parametrize("user", USERS)
def test_an_always_on_one_edit_lets_the_resumed_agent_make_no_other_edit_under_its_title(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Class: a grant keyed on what is shown. The policy asks before every
    edit. The agent asks "Edit notes.md" naming ``notes.md``; the attempt
    pauses; the person approves it ``--always`` ("allow it, and every
    identical request"). Resumed, the agent asks that again (allowed: the
    person's), then "Edit notes.md" naming ``.github/workflows/ci.yml``: no
    person was shown that path, and it is not the identical request, yet it
    is allowed "by a person's grant". It should pause again."""
    box, job = approved_always(accounts, user, "always-other")
    after = job.records()[-1]["seq"]
    job.plays(
        [edit("notes.md", "tc-2"), edit(".github/workflows/ci.yml", "tc-3"), {"say": "Done."}]
    )
    resumed = job.resume()
    other = [r for r in rulings(job, after)
             if r["subject"].get("paths") == [str(box.ws / ".github/workflows/ci.yml")]]  # fmt: skip
    assert other, job.records()
    assert other[0]["verdict"] != "allow", other[0]
    assert resumed["status"] == "needs_approval", resumed


@pytest.mark.parametrize("user", USERS)
def test_an_always_on_one_edit_lets_the_resumed_agent_make_that_edit_again_and_again(
    accounts: dict[str, Account | str], user: str
) -> None:
    """The neighbour: resumed, the agent asks the very request the person
    approved ``--always``, three times (new tool call ids): each is allowed,
    the first by the person, the others by their grant, and the attempt ends
    completed with a log that verifies."""
    box, job = approved_always(accounts, user, "always-same")
    after = job.records()[-1]["seq"]
    job.plays([edit("notes.md", f"tc-{i}") for i in (2, 3, 4)] + [{"say": "Done."}])
    resumed = job.resume()
    assert resumed["status"] == "completed", resumed
    asked = rulings(job, after)
    assert [(r["subject"]["tool_call"], r["verdict"], r["by"]) for r in asked] == [
        ("tc-2", "allow", "person"), ("tc-3", "allow", "grant"), ("tc-4", "allow", "grant"),
    ], asked  # fmt: skip
    verified = governor(box, ["audit", "verify", str(job.log)])
    assert verified.returncode == 0, verified.stdout + verified.stderr


# -- the tokens seen on the wire start again at zero in each part --------------------------------

E2E = Path(__file__).resolve().parents[1] / "e2e"
PART_TOKENS = 50_000
"""What each answer of the model stand-in costs (its output tokens): claude-agent-acp
reports only the context it holds (a few tokens), the wire sees every call's tokens."""


def paused_and_resumed_claude(tmp_path: Path, tokens: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """claude-agent-acp (the real adapter) with the governor holding its key, a
    model stand-in over HTTPS whose every answer costs ``PART_TOKENS``, a policy
    asking before every edit with ``[limits] tokens = tokens``: ``governor run
    --approvals pause`` (one model call, a Write: paused), ``governor approve``,
    ``governor resume`` (the agent's session resumed: two more calls), through
    the real console script as the README says. The two outcomes."""
    import secrets

    if str(E2E) not in system.path:
        system.path.insert(0, str(E2E))
    from npm_agents import CLAUDE_AGENT_ACP, CLAUDE_ENV, Job, installed, preset_path
    from standin import StandIn, write

    from governor.sandbox.net.tls import UPSTREAM_CA_ENV, AttemptCA

    installed(CLAUDE_AGENT_ACP)
    job = Job.under(tmp_path)
    ca = AttemptCA.make("the stand-in's test CA")
    (tmp_path / "standin-ca.pem").write_bytes(ca.cert_pem)
    policy = tmp_path / "ask.toml"
    policy.write_text(
        f'capability = "edit-workspace"\n[ask]\ntools = ["edit"]\n[limits]\ntokens = {tokens}\n'
    )
    (tmp_path / "tmp").mkdir()
    inside = job.workspace / "inside.txt"
    with StandIn([write(str(inside), "written\n")] * 2, output_tokens=PART_TOKENS,
                 tls=ca.server_context("127.0.0.1")) as model:  # fmt: skip
        environ = job.claude(model.url)["environ"]
        environ["ANTHROPIC_API_KEY"] = "sk-ant-api03-" + secrets.token_urlsafe(60)
        environ["PATH"] = preset_path(environ, "claude-agent-acp")
        environ |= {UPSTREAM_CA_ENV: str(tmp_path / "standin-ca.pem"),
                    "XDG_STATE_HOME": str(tmp_path / "state"), "TMPDIR": str(tmp_path / "tmp")}  # fmt: skip
        cli = str(Path(system.executable).parent / "governor")

        def governor_(*argv: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [cli, *argv], capture_output=True, text=True, timeout=300, env=environ
            )

        names = [w for name in CLAUDE_ENV for w in ("--env", name)]
        done = governor_("run", "--json", "--agent", "claude", "--approvals", "pause",
                         "--policy", str(policy), "--workspace", str(job.workspace),
                         "--log", str(job.log), *names, "Do the task.")  # fmt: skip
        first = outcome_of(done)
        assert first["status"] == "needs_approval", (first, model.describe())
        approved = governor_("approve", str(job.log), "--request", str(first["pending"]["request"]))
        assert approved.returncode == 0, approved.stderr
        second = outcome_of(governor_("resume", "--json", str(job.log)))
    return first, second


@pytest.mark.e2e
def test_the_tokens_seen_on_the_wire_before_a_pause_count_against_the_limit_after_it(
    tmp_path: Path,
) -> None:
    """Class: a count not carried across a pause. The governor holds the agent's
    key and sees every model call: part one makes one call (50,012 tokens on the
    wire) and pauses on its Write; claude-agent-acp reports 13 tokens (the
    context it holds), and 13 is what the paused state keeps. Resumed, part two
    makes two calls (100,024 tokens). Over both parts the wire saw 150,036
    tokens, past the limit of 120,000: the second call of part two should stop
    the attempt at its tokens limit. It completes."""
    first, second = paused_and_resumed_claude(tmp_path, 120_000)
    assert first["usage"]["observed"]["tokens"] > PART_TOKENS
    assert second["status"] == "failed", second
    assert "tokens limit 120000" in second["reason"], second["reason"]


@pytest.mark.e2e
def test_the_tokens_seen_on_the_wire_in_one_part_are_held_against_the_limit(
    tmp_path: Path,
) -> None:
    """The neighbour: the same attempt under a limit of 90,000 is stopped in
    part two, whose own calls (100,024 tokens on the wire) pass it: the wire's
    count holds within a part; across the pause is the hole."""
    _, second = paused_and_resumed_claude(tmp_path, 90_000)
    assert second["status"] == "failed", second
    assert "tokens limit 90000" in second["reason"] and "seen on the wire" in second["reason"]


# -- a registry entry's text on the operator's terminal ------------------------------------------

FAKE_LINE = "  ok  agent hostile: installed, signed in, sandboxed"
"""What the entry's ``archive`` shows as a line of its own after its newline."""


def imported_entry(accounts: dict[str, Account | str], user: str, name: str, archive: str,
                   cmd: str, title: str) -> Box:  # fmt: skip
    """``governor agents import`` of a ``binary`` entry for this machine whose
    ``cmd`` is on no PATH (the operator has not installed it yet)."""
    from governor.agents.registry import platform_key

    box = box_for(accounts, user, name)
    target = {"archive": archive, "sha256": "0" * 64, "cmd": cmd}
    entry = {"id": "hostile", "name": title, "version": "1.0.0", "description": "d",
             "distribution": {"binary": {platform_key(): target}}}  # fmt: skip
    agent_json = box.write(box.dir / "agent.json", json.dumps(entry))
    imported = governor(box, ["agents", "import", str(agent_json)])
    assert imported.returncode == 0, imported.stderr
    return box


def shown(box: Box) -> str:
    """What ``governor presets`` and ``governor run --agent hostile`` print."""
    listed = governor(box, ["presets"])
    assert listed.returncode == 0, listed.stderr
    run = governor(box, ["run", "--agent", "hostile", "--workspace", str(box.ws), "go"])
    assert run.returncode != 0 and "hostile is not installed" in run.stderr, run.stderr
    return listed.stdout + listed.stderr + run.stdout + run.stderr


HOSTILE = {
    "archive": f"https://agents.example/a.tar.gz\n{FAKE_LINE}\x1b[8m",
    "cmd": "./agent\x1b[1m",
    "name": "Hostile\x1b[2J\x1b]0;pwned\x07",
}
"""The entry's texts that write to a terminal: its ``name`` clears the screen and
sets the terminal's title, its ``archive`` ends its line and writes one of its
own, its ``cmd`` turns bold."""


def presets_file(box: Box) -> Path:
    return box.home / ".config" / "acp-governor" / "presets.toml"


@pytest.mark.parametrize("user", USERS)
def test_a_registry_entry_whose_text_holds_a_control_character_is_refused_at_import(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Class: an entry's text printed as it is (closed at the door). An entry
    whose ``name``, ``archive`` or ``cmd`` holds an escape sequence, a BEL or a
    line break is refused by ``governor agents import``, naming the field, and
    no preset is written."""
    from governor.agents.registry import platform_key

    for field, text in HOSTILE.items():
        box = box_for(accounts, user, f"import-refused-{field}")
        target = {"archive": "https://agents.example/a.tar.gz", "sha256": "0" * 64,
                  "cmd": "./hostile-agent"} | ({field: text} if field != "name" else {})  # fmt: skip
        entry = {"id": "hostile", "name": text if field == "name" else "A Hostile Agent",
                 "version": "1.0.0", "description": "d",
                 "distribution": {"binary": {platform_key(): target}}}  # fmt: skip
        agent_json = box.write(box.dir / "agent.json", json.dumps(entry))
        refused = governor(box, ["agents", "import", str(agent_json)])
        assert refused.returncode == 2, (field, refused.stdout, refused.stderr)
        assert "control character" in refused.stderr and field in refused.stderr, refused.stderr
        assert "\x1b" not in refused.stderr and "\x07" not in refused.stderr
        assert not presets_file(box).exists()


@pytest.mark.parametrize("user", USERS)
def test_a_registry_entrys_text_reaches_the_operators_terminal_as_text(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Class: an entry's text printed as it is. The plain entry imported, then
    the operator's presets file holding the hostile texts (the import refuses
    them, a hand-edited file can hold them all the same): listed, run and in
    ``governor doctor``, none reaches the terminal raw."""
    box = imported_entry(
        accounts, user, "import-escapes", "https://agents.example/a.tar.gz", "./hostile-agent",
        "A Hostile Agent",
    )  # fmt: skip
    path = presets_file(box)
    text = path.read_text()
    for plain, field in (("https://agents.example/a.tar.gz", "archive"),
                         ("./hostile-agent", "cmd"), ("A Hostile Agent", "name")):  # fmt: skip
        assert plain in text, (plain, text)
        text = text.replace(plain, json.dumps(HOSTILE[field])[1:-1])  # a TOML string's escapes
    box.write(path, text)
    doctor = governor(box, ["doctor"])
    text = shown(box) + doctor.stdout + doctor.stderr
    assert "\\x1b[2J" in text, text  # the name, shown as text
    raw = [line for line in text.splitlines() if "\x1b" in line or "\x07" in line]
    assert not raw, raw
    assert f"\n{FAKE_LINE}" not in text, [line for line in text.splitlines() if "hostile" in line]


@pytest.mark.parametrize("user", USERS)
def test_a_registry_entrys_plain_text_is_shown_as_given(
    accounts: dict[str, Account | str], user: str
) -> None:
    """The neighbour: an entry's plain text (name, archive, cmd) is what the
    operator sees, listed and in the not-installed error."""
    box = imported_entry(
        accounts, user, "import-plain", "https://agents.example/a.tar.gz", "./hostile-agent",
        "A Hostile Agent",
    )  # fmt: skip
    text = shown(box)
    assert "A Hostile Agent" in text
    assert "download https://agents.example/a.tar.gz" in text
    assert "no hostile-agent on PATH" in text


# -- a paused attempt's state that is not the resuming person's own ------------------------------

PLANT = """
import os, pickle, sys
class Ran:
    def __reduce__(self):
        return (os.system, ("id -u > " + sys.argv[2],))
with open(sys.argv[1], "wb") as f:
    pickle.dump(Ran(), f)
"""
"""What a process of the user who paused can leave as the attempt's baseline:
a pickle that runs a command in whoever loads it, saying who."""


def resumed_by_root(accounts: dict[str, Account | str], name: str, home: Path) -> Box:
    """An attempt of the unprivileged user, paused on an edit (its state in
    that user's ``~/.local/state``); a process of that user
    (its agent at full-access, any program it runs) replaces the baseline kept
    beside the state. Then root decides and resumes it, its own ``$HOME``
    (``home``) and the user's state folder (``XDG_STATE_HOME``: an admin
    going on with a user's paused attempt, a state folder a team shares)."""
    if not isinstance(accounts["root"], Account):
        pytest.skip(str(accounts["root"]))
    box = box_for(accounts, "unprivileged", name)
    job = Paused(box, name, POLICY_EDITS)
    outcome = paused(job.run([edit("notes.md", "tc-1"), {"say": "Done."}]))
    baseline = box.home / ".local/state/acp-governor/paused" / f"{outcome['run_id']}.baseline"
    assert baseline.is_file() and baseline.stat().st_uid == box.uid
    done = box.host("/usr/bin/python3", "-c", PLANT, str(baseline), str(box.dir / "ran-as"))
    assert done.returncode == 0, done.stderr
    (home / "tmp").mkdir(parents=True)
    site = sysconfig.get_paths()["purelib"]
    env = {"PYTHONPATH": f"{REPO}:{site}", "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
           "HOME": str(home), "TMPDIR": str(home / "tmp"),
           "XDG_STATE_HOME": str(box.home / ".local/state")}  # fmt: skip
    python = os.path.realpath(system.executable)
    for argv in (["approve", str(job.log)], ["resume", "--json", str(job.log)]):
        # whether each is refused or goes on, the planted file must not have run
        subprocess.run([python, "-m", "governor.cli", *argv], env=env, capture_output=True,
                       text=True, timeout=300)  # fmt: skip
    return box


def test_a_baseline_another_user_left_runs_nothing_in_the_resuming_governor(
    accounts: dict[str, Account | str], tmp_path: Path
) -> None:
    """Class: a file read without checking whose it is. The unprivileged
    user's attempt pauses; a process of that user (an agent it ran at
    full-access, which is that user) replaces the attempt's baseline with a
    pickle. Root approves and resumes it (its own ``$HOME``, the user's
    ``XDG_STATE_HOME``): the governor unpickles the file, and the user's
    command runs as root. Nothing checks whose the state is, nor that only
    its owner could write it."""
    box = resumed_by_root(accounts, "sudo-resume-planted", tmp_path)
    ran = box.dir / "ran-as"
    assert not ran.exists(), f"the planted baseline ran as uid {ran.read_text().strip()}"


def test_a_paused_attempt_its_own_user_resumes_goes_on_judged_against_its_start(
    accounts: dict[str, Account | str],
) -> None:
    """The neighbour: the unprivileged user's paused attempt, its baseline as
    the governor wrote it, approved and resumed by that user (whose state
    folder it is): it goes on, the edit allowed by the person."""
    box = box_for(accounts, "unprivileged", "own-resume")
    job = Paused(box, "own-resume", POLICY_EDITS)
    outcome = paused(job.run([edit("notes.md", "tc-1"), {"say": "Done."}]))
    assert job.approve("--request", str(outcome["pending"]["request"])).returncode == 0
    resumed = job.resume()
    assert resumed["status"] == "completed", resumed
    assert [r["by"] for r in rulings(job, 0)] == ["unattended", "person"]


# -- a command's environment is neither shown nor part of its key ---------------------------------

POLICY_SH = '[ask]\ncommands = ["sh *"]\n'
"""Every shell the agent asks the client to run is asked about."""


def running(value: str) -> list[Any]:
    """The agent asks the client to run ``sh -c 'printf %s "$MSG" > note.txt'``
    with ``MSG`` set to ``value``, and waits for it to exit."""
    create = {"sessionId": "{session}", "command": "sh",
              "args": ["-c", 'printf %s "$MSG" > note.txt'], "cwd": "{cwd}",
              "env": [{"name": "MSG", "value": value}]}  # fmt: skip
    return [{"request": "terminal/create", "params": create}, {"sleep": 2}, {"say": "Done."}]


def approved_command(
    accounts: dict[str, Account | str], user: str, name: str
) -> tuple[Box, Paused]:
    """The pause on that command with ``MSG=hello``, approved once by the person."""
    box = box_for(accounts, user, name)
    job = Paused(box, name, POLICY_SH)
    outcome = paused(job.run(running("hello")))
    assert outcome["pending"]["kind"] == "terminal", outcome["pending"]
    assert job.approve("--request", str(outcome["pending"]["request"])).returncode == 0
    return box, job


@pytest.mark.parametrize("user", USERS)
def test_an_approved_command_runs_with_no_other_environment_than_the_approved_one(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Class: a key that leaves out part of the request. The person approves
    ``sh -c 'printf %s "$MSG" > note.txt'`` (MSG: ``hello``). Resumed, the
    agent asks the same command with ``MSG`` set to other text: allowed as the
    person's decision, and what the person approved never ran."""
    box, job = approved_command(accounts, user, "env-other")
    job.plays(running("pwned"))
    resumed = job.resume()
    assert not (box.ws / "note.txt").exists() or (box.ws / "note.txt").read_text() != "pwned"
    assert resumed["status"] == "needs_approval", resumed


@pytest.mark.parametrize("user", USERS)
def test_an_approved_command_runs_with_its_approved_environment(
    accounts: dict[str, Account | str], user: str
) -> None:
    """The neighbour: resumed, the agent asks the very command with the very
    environment: allowed by the person, run, its note written."""
    box, job = approved_command(accounts, user, "env-same")
    resumed = job.resume()
    assert resumed["status"] == "completed", resumed
    assert (box.ws / "note.txt").read_text() == "hello"


@pytest.mark.parametrize("user", USERS)
def test_an_always_on_a_command_covers_it_again_with_its_environment_and_never_with_another(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Class: a key that leaves out part of the request, for an "always": the
    person approves the command with ``MSG=hello`` for the rest of the attempt.
    Resumed, the agent runs it, runs it again (the person's grant: the same
    command, the same environment), then asks it with ``MSG`` set to other text:
    no grant covers that, and the attempt pauses on it; the note says hello."""
    box = box_for(accounts, user, "env-always")
    job = Paused(box, "env-always", POLICY_SH)
    outcome = paused(job.run(running("hello")))
    after = job.records()[-1]["seq"]
    done = job.approve("--request", str(outcome["pending"]["request"]), "--always")
    assert done.returncode == 0, done.stderr
    assert "env MSG=hello" in done.stdout, done.stdout  # what was approved, shown whole
    job.plays(running("hello")[:2] + running("hello")[:2] + running("pwned"))
    resumed = job.resume()
    assert resumed["status"] == "needs_approval", resumed
    first: dict[int, dict[str, Any]] = {}
    for r in job.records():
        if r["seq"] > after and r.get("kind") == "terminal" and "verdict" in r:
            first.setdefault(r["request"], r)
    ruled = [(r["verdict"], r["by"]) for r in first.values()]
    assert ruled[:2] == [("allow", "person"), ("allow", "grant")], ruled
    assert len(ruled) == 3 and ruled[2][0] != "allow", ruled  # waits for a person
    assert (box.ws / "note.txt").read_text() == "hello"


# -- what held ------------------------------------------------------------------------------------


@pytest.mark.parametrize("user", USERS)
def test_a_registry_entry_neither_takes_a_shipped_id_nor_writes_a_table_of_its_own(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Held: an entry whose ``id`` is a shipped preset's (``claude``) is refused
    and nothing is written; one whose ``name`` and ``archive`` spell a TOML
    table (``[claude]`` with ``argv = ["/bin/sh"]``) is refused at the door (its
    line breaks), and the writer, given those texts all the same (an operator's
    own words), writes them as values of the one table; ``claude`` is still the
    shipped one."""
    import tomllib

    from governor.agents.registry import platform_key, toml_table

    box = box_for(accounts, user, "import-held")
    toml = '"\n[claude]\nargv = ["/bin/sh", "-c", "id"]\n#'
    plain = {"archive": "https://agents.example/a.tar.gz", "sha256": "0" * 64,
             "cmd": "./hostile-agent"}  # fmt: skip
    entry = {"id": "claude", "name": "Hostile", "version": "1.0.0", "description": "d",
             "distribution": {"binary": {platform_key(): plain}}}  # fmt: skip
    presets_file = box.home / ".config" / "acp-governor" / "presets.toml"
    agent_json = box.write(box.dir / "agent.json", json.dumps(entry))
    refused = governor(box, ["agents", "import", str(agent_json)])
    assert refused.returncode == 2 and "shipped preset's id" in refused.stderr, refused.stderr
    assert not presets_file.exists()
    target = plain | {"archive": f"https://agents.example/a.tar.gz{toml}"}
    spelt = {**entry, "id": "hostile", "name": f"Hostile{toml}",
             "distribution": {"binary": {platform_key(): target}}}  # fmt: skip
    box.write(agent_json, json.dumps(spelt))
    refused = governor(box, ["agents", "import", str(agent_json)])
    assert refused.returncode == 2 and "control character 0x0a" in refused.stderr, refused.stderr
    assert not presets_file.exists()
    written = tomllib.loads(toml_table("hostile", {"name": f"Hostile{toml}", "argv": ["x"]}))
    assert written == {"hostile": {"name": f"Hostile{toml}", "argv": ["x"]}}
    listed = governor(box, ["presets", "--json"])
    assert listed.returncode == 0, listed.stderr
    rows = {r["id"]: r for r in json.loads(listed.stdout)["presets"]}
    assert "hostile" not in rows and "/bin/sh" not in json.dumps(rows["claude"])


@pytest.mark.parametrize("user", USERS)
def test_a_copy_of_a_paused_attempts_log_decides_and_resumes_nothing(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Held: the paused attempt's log, copied whole into the workspace (a chain
    that verifies, naming the paused attempt's id: what an agent that forged
    one would hand the person) is refused by ``governor approve`` and
    ``governor resume``, naming the log the attempt paused with; the attempt's
    own log is then approved and resumed as ever."""
    box = box_for(accounts, user, "copied-log")
    job = Paused(box, "copied-log", POLICY_EDITS)
    outcome = paused(job.run([edit("notes.md", "tc-1"), {"say": "Done."}]))
    copy = box.write(box.ws / "audit.jsonl", job.log.read_text())
    for argv in (["approve", str(copy)], ["resume", "--json", str(copy)]):
        done = governor(box, argv)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert f"paused with its log at {job.log}" in done.stderr, done.stderr
    assert copy.read_text() == job.log.read_text() == job.log.read_text()
    assert job.approve("--request", str(outcome["pending"]["request"])).returncode == 0
    assert job.resume()["status"] == "completed"


# -- the command a pause prints decides another attempt's request --------------------------------


def two_paused_in_one_log(
    accounts: dict[str, Account | str], user: str, name: str
) -> tuple[Paused, dict[str, Any], dict[str, Any], str]:
    """Attempt A pauses on "Edit notes.md" and prints how to go on; then attempt
    B, run later into the same ``--log`` (a log several attempts share, as
    ``--log`` allows), pauses on its own first request: "Edit deploy/prod.sh".
    A's outcome, B's, and the approve command A's pause printed."""
    box = box_for(accounts, user, name)
    job = Paused(box, name, POLICY_EDITS)
    done = job.run([edit("notes.md", "tc-1"), {"say": "Done."}])
    first = paused(done)
    (printed,) = [line.strip() for line in done.stderr.splitlines() if "governor approve" in line]
    second = paused(job.run([edit("deploy/prod.sh", "tc-1"), {"say": "Done."}]))
    assert first["run_id"] != second["run_id"]
    assert first["pending"]["request"] == second["pending"]["request"] == 1
    return job, first, second, printed


@pytest.mark.parametrize("user", USERS)
def test_the_approve_command_a_pause_prints_decides_that_attempts_request(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Class: an identity taken from a shared container. A pauses and prints
    ``governor approve LOG --request 1``; B, run into the same log, pauses on
    its own request 1. The person reads A's pause and types its command: the
    decision is written for B (its request: deploy/prod.sh, never shown to
    them), and ``governor resume LOG`` runs B's edit as approved."""
    job, first, _, printed = two_paused_in_one_log(accounts, user, "shared-log")
    words = printed.split()
    assert words[:2] == ["governor", "approve"] and "(or" not in words[:5], printed
    done = governor(job.box, words[1 : words.index("(or") if "(or" in words else None])
    assert done.returncode == 0, done.stderr
    approval = job.records()[-1]
    assert approval["kind"] == "approval"
    assert approval["attempt"] == first["run_id"], (approval["attempt"], approval["subject"])


@pytest.mark.parametrize("user", USERS)
def test_the_approve_command_a_pause_prints_decides_its_request_in_a_log_of_its_own(
    accounts: dict[str, Account | str], user: str
) -> None:
    """The neighbour: A alone in its log; the command its pause printed decides
    A's request, and A goes on."""
    box = box_for(accounts, user, "own-log")
    job = Paused(box, "own-log", POLICY_EDITS)
    done = job.run([edit("notes.md", "tc-1"), {"say": "Done."}])
    first = paused(done)
    (printed,) = [line.strip() for line in done.stderr.splitlines() if "governor approve" in line]
    words = printed.split()
    approved = governor(box, words[1 : words.index("(or")])
    assert approved.returncode == 0, approved.stderr
    assert job.records()[-1]["attempt"] == first["run_id"]
    assert job.resume()["status"] == "completed"


@pytest.mark.parametrize("user", USERS)
def test_a_log_of_several_paused_attempts_decides_none_unnamed_and_the_named_one_by_its_id(
    accounts: dict[str, Account | str], user: str
) -> None:
    """The mechanism's other side: A and B paused into one log; ``governor
    approve LOG --request 1`` and ``governor resume LOG``, naming no attempt,
    are refused, the error listing both ids, and nothing is written; named
    ``--attempt B``, B's own request is decided and B goes on."""
    job, first, second, _ = two_paused_in_one_log(accounts, user, "shared-unnamed")
    before = job.log.read_text()
    for argv in (["approve", str(job.log), "--request", "1"], ["resume", "--json", str(job.log)]):
        done = governor(job.box, argv)
        assert done.returncode == 2, (argv, done.stdout, done.stderr)
        assert "--attempt" in done.stderr, done.stderr
        assert first["run_id"] in done.stderr and second["run_id"] in done.stderr, done.stderr
    assert job.log.read_text() == before
    named = governor(job.box, ["approve", str(job.log), "--attempt", second["run_id"], "--request", "1"])
    assert named.returncode == 0, named.stderr
    approval = job.records()[-1]
    assert (approval["kind"], approval["attempt"]) == ("approval", second["run_id"])
    assert approval["subject"]["paths"] == [str(job.box.ws / "deploy/prod.sh")]
