"""Secrets never reach the log or the outcome: real-looking secrets planted in what
an agent sends (a command line with a token, a file written with a private key
block, the env of a terminal, a raw agent arg, a secret variable it was given)
are grepped for in the log file and in the outcome."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

from audit_helpers import records, scripted_spec

from governor.attempt.lifecycle import run_attempt
from governor.audit.verify import read_lines, verify
from governor.cli.outcome_json import document, write_json
from governor.policies.ceiling import CUSTOM_AGENT, Ceiling
from governor.policies.policy import parse_policy

ANTHROPIC = "sk-ant-api03-Qm9vYmFyQmF6UXV4MTIzNDU2Nzg5MGFiY2RlZmdoaWprbG1u"
GITHUB = "ghp_R2l0SHViVG9rZW5Gb3JUZXN0c09ubHkxMjM0"
BEARER_VALUE = "eW91LXNoYWxsLW5vdC1wYXNzLXRoaXMtdG9rZW4"
OPENAI = "sk-proj-T3BlbkFJVGVzdEtleUZvckF1ZGl0VGVzdHM"
KEY_BODY = "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    f"{KEY_BODY}\n"
    "QyNTUxOQAAACDQ0ZXN0a2V5Zm9yYXVkaXR0ZXN0c29ubHkAAAAAAAAAAAAAAAAAAAA=\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)
ENV_SECRET = "Xq9-env-secret-value-7731"  # no known shape: only its name says it is a secret
RAW_ARG = "--api-key=Zz8-raw-arg-value-4410"
SECRETS = [ANTHROPIC, GITHUB, BEARER_VALUE, OPENAI, KEY_BODY, ENV_SECRET, RAW_ARG, "Zz8-raw-arg"]

STEPS: list[dict[str, Any]] = [
    {
        "update": {
            "sessionUpdate": "plan",
            "entries": [
                {
                    "content": f"Call the API with {ANTHROPIC}",
                    "priority": "high",
                    "status": "pending",
                }
            ],
        }
    },
    {
        "request": "session/request_permission",
        "params": {
            "sessionId": "{session}",
            "toolCall": {
                "toolCallId": "curl",
                "title": f"Run curl -H 'Authorization: Bearer {BEARER_VALUE}'",
                "kind": "execute",
                "rawInput": {
                    "command": f"curl -H 'Authorization: Bearer {BEARER_VALUE}' "
                    f"'https://api.example.com/v1?api_key={ANTHROPIC}'"
                },
            },
            "options": [
                {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                {"optionId": "no", "name": "Reject", "kind": "reject_once"},
            ],
        },
    },
    {
        "request": "session/request_permission",
        "params": {
            "sessionId": "{session}",
            "toolCall": {
                "toolCallId": "key",
                "title": f"Write the deploy key {PRIVATE_KEY}",
                "kind": "edit",
                "rawInput": {"file_path": "{cwd}/id_ed25519", "content": PRIVATE_KEY},
                "locations": [{"path": "{cwd}/id_ed25519"}],
            },
            "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"}],
        },
    },
    {
        "request": "fs/write_text_file",
        "params": {"sessionId": "{session}", "path": "{cwd}/id_ed25519", "content": PRIVATE_KEY},
    },
    {
        "request": "session/request_permission",
        "params": {
            "sessionId": "{session}",
            "toolCall": {
                "toolCallId": "deploy",
                "title": "Deploy with {arg}",
                "kind": "execute",
                "rawInput": {"command": "deploy --token {env:MY_SERVICE_TOKEN} {arg}"},
            },
            "options": [{"optionId": "yes", "name": "Allow", "kind": "allow_once"}],
        },
    },
    {
        "request": "fs/read_text_file",
        "params": {"sessionId": "{session}", "path": f"{{cwd}}/notes-{GITHUB}.txt"},
    },
    {
        "update": {
            "sessionUpdate": "tool_call",
            "toolCallId": "own",
            "title": f"git push https://x:{GITHUB}@github.com/o/r",
            "kind": "execute",
            "status": "completed",
            "rawInput": {"command": f"git push https://x:{GITHUB}@github.com/o/r"},
        }
    },
    {"say": f"Done. I used {ANTHROPIC} and {ENV_SECRET}."},
]

TERMINAL_STEPS: list[dict[str, Any]] = [
    {
        "request": "terminal/create",
        "params": {
            "sessionId": "{session}",
            "command": "echo",
            "args": [f"https://x:{GITHUB}@github.com/o/r", "{env:MY_SERVICE_TOKEN}"],
            "env": [{"name": "OPENAI_API_KEY", "value": OPENAI}],
            "cwd": "{cwd}",
        },
    },
    {"say": "ran it"},
]


def leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def environ() -> dict[str, str]:
    return {**os.environ, "MY_SERVICE_TOKEN": ENV_SECRET}


CEILING = Ceiling(allowed_agents=(CUSTOM_AGENT,), allow_agent_args=True)


async def test_secrets_the_agent_sends_are_masked_in_every_record_and_in_the_outcome(
    tmp_path: Path,
) -> None:
    spec = scripted_spec(
        tmp_path,
        STEPS,
        agent_args=[RAW_ARG],
        ceiling=CEILING,
        env=["MY_SERVICE_TOKEN"],
        environ=environ(),
    )
    outcome = await run_attempt(spec)
    log = tmp_path / "audit.jsonl"
    text = log.read_text(encoding="utf-8")
    kinds = [r["kind"] for r in records(log)]
    # The planted requests were decided and recorded (so there was something to mask).
    assert kinds.count("permission") == 3 and "write" in kinds and "read" in kinds
    assert "unasked" in kinds
    assert (tmp_path / "ws" / "id_ed25519").read_text() == PRIVATE_KEY  # the write happened
    assert leaks(text) == []
    assert "[secret]" in text and "-----BEGIN" not in text
    assert "<1 raw args, not shown>" in text
    streamed = io.StringIO()  # as --json prints it, its decision records included
    write_json(document(outcome, 0), streamed, indent=2)
    shown = streamed.getvalue()
    assert json.loads(shown)["tool_calls"] and outcome.summary is not None and "[secret]" in outcome.summary
    assert leaks(shown) == []
    assert verify(read_lines(log)).problem is None


async def test_a_paused_request_holding_a_token_is_masked_in_the_outcome(tmp_path: Path) -> None:
    pausing = parse_policy(
        'capability = "edit-workspace"\non_ask = "pause"\n[ask]\ntools = ["execute"]', "p.toml"
    )
    outcome = await run_attempt(scripted_spec(tmp_path, STEPS[1:2], policy=pausing))
    assert outcome.status == "needs_approval" and outcome.pending is not None
    assert leaks(json.dumps(outcome.to_json())) == []
    assert leaks((tmp_path / "audit.jsonl").read_text()) == []


async def test_a_token_in_a_terminal_command_and_its_env_never_reach_the_log(
    tmp_path: Path,
) -> None:
    spec = scripted_spec(
        tmp_path, TERMINAL_STEPS, env=["MY_SERVICE_TOKEN"], environ=environ(), timeout=60
    )
    outcome = await run_attempt(spec)
    log = tmp_path / "audit.jsonl"
    terminal = [r for r in records(log) if r["kind"] == "terminal"]
    assert len(terminal) == 1, "the governor offers terminals"
    subject = terminal[0]["subject"]
    assert subject["env"] == ["OPENAI_API_KEY"]  # the name, never the value
    assert "[secret]" in subject["command"] and "[secret]" in " ".join(subject["argv"])
    assert leaks(log.read_text()) == []
    assert leaks(json.dumps(outcome.to_json())) == []


def test_a_secret_spelt_in_base64_hex_or_url_encoding_never_reaches_a_record() -> None:
    """The log screens each record before masking it string by string: the
    screen must know every spelling the masker masks, or a record holding only
    a secret's base64 passes it unmasked."""
    import base64
    import urllib.parse

    from governor.audit.log import AuditLog
    from governor.boundary.secrets import Masker

    secret = "sk-live-4f9a7Q2xLmN8pR3t"
    log = AuditLog(None, "a", masker=Masker([secret]))
    spelt = {
        "base64": base64.b64encode(secret.encode()).decode(),
        "hex": secret.encode().hex(),
        "url": urllib.parse.quote("/" + secret + "/x", safe=""),
    }
    for how, text in spelt.items():
        record = log.record("read", subject={"path": f"/ws/{text}"})
        written = json.dumps(record)
        assert text not in written and "[secret]" in written, how
    # the neighbour: an ordinary path is written as it is
    plain = log.record("read", subject={"path": "/ws/readme.md"})
    assert plain["subject"]["path"] == "/ws/readme.md"


def test_every_spelling_of_a_shapeless_secret_inside_longer_text_is_masked_by_the_screen() -> None:
    """The screen looks for a secret's base64 and hex spellings only where a
    record has a run of those characters as long as the shortest (a fast path):
    each spelling the masker knows, put in the middle of base64, a path and a
    sentence, is still masked; the neighbours with no secret are written as they
    are."""
    from governor.audit.log import AuditLog
    from governor.boundary.secrets import Masker, spellings

    secret = "correct horse battery/staple 42"  # no token shape: only the known value finds it
    log = AuditLog(None, "a", masker=Masker([secret]))
    for spelling in sorted(spellings(secret)):
        for text in (f"QUJD{spelling}REVG", f"/ws/{spelling}.txt", f"it is {spelling}, said"):
            written = json.dumps(log.record("read", subject={"path": text}))
            assert spelling not in written and "[secret]" in written, (spelling, text)
    for text in ("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=" * 3, "/ws/src/module/file.py"):
        assert log.record("read", subject={"path": text})["subject"]["path"] == text
