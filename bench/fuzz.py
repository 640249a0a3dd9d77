"""The big fuzz run: a million fuzzed messages (by default) at one governed attempt.

    python bench/fuzz.py [--messages 1000000] [--seed S] [--templates 60] [--no-sandbox-agent]

The same corpus, agent and checks as ``tests/robustness/test_fuzz.py`` (which
runs 100,000 in CI), at a size and with seeds CI cannot afford: Hypothesis
draws the templates (`--templates` per kind), a seeded generator expands them
(a new random seed each run unless `--seed` is given; it is printed, so a
failure can be replayed), the fuzz agent replays them after the prompt with a
probe read every 100 messages. Printed: the throughput, each kind of message
with its count, and every answer that was not the one the rules require
(exit status 1 if there is any, or if the attempt did not complete).
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this file has bench/ first on sys.path, and bench/ holds scripts
# whose names shadow packages (a script named like a package, as bench/sandbox.py was): keep bench/ off, the project on.
HERE = Path(__file__).resolve().parent
ROBUSTNESS = HERE.parent / "tests" / "robustness"
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path[:0] = [str(HERE.parent), str(ROBUSTNESS)]

import trio  # noqa: E402
from fuzz_corpus import PROBE_FILE, PROBE_TEXT, check, draw_templates, expand, write_script  # noqa: E402

from governor.attempt.lifecycle import run_attempt  # noqa: E402
from governor.audit.verify import read_lines, verify  # noqa: E402
from governor.job.spec import AttemptSpec  # noqa: E402
from governor.observe import logs  # noqa: E402
from governor.policies.policy import parse_policy  # noqa: E402

FUZZ_AGENT = ROBUSTNESS / "fuzz_agent.py"
SESSION = "fuzz-session"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--templates", type=int, default=60, help="Hypothesis examples per kind")
    parser.add_argument("--no-sandbox-agent", action="store_true")
    args = parser.parse_args()
    logs.configure(json_lines=False, level=logging.ERROR)  # errors only, on stderr
    seed = args.seed if args.seed is not None else random.randrange(2**32)
    print(f"seed {seed} (replay with --seed {seed})")

    with tempfile.TemporaryDirectory(prefix="bench-fuzz-") as tmp_name:
        tmp = Path(tmp_name)
        ws = tmp / "ws"
        (ws / "sub").mkdir(parents=True)
        (ws / PROBE_FILE).write_text(PROBE_TEXT, encoding="utf-8")
        (ws / ".fuzz").mkdir()
        started = time.perf_counter()
        templates = draw_templates(args.templates, seed=seed)
        corpus = expand(
            templates,
            args.messages,
            workspace=str(ws),
            session=SESSION,
            seed=seed,
            big_line=100 * 2**20,
            many_options=max(3, args.messages // 100_000),
            duplicates=max(5, args.messages // 20_000),
        )
        script, side = ws / ".fuzz" / "script", ws / ".fuzz" / "received.jsonl"
        write_script(corpus, str(script))
        built = time.perf_counter() - started
        size = script.stat().st_size
        print(f"corpus: {len(templates)} templates, {corpus.lines:,} lines, {size / 2**20:,.0f} MiB "
              f"(+ one line of 100 MiB), built in {built:.1f} s")
        corpus.blobs.clear()  # the script file has them; keep the expectations only

        spec = AttemptSpec(
            prompt="fuzz",
            argv=[sys.executable, str(FUZZ_AGENT), str(script), str(side)],
            workspace=ws,
            policy=parse_policy('capability = "edit-workspace"', "bench/fuzz.py"),
            log=tmp / "audit.jsonl",
            timeout=3600,
            sandbox_agent=not args.no_sandbox_agent,
        )
        started = time.perf_counter()
        outcome = trio.run(run_attempt, spec)
        elapsed = time.perf_counter() - started

        received = []
        for line in side.read_bytes().splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and not str(value.get("id", "")).startswith("after-"):
                received.append(value)
        verdict = check(corpus, received)
        checked = verify(read_lines(tmp / "audit.jsonl"))

    print(f"attempt: {outcome.status} in {elapsed:.1f} s -- {corpus.lines / elapsed:,.0f} fuzzed "
          f"messages/s, {verdict.answered:,} answers with an id, "
          f"{sum(verdict.nulls.values()):,} id-null errors; peak RSS of this process (the "
          f"corpus's expectations included) "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MB")
    print(f"audit log: {checked.records:,} records, "
          f"{'verifies' if checked.problem is None and not checked.unfinished else checked}")
    print("messages by kind:")
    for kind, count in corpus.kinds.most_common():
        print(f"  {count:>9,}  {kind}")
    print(f"wrong answers: {len(verdict.wrong)}")
    for wrong in verdict.wrong[:20]:
        print(f"  {wrong}")
    ok = (
        not verdict.wrong
        and outcome.status == "completed"
        and outcome.summary == "fuzz: done"
        and checked.problem is None
    )
    if not ok:
        print(f"FAILED: status {outcome.status}, reason {outcome.reason}, summary {outcome.summary}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
