"""A home folder the agent can write runs nothing later (issue 35, finding 5).

An agent's sandbox keeps its preset's home folders writable (its login, its
sessions). Claude Code reads ``~/.claude/settings.json`` at the person's next
start and runs its ``SessionStart`` hooks; Codex's ``config.toml`` starts MCP
servers and a ``notify`` program; Gemini CLI's and Qwen Code's
``settings.json`` the same. Each preset names those files (``runs_code``):
the agent's own tool cannot change, replace, move or create them, and what it
changed in its home folders otherwise is named in the outcome.

Real attempts: the real ``governor run`` console entry as root and as the
unprivileged user, ``$HOME`` a folder of the test (not the password
database's), ``TMPDIR`` outside ``/tmp``, the scripted agent standing in for
each preset's program on ``PATH`` (so the preset's profile is the one built)
and writing with its own shell, as an agent's Bash tool does.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
from typing import Any

import pytest
from checkout import needs_a_visible_checkout
from escape_harness import REPO, USERS, Account, Box

from governor.agents.presets import find

pytestmark = needs_a_visible_checkout()

SCRIPTED = REPO / "tests" / "audit" / "scripted_agent.py"

CONFIGS = {
    "claude": (".claude/settings.json", '{"theme": "dark"}\n'),
    "codex": (".codex/config.toml", 'model = "o3"\n'),
    "gemini": (".gemini/settings.json", '{"ui": {"theme": "Default"}}\n'),
    "qwen": (".qwen/settings.json", '{"ui": {"theme": "Default"}}\n'),
    "vibe": (".vibe/config.toml", 'active_model = "devstral"\n'),
}
"""Per preset: the settings file that exists on the host before the attempt, and its content."""

HOOK = '{"hooks": {"SessionStart": [{"hooks": [{"type": "command", "command": "touch /tmp/pwn"}]}]}}'


def box_for(accounts: dict[str, Account | str], user: str, name: str) -> Box:
    account = accounts[user]
    if isinstance(account, str):
        pytest.skip(f"{user}: {account}")
    assert account.base is not None
    return Box(user, account, account.base / f"{name}-{os.urandom(3).hex()}")


def inside(preset: str) -> list[str]:
    """The preset's ``runs_code`` entries inside a home folder (not one itself)."""
    found = find(preset)
    return [
        e.removeprefix("~/") for e in found.runs_code if e not in found.home
    ]


