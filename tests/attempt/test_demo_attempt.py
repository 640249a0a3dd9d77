"""A governed attempt against the bundled demo agent, a real subprocess over real pipes."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from governor.attempt.lifecycle import run_attempt
from governor.audit.reading import decision_records
from governor.audit.verify import read_lines, verify
from governor.gate.approver import Ask
from governor.job.spec import AttemptSpec, RefusedBeforeStart
from governor.policies.capability import Capability
from governor.policies.ceiling import Ceiling
from governor.policies.policy import parse_policy

DEMO = [
    sys.executable,
    str(Path(__file__).resolve().parents[2] / "governor" / "agents" / "demo.py"),
]
EDIT = parse_policy('capability = "edit-workspace"', "test")


def spec(tmp_path: Path, **kw: object) -> AttemptSpec:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    base: dict[str, object] = {
        "prompt": "make a hello program",
        "agent": "demo",
        "workspace": ws,
        "policy": EDIT,
        "log": tmp_path / "audit.jsonl",
        "timeout": 60,
    }
    base.update(kw)
    return AttemptSpec(**base)  # type: ignore[arg-type]


async def test_the_demo_attempt_completes_with_a_refusal_and_an_unasked_change(
    tmp_path: Path,
) -> None:
    outcome = await run_attempt(spec(tmp_path))
    assert outcome.status == "completed", outcome.reason
    assert outcome.acp is not None
    t = outcome.acp.tally
    assert t.refused >= 1 and t.unasked >= 1 and t.allowed >= 3
    ws = tmp_path / "ws"
    assert (ws / "hello.py").read_text() == 'print("hello from the demo agent")\n'
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()
    assert str(ws / "NOTES.md") in outcome.acp.unasked_paths
    assert outcome.acp.decides_alone  # it changed something without asking
    assert json.loads(json.dumps(outcome.to_json()))["status"] == "completed"


async def test_every_decision_is_in_the_log_and_the_log_verifies(tmp_path: Path) -> None:
    outcome = await run_attempt(spec(tmp_path))
    log = tmp_path / "audit.jsonl"
    result = verify(read_lines(log))
    assert result.problem is None and result.unfinished == ()
    kinds = [r["kind"] for _, r, _ in read_lines(log) if r]
    assert kinds[0] == "attempt-start" and kinds[-1] == "attempt-end"
    logged = [
        r for _, r, _ in read_lines(log) if r and r["kind"] not in ("attempt-start", "attempt-end")
    ]
    assert [r["hash"] for r in logged] == [
        r["hash"] for r in decision_records(outcome.log, outcome.run_id)
    ]


async def test_a_read_only_job_is_refused_the_write_and_the_file_never_appears(
    tmp_path: Path,
) -> None:
    outcome = await run_attempt(
        spec(tmp_path, policy=None, capability=Capability.READ_ONLY, sandbox_agent=True)
    )
    assert not (tmp_path / "ws" / "hello.py").exists()
    assert outcome.acp is not None and outcome.acp.tally.refused >= 2


async def test_an_agent_that_says_blocked_ends_blocked(tmp_path: Path) -> None:
    outcome = await run_attempt(
        spec(
            tmp_path,
            agent=None,
            argv=[*DEMO, "--steps", "0", "--final", "BLOCKED: the spec contradicts the test"],
        )
    )
    assert (outcome.status, outcome.reason) == ("blocked", "the spec contradicts the test")


async def test_pause_ends_the_attempt_needing_approval_with_the_pending_request(
    tmp_path: Path,
) -> None:
    policy = parse_policy(
        'capability = "edit-workspace"\non_ask = "pause"\n[ask]\ntools = ["edit"]', "t"
    )
    outcome = await run_attempt(spec(tmp_path, policy=policy))
    assert outcome.status == "needs_approval"
    assert outcome.pending is not None and outcome.pending["subject"]["title"] == "Write hello.py"
    assert not (tmp_path / "ws" / "hello.py").exists()


@pytest.mark.parametrize("word", ["person", "Pause", "refuse", 3])
def test_an_approver_that_is_neither_a_function_nor_a_known_word_is_refused_when_the_spec_is_built(
    tmp_path: Path, word: object
) -> None:
    with pytest.raises(TypeError, match=r"is the command line's terminal prompt|is not an approver"):
        spec(tmp_path, approver=word)


async def test_the_approver_may_be_named_by_word_as_the_command_line_does(tmp_path: Path) -> None:
    asks = parse_policy('capability = "edit-workspace"\n[ask]\ntools = ["edit"]', "t")
    outcome = await run_attempt(spec(tmp_path, policy=asks, approver="pause"))
    assert outcome.status == "needs_approval"  # the policy's on_ask is "refuse": the word won
    (tmp_path / "u").mkdir()
    again = await run_attempt(spec(tmp_path / "u", policy=asks, approver="unattended"))
    assert again.status == "completed" and again.acp is not None and again.acp.tally.refused >= 1


async def test_a_callback_approver_decides_asks_and_is_recorded_as_a_person(tmp_path: Path) -> None:
    seen: list[Ask] = []

    def approve(ask: Ask) -> bool:
        seen.append(ask)
        return True

    policy = parse_policy('capability = "edit-workspace"\n[ask]\ntools = ["edit"]', "t")
    outcome = await run_attempt(spec(tmp_path, policy=policy, approver=approve))
    assert outcome.status == "completed"
    assert [a.subject for a in seen][:1] == ["Write hello.py"]
    assert outcome.acp is not None and outcome.acp.tally.waited >= 1
    assert (tmp_path / "ws" / "hello.py").exists()


async def test_the_ceiling_refuses_before_anything_starts_listing_every_violation(
    tmp_path: Path,
) -> None:
    ceiling = Ceiling(max_capability=Capability.READ_ONLY, allowed_agents=("codex",))
    with pytest.raises(RefusedBeforeStart) as e:
        await run_attempt(
            spec(tmp_path, ceiling=ceiling, agent_args=["--api-key=sk-live-abcdef0123456789"])
        )
    text = str(e.value)
    assert "agent demo is not permitted" in text
    assert "requested capability edit-workspace exceeds the permitted maximum read-only" in text
    assert "1 requested" in text and "sk-live" not in text
    assert not (tmp_path / "audit.jsonl").exists()


async def test_unset_declared_variables_are_all_reported_before_spawning(tmp_path: Path) -> None:
    with pytest.raises(RefusedBeforeStart) as e:
        await run_attempt(
            spec(
                tmp_path,
                env=["GOVTEST_A", "GOVTEST_B"],
                environ={"PATH": "/usr/bin", "GOVTEST_B": ""},
            )
        )
    assert "GOVTEST_A, GOVTEST_B" in str(e.value)


async def test_a_timeout_cancels_the_turn_and_fails_naming_the_limit(tmp_path: Path) -> None:
    sleeper = tmp_path / "sleeper.py"
    sleeper.write_text(
        "import json,sys\n"
        "for line in sys.stdin:\n"
        "    m=json.loads(line)\n"
        "    if m.get('method')=='initialize': r={'protocolVersion':1}\n"
        "    elif m.get('method')=='session/new': r={'sessionId':'s'}\n"
        "    else: continue\n"
        "    print(json.dumps({'jsonrpc':'2.0','id':m['id'],'result':r}),flush=True)\n"
    )
    outcome = await run_attempt(
        spec(tmp_path, agent=None, argv=[sys.executable, str(sleeper)], timeout=1.0)
    )
    assert outcome.status == "failed"
    assert "did not finish within 1 s" in (outcome.reason or "")


async def test_an_agent_speaking_another_protocol_version_is_refused_with_a_reason(
    tmp_path: Path,
) -> None:
    agent = tmp_path / "v2.py"
    agent.write_text(
        "import json,sys\n"
        "m=json.loads(sys.stdin.readline())\n"
        "print(json.dumps({'jsonrpc':'2.0','id':m['id'],'result':{'protocolVersion':2}}),flush=True)\n"
        "sys.stdin.read()\n"
    )
    outcome = await run_attempt(spec(tmp_path, agent=None, argv=[sys.executable, str(agent)]))
    assert outcome.status == "failed"
    assert "protocol version 2" in (outcome.reason or "")


async def test_an_agent_that_needs_signing_in_fails_with_the_login_command(tmp_path: Path) -> None:
    agent = tmp_path / "auth.py"
    agent.write_text(
        "import json,sys\n"
        "for line in sys.stdin:\n"
        "    m=json.loads(line)\n"
        "    if m.get('method')=='initialize':\n"
        "        out={'result':{'protocolVersion':1,'authMethods':[{'id':'login','name':'Log in','_meta':{'terminal-auth':{'command':'my-agent','args':['login']}}}]}}\n"
        "    elif m.get('method')=='session/new':\n"
        "        out={'error':{'code':-32000,'message':'Authentication required'}}\n"
        "    else: continue\n"
        "    print(json.dumps({'jsonrpc':'2.0','id':m['id'],**out}),flush=True)\n"
    )
    outcome = await run_attempt(spec(tmp_path, agent=None, argv=[sys.executable, str(agent)]))
    assert outcome.status == "failed"
    assert outcome.sign_in == "my-agent login"
    assert "needs signing in: my-agent login" in (outcome.reason or "")


async def test_a_plain_command_gets_the_prompt_on_stdin_and_is_judged_by_its_output_and_diff(
    tmp_path: Path,
) -> None:
    """Its changes are its work: recorded as its own (``changed`` by the agent,
    explained by the ``program`` rule), never as done without asking."""
    script = tmp_path / "tool.sh"
    script.write_text('#!/bin/sh\nread task\necho "$task" > done.txt\necho "did: $task"\n')
    script.chmod(0o755)
    outcome = await run_attempt(
        spec(tmp_path, agent=None, argv=[str(script)], kind="command", prompt="paint it\n")
    )
    assert outcome.status == "completed", outcome.reason
    assert outcome.summary == "did: paint it"
    assert (tmp_path / "ws" / "done.txt").read_text() == "paint it\n"
    assert outcome.acp is not None and outcome.acp.unasked_paths == []
    assert not any("without asking" in n for n in outcome.acp.notices), outcome.acp.notices
    assert outcome.acp.tally.unasked == 0 and outcome.acp.tally.reported == 1
    assert outcome.files_changed == [str(tmp_path / "ws" / "done.txt")]


async def test_a_plain_command_that_exits_non_zero_fails_with_its_words(tmp_path: Path) -> None:
    script = tmp_path / "bad.sh"
    script.write_text("#!/bin/sh\necho 'cannot find the spec' >&2\nexit 3\n")
    script.chmod(0o755)
    outcome = await run_attempt(spec(tmp_path, agent=None, argv=[str(script)], kind="command"))
    assert outcome.status == "failed"
    assert "exited 3: cannot find the spec" in (outcome.reason or "")


async def test_an_ask_still_waiting_at_the_timeout_is_answered_cancelled_and_logged(
    tmp_path: Path,
) -> None:
    import trio

    async def never(ask: Ask) -> bool:
        await trio.sleep_forever()
        return True

    policy = parse_policy('capability = "edit-workspace"\n[ask]\ntools = ["edit"]', "t")
    outcome = await run_attempt(spec(tmp_path, policy=policy, approver=never, timeout=1.0))
    assert outcome.status == "failed" and "did not finish within 1 s" in (outcome.reason or "")
    asked = [r for r in decision_records(outcome.log, outcome.run_id) if r["kind"] == "permission"]
    assert asked and asked[0]["verdict"] == "deny" and "cancelled" in asked[0]["reason"]
    assert not (tmp_path / "ws" / "hello.py").exists()
