"""100,000 fuzzed messages from a real agent process: each gets its proper answer, and
serving goes on.

The corpus (`fuzz_corpus.py`) is drawn by Hypothesis and expanded by a seeded
generator; the fuzz agent (`fuzz_agent.py`, a real subprocess under the
agent sandbox) replays it after the governor's ``session/prompt``, ending
every batch of 100 with a probe read of a known file and waiting for its
answer. Everything the agent receives is checked against what the JSON-RPC
and ACP rules say it must receive. Set ``ACP_FUZZ_SEED`` to replay another
corpus; `bench/fuzz.py` runs bigger ones.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import trio
from structlog.testing import capture_logs

from governor.attempt.lifecycle import run_attempt
from governor.audit.verify import read_lines, verify
from governor.job.spec import AttemptSpec

sys.path.insert(0, str(Path(__file__).parent))

from fuzz_corpus import PROBE_FILE, PROBE_TEXT, check, draw_templates, expand, write_script
from robustness_helpers import EDIT

HERE = Path(__file__).resolve().parent
FUZZ_AGENT = HERE / "fuzz_agent.py"
SEED = int(os.environ.get("ACP_FUZZ_SEED", "20261129"))
SESSION = "fuzz-session"


def fuzz_workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    (ws / "sub").mkdir(parents=True)
    (ws / PROBE_FILE).write_text(PROBE_TEXT, encoding="utf-8")
    (ws / ".fuzz").mkdir()
    return ws


def received(side: Path) -> list[dict[str, Any]]:
    out = []
    for line in side.read_bytes().splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


async def test_a_hundred_thousand_fuzzed_messages_each_get_their_proper_answer_and_serving_goes_on(
    tmp_path: Path,
) -> None:
    ws = fuzz_workspace(tmp_path)
    corpus = expand(
        draw_templates(60, seed=SEED),
        100_000,
        workspace=str(ws),
        session=SESSION,
        seed=SEED,
        probe_every=100,
        big_line=100 * 2**20,
        many_options=3,
        duplicates=5,
    )
    script, side = ws / ".fuzz" / "script", ws / ".fuzz" / "received.jsonl"
    write_script(corpus, str(script))
    spec = AttemptSpec(
        prompt="fuzz",
        argv=[sys.executable, str(FUZZ_AGENT), str(script), str(side)],
        workspace=ws,
        policy=EDIT,
        log=tmp_path / "audit.jsonl",
        timeout=300,
    )
    with capture_logs() as logs, trio.fail_after(600):
        outcome = await run_attempt(spec)

    got = received(side)
    verdict = check(corpus, [m for m in got if not str(m.get("id", "")).startswith("after-")])
    assert verdict.wrong == [], f"seed {SEED}: {len(verdict.wrong)} wrong, first: {verdict.wrong[:5]}"
    assert corpus.lines >= 100_000 and verdict.answered >= 40_000
    assert outcome.status == "completed", (SEED, outcome.reason)
    assert outcome.summary == "fuzz: done"  # the agent saw every probe answered
    assert "INJECTED" not in json.dumps(outcome.to_json())  # updates for other sessions ignored

    # Nothing after the prompt result is acted on; whatever is answered is a refusal.
    assert not any((ws / f"after-{n}.txt").exists() for n in range(3))
    late = [m for m in got if str(m.get("id", "")).startswith("after-")]
    assert all(m.get("error", {}).get("code") == -32001 for m in late), late
    assert not (ws / "huge.txt").exists()

    # No traceback, no error logged: every bad line was an ordinary, expected event.
    errors = [e for e in logs if e.get("log_level") in ("error", "critical") or "exc_info" in e]
    assert errors == []
    assert any(e["event"] == "agent.malformed_line" for e in logs)

    checked = verify(read_lines(tmp_path / "audit.jsonl"))
    assert checked.problem is None and checked.unfinished == ()
    reads = [
        r
        for _, r, _ in read_lines(tmp_path / "audit.jsonl")
        if r and r["kind"] == "read" and r["verdict"] == "allow"
    ]
    assert len(reads) >= len(corpus.probes)


def test_the_corpus_oracle_agrees_with_the_rules_on_hand_picked_lines() -> None:
    """The expectations are the rules, not a copy of the governor's code: a few lines
    whose answer is known by heart."""
    from fuzz_corpus import frame, route

    assert frame(b'{"jsonrpc":"2.0","id":1,"method":"x"') == ("null", -32700)
    assert frame(b"\xff{}") == ("null", -32700)
    assert frame(b"[" * 20_000 + b"]" * 20_000) == ("null", -32700)
    assert frame(b"[[[]]]") == ("null", -32600)
    assert frame(b"42") == ("null", -32600)
    assert frame(b'{"id":true,"method":"x"}') == ("null", -32600)
    assert frame(b'{"id":1,"method":5}') == ("null", -32600)
    assert frame(b'{"jsonrpc":"2.0"}') == ("null", -32600)
    assert frame(b'{"jsonrpc":"2.0","method":"session/update"}') == ("none",)
    assert frame(b'{"jsonrpc":"2.0","id":99,"result":{}}') == ("none",)
    assert frame(b'{"jsonrpc":"2.0","id":"a","method":"x"}') is None
    assert route({"id": 1, "method": "session/update"}) == ("error", -32601)
    assert route({"id": 1, "method": "fs/read_text_file", "params": {"path": 1}}) == (
        "error",
        -32602,
    )
    assert route(
        {"id": 1, "method": "fs/read_text_file", "params": {"sessionId": "s", "path": "/a"}}
    ) is None