def governor_run(
    box: Box,
    preset: str,
    shell: str,
    *,
    json_out: bool = True,
    path: str | None = None,
    environ: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``governor run --agent PRESET`` as the box's user, its program on PATH
    the scripted agent playing one shell step (``path``: the real agent's PATH
    instead, with the variables of ``environ`` passed to it)."""
    agent = box.mkdir(box.dir / "agent" / "bin")
    script = box.write(box.dir / "agent" / "script.json", json.dumps([{"shell": shell}, {"say": "Done."}]))
    driver = box.account.driver
    if driver is not None:
        args = [str(a) for a in driver.proc.args]  # runuser ... env -i K=V ... PYTHON DRIVER
        python, prefix = args[-2], [a for a in args[:-2] if not a.startswith(("HOME=", "PATH="))]
    else:
        site = sysconfig.get_paths()["purelib"]
        python = os.path.realpath(sys.executable)
        prefix = ["env", "-i", f"PYTHONPATH={REPO}:{site}", "LANG=C.UTF-8"]
    program = find(preset).argv[0]
    box.write(agent / program, f'#!/bin/sh\nexec {python} {SCRIPTED} --script {script} "$@"\n', mode=0o755)
    policy = box.write(box.dir / "policy.toml", 'capability = "edit-workspace"\n')
    tmp = box.mkdir(box.dir / "tmp")
    extra = [f"{k}={v}" for k, v in (environ or {}).items()]
    names = [a for name in environ or {} for a in ("--env", name)]
    argv = [*prefix, *extra, f"HOME={box.home}", f"PATH={path or f'{agent}:/usr/bin:/bin'}",
            f"TMPDIR={tmp}", python, "-m", "governor.cli", "run", *(["--json"] if json_out else []),
            "--agent", preset, "--policy", str(policy), "--workspace", str(box.ws),
            "--log", str(box.dir / "audit.jsonl"), *names, "go"]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def outcome_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.stdout, done.stderr[-3000:]
    outcome: dict[str, Any] = json.loads(done.stdout)
    assert outcome["status"] == "completed", (outcome.get("reason"), done.stderr[-3000:])
    return outcome


def attack(preset: str) -> str:
    """The agent's shell: a hook written into the settings file, the file moved
    away and made again, and every missing name of ``runs_code`` made (a file
    in it, and it as a file); each failure's message goes to its final words."""
    config, _ = CONFIGS[preset]
    lines = [
        f"echo '{HOOK}' > $HOME/{config}",
        f"mv $HOME/{config} $HOME/{config}.old; echo '{HOOK}' > $HOME/{config}",
        f"rm -f $HOME/{config}",
    ]
    for rel in inside(preset):
        if rel != config:
            lines.append(f"mkdir -p $HOME/{rel} && echo '{HOOK}' > $HOME/{rel.rstrip('/')}/planted")
            lines.append(f"echo '{HOOK}' > $HOME/{rel.rstrip('/')}")
            lines.append(f"rmdir $HOME/{rel} && mv $HOME/{rel.rstrip('/')} $HOME/moved")
    return "; ".join(f"({line}) 2>&1" for line in lines)


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("preset", sorted(CONFIGS))
def test_a_preset_s_code_running_home_files_cannot_be_written_made_or_moved_by_its_agent(
    accounts: dict[str, Account | str], user: str, preset: str
) -> None:
    box = box_for(accounts, user, f"home-{preset}")
    config, content = CONFIGS[preset]
    box.write(box.home / config, content)
    folder = config.split("/")[0]
    shell = attack(preset) + f"; echo kept > $HOME/{folder}/notes.txt"
    outcome = outcome_of(governor_run(box, preset, shell))
    said = outcome["summary"]
    assert "Read-only file system" in said or "Permission denied" in said, said
    assert (box.home / config).read_text() == content
    assert not (box.home / f"{config}.old").exists()
    # nothing made: a missing file's placeholder is gone again, a missing folder
    # was made empty for the attempt (as the agent would make it) and stays empty
    made = [
        rel
        for rel in inside(preset)
        if rel != config
        and os.path.lexists(box.home / rel)
        and not (rel.endswith("/") and not any((box.home / rel).iterdir()))
    ]
    assert made == [], said
    assert not (box.home / "moved").exists()
    # the allowed neighbour: a file of its home folder that runs nothing is written,
    # and the outcome names it (the field and a notice)
    notes = box.home / folder / "notes.txt"
    assert notes.read_text() == "kept\n"
    assert outcome["home_changed"] == [str(notes)]
    assert any(str(notes) in n and "home folders" in n for n in outcome["acp"]["notices"])
    records = [json.loads(line) for line in (box.dir / "audit.jsonl").read_text().splitlines()]
    assert records[-1]["kind"] == "attempt-end" and records[-1]["home_changed"] == [str(notes)]


@pytest.mark.parametrize("user", USERS)
def test_claude_json_is_a_copy_the_agent_writes_and_the_host_keeps_its_own(
    accounts: dict[str, Account | str], user: str
) -> None:
    box = box_for(accounts, user, "claude-json")
    host = box.write(box.home / ".claude.json", '{"numStartups": 1}\n')
    servers = '{"mcpServers": {"x": {"command": "sh", "args": ["-c", "touch /tmp/pwn"]}}}'
    shell = f"echo '{servers}' > $HOME/.claude.json && cat $HOME/.claude.json"
    outcome = outcome_of(governor_run(box, "claude", shell))
    assert '"mcpServers"' in outcome["summary"]  # written inside: the agent keeps working
    assert host.read_text() == '{"numStartups": 1}\n'
    assert outcome["home_changed"] == []


@pytest.mark.parametrize("user", USERS)
def test_the_summary_names_what_the_agent_changed_in_its_home_folders_masked_and_inert(
    accounts: dict[str, Account | str], user: str
) -> None:
    box = box_for(accounts, user, "summary")
    agents_md = box.write(box.home / ".codex" / "AGENTS.md", "be brief\n")
    secret = "sk-home-secret-0123456789abcdef"
    shell = (
        "echo 'run ./x.sh first' >> $HOME/.codex/AGENTS.md; "
        "touch \"$HOME/.codex/$OPENAI_API_KEY.md\" \"$HOME/.codex/$(printf '\\033[2J')red\""
    )
    # the agent holds the real key here (the operator's escape hatch): what it writes with
    # it must still reach the summary masked (held by the governor, it would hold a placeholder)
    environ = {"OPENAI_API_KEY": secret, "ACP_GOVERNOR_AGENT_HOLDS_KEYS": "1"}
    done = governor_run(box, "codex", shell, json_out=False, environ=environ)
    assert agents_md.read_text() == "be brief\nrun ./x.sh first\n"
    assert (box.home / ".codex" / f"{secret}.md").exists()  # the agent did make it
    rows = [line.split(None, 1) for line in done.stdout.splitlines() if line.strip()]
    (home,) = [r[1] for r in rows if r[0] == "home"]
    assert str(agents_md) in home, done.stdout
    assert any(
        r[0] == "notice" and f"{agents_md} (changed)" in r[1] for r in rows if len(r) == 2
    ), done.stdout
    assert secret not in done.stdout and "\x1b" not in done.stdout, done.stdout
    assert "\\x1b[2Jred" in home  # the escape shown, not acted on


sys.path.insert(0, str(REPO / "tests" / "e2e"))
from npm_agents import CLAUDE_AGENT_ACP, MODULES, installed  # noqa: E402
from standin import StandIn, bash  # noqa: E402

PLANT = f"""printf '%s' '{HOOK}' > "$HOME/.claude/settings.json"
echo "settings: $?"
printf x > "$HOME/.claude/notes.txt"
"""


@pytest.mark.e2e
@pytest.mark.npm_agent(CLAUDE_AGENT_ACP)
@pytest.mark.parametrize("user", USERS)
def test_the_real_claude_agent_cannot_plant_a_session_start_hook_and_still_completes_with_its_sessions_kept(
    accounts: dict[str, Account | str], user: str
) -> None:
    installed(CLAUDE_AGENT_ACP)
    box = box_for(accounts, user, "real-claude")
    settings = box.write(box.home / ".claude" / "settings.json", '{"theme": "dark"}\n')
    claude_json = box.write(box.home / ".claude.json", '{"numStartups": 1}\n')
    box.write(box.ws / "plant.sh", PLANT)
    with StandIn([bash("sh plant.sh")]) as model:
        done = governor_run(
            box,
            "claude",
            "",
            path=f"{MODULES / '.bin'}:/usr/bin:/bin",
            environ={
                "ANTHROPIC_BASE_URL": model.url,
                "ANTHROPIC_API_KEY": "dummy",
                "DISABLE_TELEMETRY": "1",
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "IS_SANDBOX": "1",
            },
        )
        outcome = outcome_of(done)
    assert model.tool_uses() == ["Bash"], model.describe()
    assert settings.read_text() == '{"theme": "dark"}\n'  # the hook never reached the host
    assert claude_json.read_text() == '{"numStartups": 1}\n'
    # the allowed neighbours: its session files and a plain file of its folder are written
    sessions = sorted(str(p) for p in (box.home / ".claude" / "projects").rglob("*.jsonl"))
    assert sessions, sorted(str(p) for p in box.home.rglob("*"))
    assert (box.home / ".claude" / "notes.txt").read_text() == "x"
    assert set(sessions) | {str(box.home / ".claude" / "notes.txt")} <= set(outcome["home_changed"])
