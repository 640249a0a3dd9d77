"""Network records read back: `governor audit --network` and replay under another policy."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from governor.audit.log import AuditLog
from governor.audit.tally import Tally
from governor.cli.audit import run_table
from governor.cli.audit_checks import run_replay
from governor.confine.egress import judge
from governor.gate.approver import Unattended
from governor.gate.gatekeeper import Gate
from governor.policies.capability import Capability
from governor.policies.network import NetworkRules, parse_pattern
from governor.policies.policy import Policy
from governor.sandbox.net.judge import ConnectionRequest


async def write_log(path: Path, ws: Path) -> None:
    rules = NetworkRules(
        enabled=True,
        allow=(parse_pattern("127.0.0.1:8080"),),
        agent=(parse_pattern("127.0.0.1:4000"),),
    )
    policy = Policy(capability=Capability.EDIT_WORKSPACE, network_rules=rules).bind(str(ws))
    audit = AuditLog(path, "att-net")
    audit.record("attempt-start", workspace=str(ws), roots=[str(ws)], agent_hosts=["127.0.0.1:4000"])
    gate = Gate(policy, audit, Unattended())
    ask = judge(gate)
    answers = [
        await ask(ConnectionRequest("127.0.0.1", 4000, "CONNECT", origin="agent")),
        await ask(ConnectionRequest("127.0.0.1", 8080, "GET", "/simple/", via="http", origin="command")),
        await ask(ConnectionRequest("169.254.169.254", 80, "GET", "/latest/", via="http", origin="agent")),
    ]
    assert [a.allowed for a in answers] == [True, True, False]
    assert answers[0].addresses == ("127.0.0.1",)
    assert audit.tallier.tally() == Tally(asked=3, allowed=2, refused=1)
    audit.record("attempt-end", status="completed")
    audit.close()


async def test_every_connection_is_listed_with_its_verdict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "audit.jsonl"
    await write_log(log, tmp_path)
    assert run_table([str(log)], network=True) == 0
    out = capsys.readouterr().out
    assert "allow    agent: 127.0.0.1:4000" in out
    assert "allow    command: GET http://127.0.0.1:8080/simple/" in out
    assert "deny     agent: GET http://169.254.169.254:80/latest/" in out
    assert "[network.special]" in out
    assert "3 connection(s) in 1 attempt(s): 2 allowed, 1 refused or waiting" in out
    assert run_table([str(log)], network=True, as_json=True) == 0
    rows = json.loads(capsys.readouterr().out)["connections"]
    assert [r["verdict"] for r in rows] == ["allow", "allow", "deny"]


async def test_replay_re_decides_network_records_keeping_the_agents_own_hosts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "audit.jsonl"
    await write_log(log, tmp_path)
    stricter = tmp_path / "strict.toml"
    stricter.write_text('capability = "edit-workspace"\nnetwork = false\n')
    assert run_replay(str(log), str(stricter), as_json=True) == 0
    (attempt,) = json.loads(capsys.readouterr().out)["replayed"]
    changes = attempt["changes"]
    # the agent keeps its model API; the command's connection is refused now
    assert [(c["subject"], c["was"], c["now"]) for c in changes] == [
        ("GET http://127.0.0.1:8080/simple/", "allowed", "refused")
    ], attempt
    assert attempt["actions"] == 3


async def test_a_persons_always_allows_a_host_for_the_rest_of_the_attempt(tmp_path: Path) -> None:
    from governor.gate.approver import Callback

    asked: list[str] = []

    def person(ask: object) -> str:
        asked.append(getattr(ask, "subject", ""))
        return "always"

    rules = NetworkRules(enabled=True, ask=(parse_pattern("localhost:8443"),))  # resolves offline
    policy = Policy(capability=Capability.EDIT_WORKSPACE, network_rules=rules).bind(str(tmp_path))
    audit = AuditLog(tmp_path / "audit.jsonl", "att-ask")
    gate = Gate(policy, audit, Callback(person))
    ask = judge(gate)
    first = await ask(ConnectionRequest("localhost", 8443, "GET", "/simple/a/", via="http", origin="command"))
    later = await ask(ConnectionRequest("localhost", 8443, "GET", "/simple/b/", via="http", origin="command"))
    assert first.allowed and later.allowed
    assert asked == ["localhost:8443"]  # asked once, for the host
    network = [r for r in audit.records if r["kind"] == "network"]
    assert [r["by"] for r in network] == ["person", "grant"]
    audit.close()


async def test_a_host_a_person_allowed_is_looked_up_after_the_answer_and_connected_to(
    tmp_path: Path,
) -> None:
    from governor.gate.approver import Callback

    rules = NetworkRules(enabled=True, ask=(parse_pattern("localhost:8443"),))  # resolves offline
    policy = Policy(capability=Capability.EDIT_WORKSPACE, network_rules=rules).bind(str(tmp_path))
    audit = AuditLog(tmp_path / "audit.jsonl", "att-ask")
    gate = Gate(policy, audit, Callback(lambda ask: "once"))
    answer = await judge(gate)(ConnectionRequest("localhost", 8443, "CONNECT", origin="command"))
    assert answer.allowed and "127.0.0.1" in answer.addresses  # not an empty place to connect to
    refused = await judge(gate)(ConnectionRequest("localhost", 9999, "CONNECT", origin="command"))
    assert not refused.allowed and refused.addresses == ()
    audit.close()
