"""One processes-and-memory budget for every sandbox of an attempt (issue 35):
an agent that spreads its work over its own sandbox, a command (the
session's sandbox) and an MCP server (the server's sandbox), each part well
under ``[limits] processes`` and ``memory``, is stopped once the parts
together pass ``attempt_processes`` or ``attempt_memory``: the attempt ends
``failed`` naming the limit, with a ``limit`` record, its end record and an
outcome, and nothing of any of its sandboxes is left on the host. The same
work under a budget that holds it completes.

Real attempts: ``governor run --json`` as root (where the attempt's pids
cgroup refuses the fork past the budget) and as govtest (where the
governor's watcher counts the sandboxes' processes from /proc), ``TMPDIR``
and ``$HOME`` under the box; budget_agent.py in its sandbox, holding_server.py
in its own.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from escape_harness import USERS, Account
from test_escapes_limits import gone
from test_hostile_mcp_floods import PY, box_for, governor, outcome_of, records

AGENT = Path(__file__).with_name("budget_agent.py")
SERVER = Path(__file__).with_name("holding_server.py")


def policy(limits: str) -> str:
    return f"""capability = "edit-workspace"
[limits]
{limits}
[[mcp.servers]]
name = "hold"
command = ["{PY}", "{SERVER}"]
[mcp.allow]
tools = ["hold.*"]
"""


def attempt(
    accounts: dict[str, Account | str], user: str, name: str, limits: str, *agent: str
) -> tuple[dict[str, Any], list[dict[str, Any]], Path, str]:
    """One ``governor run --json`` of budget_agent.py (``agent``: WAIT PROCESSES
    MEGABYTES); its outcome, its log's records, its workspace, and the odd
    sleep its children were started with (to find them on the host)."""
    box = box_for(accounts, user, name)
    marker = f"300.{random.randrange(10**6, 10**7)}"
    policy_path = box.write(box.dir / "policy.toml", policy(limits))
    log = box.dir / "audit.jsonl"
    done = governor(box, ["run", "--json", "--policy", str(policy_path), "--workspace", str(box.ws),
                          "--log", str(log), "go", "--", PY, str(AGENT), *agent, marker])  # fmt: skip
    return outcome_of(done), records(log), box.ws, marker


CASES = {
    # 8 sleeping children in each of the three sandboxes: about 12 processes
    # in each (bwrap, the agent or the fork server, a shim), under 24, and
    # more than 30 together
    "processes": ("processes = 24\nattempt_processes = {budget}", ("8", "0"), 30, 120,
                  "processes limit 30 across its sandboxes ([limits] attempt_processes: "),
    # 24 MiB written in each of the three: under 256M each, over 64M together
    "memory": ('memory = "256M"\nattempt_memory = "{budget}"', ("2", "24"), "64M", "1G",
               "memory limit 64M across its sandboxes ([limits] attempt_memory: "),
}  # fmt: skip


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("kind", list(CASES))
def test_an_agent_whose_sandboxes_together_pass_the_attempt_budget_is_stopped_naming_it(
    accounts: dict[str, Account | str], user: str, kind: str
) -> None:
    limits, held, over, _, named = CASES[kind]
    outcome, log, ws, marker = attempt(
        accounts, user, f"over-{kind}", limits.format(budget=over), "60", *held
    )
    assert outcome["status"] == "failed", outcome
    assert f"was stopped at its {named}" in outcome["reason"], outcome["reason"]
    stopped = [r for r in log if r["kind"] == "limit"]
    assert len(stopped) == 1 and named in stopped[0]["reason"], stopped
    end = log[-1]
    assert end["kind"] == "attempt-end" and end["status"] == "failed", end
    assert named in end["reason"]
    assert not (ws / "answers.json").exists()  # stopped while holding: it never got to write
    assert gone(marker) == [], "a process of the attempt's sandboxes outlived it"


@pytest.mark.parametrize("user", USERS)
@pytest.mark.parametrize("kind", list(CASES))
def test_the_same_work_under_the_attempt_budget_completes(
    accounts: dict[str, Account | str], user: str, kind: str
) -> None:
    limits, held, _, enough, _ = CASES[kind]
    outcome, log, ws, marker = attempt(
        accounts, user, f"under-{kind}", limits.format(budget=enough), "3", *held
    )
    assert outcome["status"] == "completed", outcome
    assert not [r for r in log if r["kind"] == "limit"]
    said = json.loads((ws / "answers.json").read_text())
    each = f"holding {held[0]} processes and {held[1]} MiB"
    assert said["agent"] == each and said["server"] == each, said  # every part held all of it
    assert str(said["command"]).startswith("term"), said
    assert gone(marker) == []


CHECK_AGENT = Path(__file__).resolve().parents[1] / "sandbox" / "limits_agent.py"


@pytest.mark.parametrize("user", USERS)
def test_a_check_is_counted_in_the_same_budget_and_the_same_check_under_it_passes(
    accounts: dict[str, Account | str], user: str
) -> None:
    marker = f"30.{random.randrange(10**6, 10**7)}"
    check = f"sh -c 'for i in $(seq 24); do sleep {marker} & done; sleep 3; kill $(jobs -p)'"
    results = {}
    for name, budget in (("over", 16), ("under", 200)):
        box = box_for(accounts, user, f"check-{name}")
        text = (f'capability = "edit-workspace"\n[limits]\nprocesses = 64\nattempt_processes = {budget}\n'
                f'[checks]\ncommands = ["{check}"]\n').replace("\\", "\\\\")  # fmt: skip
        policy_path = box.write(box.dir / "policy.toml", text)
        log = box.dir / "audit.jsonl"
        done = governor(box, ["run", "--json", "--policy", str(policy_path), "--workspace", str(box.ws),
                              "--log", str(log), "go", "--", PY, str(CHECK_AGENT), "fine"])  # fmt: skip
        results[name] = (outcome_of(done), records(log))
        assert gone(marker) == []
    outcome, log = results["over"]
    assert outcome["status"] == "failed", outcome
    assert "stopped at its processes limit 16 across its sandboxes" in outcome["reason"], outcome
    assert [r for r in log if r["kind"] == "limit"] and log[-1]["kind"] == "attempt-end"
    outcome, log = results["under"]
    assert outcome["status"] == "completed", outcome
    assert not [r for r in log if r["kind"] == "limit"]
