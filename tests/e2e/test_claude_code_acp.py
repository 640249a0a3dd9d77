"""claude-code-acp 0.16.2 (Claude Code 2.1.44 inside), driven by the loopback model stand-in.

With ``fs`` and ``terminal`` advertised it routes its Read, Write, Edit and Bash
tools through the client, so every file and command the scripted model asks for
comes to the governor: a permission request first (not for reads), then
``fs/*`` or ``terminal/*``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import trio
from npm_agents import CLAUDE_CODE_ACP, Job, installed, records, tally_without_network
from standin import StandIn, bash, edit, read, stalled, write
from toolchain_home import (
    AVAILABLE,
    COMMIT,
    PROBE,
    WHY_NOT,
    check_probe_and_commit,
    developer_workspace,
)

from governor.attempt.lifecycle import run_attempt
from governor.audit.reading import decision_records
from governor.policies.policy import parse_policy

pytestmark = [pytest.mark.e2e, pytest.mark.npm_agent(CLAUDE_CODE_ACP)]


async def test_a_write_is_asked_allowed_once_and_done_by_the_governor(job: Job) -> None:
    target = job.workspace / "hello.txt"
    with StandIn([write(str(target), "hello from the model\n")], final="Wrote it.") as model:
        outcome = await run_attempt(job.spec(installed(CLAUDE_CODE_ACP), **job.claude(model.url)))
    assert model.tool_uses() == ["mcp__acp__Write"], model.describe()
    assert outcome.status == "completed", outcome.reason
    assert outcome.summary == "Wrote it."
    assert target.read_text() == "hello from the model\n"
    (asked,) = records(outcome, "permission")
    assert (asked["verdict"], asked["option"]) == ("allow", "allow")  # never allow_always
    (wrote,) = records(outcome, "write")
    assert (wrote["subject"]["path"], wrote["verdict"]) == (str(target), "allow")
    assert outcome.acp is not None and outcome.acp.unasked == 0
    assert [c["status"] for c in job.tool_calls()][-1] == "completed"
    job.verified_log()


async def test_an_edit_reads_then_writes_the_file_through_the_governor(job: Job) -> None:
    notes = job.workspace / "notes.txt"
    notes.write_text("alpha\nbeta\n")
    with StandIn([edit(str(notes), "beta", "gamma")]) as model:
        outcome = await run_attempt(job.spec(installed(CLAUDE_CODE_ACP), **job.claude(model.url)))
    assert model.tool_uses() == ["mcp__acp__Edit"], model.describe()
    assert outcome.status == "completed", outcome.reason
    assert notes.read_text() == "alpha\ngamma\n"
    assert [r["verdict"] for r in records(outcome, "permission")] == ["allow"]
    assert [r["subject"]["path"] for r in records(outcome, "read")] == [str(notes)]
    assert [r["subject"]["path"] for r in records(outcome, "write")] == [str(notes)]
    assert outcome.acp is not None and outcome.acp.unasked == 0


async def test_a_read_is_served_by_the_governor_without_a_permission_request(job: Job) -> None:
    notes = job.workspace / "notes.txt"
    notes.write_text("the secret word is marmalade\n")
    with StandIn([read(str(notes))]) as model:
        outcome = await run_attempt(job.spec(installed(CLAUDE_CODE_ACP), **job.claude(model.url)))
    assert outcome.status == "completed", outcome.reason
    assert records(outcome, "permission") == []
    (done,) = records(outcome, "read")
    assert (done["subject"]["path"], done["verdict"]) == (str(notes), "allow")
    # What the governor read is what the model got back.
    (result,) = model.tool_results()
    assert "marmalade" in str(result["content"]), model.tool_results()


async def test_a_shell_line_runs_whole_in_a_governed_terminal_and_its_output_reaches_the_model(
    job: Job,
) -> None:
    line = "echo governed-$((6*7)); printf '%s\\n' one two | wc -l"
    with StandIn([bash(line)]) as model:
        outcome = await run_attempt(job.spec(installed(CLAUDE_CODE_ACP), **job.claude(model.url)))
    assert model.tool_uses() == ["mcp__acp__Bash"], model.describe()
    assert outcome.status == "completed", outcome.reason
    assert {r["verdict"] for r in records(outcome, "permission")} == {"allow"}
    commands = {r["request"]: r for r in records(outcome, "terminal")}
    assert len(commands) == 1, list(decision_records(outcome.log, outcome.run_id))
    (ran,) = commands.values()
    assert (ran["subject"]["command"], ran["verdict"]) == (line, "allow")
    (result,) = model.tool_results()
    assert "governed-42" in str(result["content"]) and "2" in str(result["content"])
    assert not result.get("is_error"), result
    assert [c["status"] for c in job.tool_calls()][-1] == "completed"
    assert outcome.acp is not None and outcome.acp.unasked == 0


async def test_a_command_the_policy_denies_is_refused_recorded_and_never_runs(job: Job) -> None:
    victim = job.workspace / "x"
    victim.mkdir()
    (victim / "keep.txt").write_text("keep me\n")
    policy = parse_policy('capability = "edit-workspace"\n[deny]\ncommands = ["rm *"]', "e2e")
    with StandIn([bash("rm -rf x")], final="Could not remove it.") as model:
        outcome = await run_attempt(
            job.spec(
                installed(CLAUDE_CODE_ACP), policy=policy, capability=None, **job.claude(model.url)
            )
        )
    assert (victim / "keep.txt").read_text() == "keep me\n"
    (refused,) = records(outcome, "permission")
    assert refused["subject"]["command"] == "rm -rf x"
    assert (refused["verdict"], refused["rule"], refused["option"]) == (
        "deny",
        "deny: rm *",
        "reject",
    )
    assert records(outcome, "terminal") == []
    # Claude Code fails the tool call ("User refused permission") and ends its
    # turn there (end_turn) without going back to the model.
    assert model.tool_results() == [], model.describe()
    assert outcome.status == "completed", outcome.reason
    stand_in = model.url.split("//")[1].split("/")[0]
    assert tally_without_network(outcome, stand_in)[2] == 1  # its api.anthropic.com call aside
    assert [c["status"] for c in job.tool_calls()][-1] == "failed"
    job.verified_log()


async def test_a_timeout_while_the_model_thinks_cancels_the_turn_and_nothing_after_it_happens(
    job: Job,
) -> None:
    first, second = job.workspace / "first.txt", job.workspace / "second.txt"
    steps = [write(str(first), "1\n"), stalled(write(str(second), "2\n"))]
    with StandIn(steps) as model:
        outcome = await run_attempt(
            job.spec(installed(CLAUDE_CODE_ACP), timeout=10, **job.claude(model.url))
        )
        assert model.stalling.is_set(), model.describe()  # the turn was mid-way
    assert outcome.status == "failed"
    assert "did not finish within 10 s (the wall limit); its turn was cancelled" in (outcome.reason or "")
    assert first.read_text() == "1\n"
    assert not second.exists()
    assert [r["subject"]["path"] for r in records(outcome, "write")] == [str(first)]
    assert [r["kind"] for r in job.verified_log()][-1] == "attempt-end"


async def test_with_no_model_credentials_the_prompt_fails_asking_to_sign_in(job: Job) -> None:
    (job.workspace / "notes.txt").write_text("untouched\n")
    outcome = await run_attempt(
        job.spec(
            installed(CLAUDE_CODE_ACP),
            environ=job.environ(
                DISABLE_TELEMETRY="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1", IS_SANDBOX="1"
            ),
            env=["DISABLE_TELEMETRY", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "IS_SANDBOX"],
        )
    )
    assert outcome.status == "failed"
    assert outcome.sign_in, outcome.reason
    assert "needs signing in" in (outcome.reason or "")
    assert outcome.sign_in in (outcome.reason or "")
    assert [r["kind"] for r in decision_records(outcome.log, outcome.run_id)] == ["mode"]  # session/new worked; nothing ran
    assert [p.name for p in job.workspace.iterdir()] == ["notes.txt"]
    job.verified_log()


@pytest.mark.skipif(not AVAILABLE, reason=WHY_NOT)
async def test_the_persons_toolchain_in_home_runs_in_a_governed_terminal_and_secrets_stay_hidden(
    job: Job,
) -> None:
    # HOME is the job's, not the password database's (as in a CI container)
    canary = "CANARY-toolchain-terminal"
    toolchain = developer_workspace(job.home, job.workspace, canary)
    with StandIn([bash(f"{PROBE}; {COMMIT}")]) as model:
        kw = job.claude(model.url)
        kw["environ"]["PATH"] = f"{toolchain.path}:{kw['environ']['PATH']}"
        outcome = await run_attempt(job.spec(installed(CLAUDE_CODE_ACP), **kw))
    assert model.tool_uses() == ["mcp__acp__Bash"], model.describe()
    assert outcome.status == "completed", outcome.reason
    commands = {r["request"]: r["verdict"] for r in records(outcome, "terminal")}
    assert list(commands.values()) == ["allow"], list(decision_records(outcome.log, outcome.run_id))
    (result,) = model.tool_results()
    text = str(result["content"])
    check_probe_and_commit(text, toolchain, canary, job.workspace)


async def test_the_event_stream_holds_every_decision_of_the_log_in_order(job: Job) -> None:
    line = "echo governed; ls"
    steps = [write(str(job.workspace / "a.txt"), "a\n"), bash(line), read(str(job.workspace / "a.txt"))]
    with StandIn(steps) as model:
        kw = job.claude(model.url)
        names = [word for name in kw["env"] for word in ("--env", name)]
        argv = [str(Path(sys.executable).parent / "governor"), "run", "--capability",
                "edit-workspace", "--workspace", str(job.workspace), "--log", str(job.log),
                "--events", "-", *names, "Do the task.", "--", *installed(CLAUDE_CODE_ACP)]
        done = await trio.run_process(argv, env=kw["environ"], capture_stdout=True, check=False)
    assert done.returncode == 0, done.stdout[-2000:]
    events = [json.loads(x) for x in done.stdout.decode().splitlines()]  # nothing else
    assert events[-1]["type"] == "outcome" and events[-1]["outcome"]["status"] == "completed"
    decided = [(e["seq"], e["kind"], e["verdict"]) for e in events if e["type"] == "decision"]
    logged = [
        (r["seq"], r["kind"], r["verdict"])
        for r in job.verified_log()
        if r["kind"] in ("permission", "read", "write", "terminal", "network")
    ]
    assert decided == logged and len(decided) >= 5, (decided, logged)
    assert [e["n"] for e in events] == list(range(1, len(events) + 1))
