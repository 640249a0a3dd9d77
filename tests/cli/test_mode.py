"""`--mode` works as `--model` does, through the real `governor` script and a
real agent over stdio (`mode_agent.py`): a mode it offers is set and recorded,
one it does not offer ends the attempt before the prompt listing those offered,
and one in which it would act without asking is refused unless the policy sets
``allow_mode_switch``. Both ways an agent offers modes: a ``mode`` config
option and the legacy ``modes`` of ``session/new``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

GOVERNOR = str(Path(sys.executable).parent / "governor")
AGENT = str(Path(__file__).resolve().parent / "mode_agent.py")
WAYS = {"config option": (), "legacy modes": ("--legacy",)}


def run(
    tmp_path: Path, mode: str, way: tuple[str, ...], *extra: str
) -> tuple[int, dict[str, Any], list[dict[str, Any]]]:
    """The attempt's exit code, its outcome and its audit records."""
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    log = tmp_path / f"{mode}-{len(list(tmp_path.glob('*.jsonl')))}.jsonl"  # one log per run
    done = subprocess.run(
        [
            GOVERNOR,
            "run",
            "--workspace",
            str(ws),
            "--log",
            str(log),
            "--json",
            "--mode",
            mode,
            *extra,
            "the task",
            "--",
            sys.executable,
            AGENT,
            *way,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ,
    )
    assert "Traceback" not in done.stderr, done.stderr
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return done.returncode, json.loads(done.stdout), records


def settings(records: list[dict[str, Any]]) -> list[tuple[Any, str]]:
    return [
        (r["subject"]["value"], r["verdict"])
        for r in records
        if r["kind"] == "config" and r["subject"]["option"] == "mode"
    ]


@pytest.mark.parametrize("way", WAYS.values(), ids=WAYS.keys())
def test_a_mode_the_agent_offers_is_set_by_its_name_or_id_and_recorded(
    tmp_path: Path, way: tuple[str, ...]
) -> None:
    code, outcome, records = run(tmp_path, "Architect", way)
    assert code == 0, outcome
    assert outcome["acp"]["mode"]["id"] == "architect"
    assert outcome["summary"] == "in mode architect"  # the agent itself says it switched
    assert settings(records) == [("architect", "allow")]


@pytest.mark.parametrize("way", WAYS.values(), ids=WAYS.keys())
def test_a_mode_the_agent_does_not_offer_fails_before_the_prompt_listing_the_offered_ones(
    tmp_path: Path, way: tuple[str, ...]
) -> None:
    code, outcome, records = run(tmp_path, "nosuch", way)
    assert code == 1 and outcome["status"] == "failed"
    assert outcome["reason"] == (
        "modes does not offer the mode 'nosuch'; it offers: default (Default), "
        "architect (Architect), bypassPermissions (Bypass Permissions)"
    )
    assert settings(records) == [("nosuch", "deny")]
    assert not any(r["kind"] == "prompt" for r in records)
    assert "in mode" not in json.dumps(outcome)  # the agent never had the turn


@pytest.mark.parametrize("way", WAYS.values(), ids=WAYS.keys())
def test_a_mode_that_stops_the_agent_asking_is_refused_unless_the_policy_allows_mode_switches(
    tmp_path: Path, way: tuple[str, ...]
) -> None:
    code, outcome, records = run(tmp_path, "bypassPermissions", way)
    assert (
        code == 1
        and "would act without asking: not set unless the policy sets allow_mode_switch"
        in outcome["reason"]
    )
    assert settings(records) == [("bypassPermissions", "deny")]
    policy = tmp_path / "switch.toml"
    policy.write_text("allow_mode_switch = true\n")
    code, outcome, records = run(tmp_path, "bypassPermissions", way, "--policy", str(policy))
    assert code == 0, outcome
    assert (
        outcome["acp"]["mode"]["id"] == "bypassPermissions"
        and outcome["acp"]["mode"]["asks"] is False
    )
    assert settings(records) == [("bypassPermissions", "allow")]
