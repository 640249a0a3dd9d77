"""Peak RSS of each audit reader against the log's size: the table (and its
``--json``), ``--refused``, ``--network``, ``--attempt`` (text and ``--json``) and
``replay``, each run as its own ``governor audit`` process with stdout to
/dev/null, on a log of 1,000 records and on one of 1,000,000 (~310 MB),
generated in the same run.

Baselines, measured in the same run on the same logs: ``verify`` (which reads
one line at a time), and the interpreter's base (``python -c pass``). Printed for each view: its peak RSS on
each log, the ratio large/small above the base (target: <= 1.5, flat in the
log's size), its peak on the large log over the log's size, and over
verify's peak.

The log is what a long attempt writes: 10 attempts, one after another, each
a start, decisions (permissions allowed, writes refused, connections allowed
and refused, commands) and an end, chained and sealed as the writer seals
them (the same bytes `AuditLog` writes, without its thinning of repeated
refusals, so that every view has a great deal to show).

Run: ``.venv/bin/python bench/audit_memory.py [--records 1000000] [--small 1000]``
(``BENCH_DIR`` picks where the logs are written).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import orjson

HERE = Path(__file__).resolve().parent
GOVERNOR = Path(sys.executable).with_name("governor")
WS = "/work/app"
ATTEMPTS = 10


def body(i: int) -> dict[str, Any]:
    """The fields of decision ``i``: mostly allowed edits, some refused writes,
    connections and commands (every kind a view picks out)."""
    path = f"{WS}/src/module_{i % 97}/file_{i}.py"
    pick = i % 10
    if pick == 0:
        return {"kind": "write", "request": i, "subject": {"path": path}, "verdict": "deny",
                "by": "policy", "rule": "deny: **/*.py", "reason": f"{path} is protected"}  # fmt: skip
    if pick == 1:
        host = f"host{i % 31}.example"
        verdict = "allow" if i % 20 == 1 else "deny"
        return {"kind": "network", "request": i,
                "subject": {"host": host, "port": 443, "origin": "command"},
                "verdict": verdict, "by": "policy", "rule": "network.default",
                "reason": f"{host}:443 is {'' if verdict == 'allow' else 'not '}in the allowed hosts"}  # fmt: skip
    if pick == 2:
        return {"kind": "terminal", "request": i,
                "subject": {"command": f"pytest tests/test_{i}.py", "cwd": WS, "env": ["PATH"]},
                "verdict": "allow", "by": "policy", "rule": "allow: pytest *",
                "reason": "pytest * is allowed"}  # fmt: skip
    subject = {"tool_call": f"toolu_01{i:08d}", "title": f"Edit src/module_{i % 97}/file_{i}.py",
               "tool_kind": "edit", "paths": [path], "input": {"file_path": path}}  # fmt: skip
    return {
        "kind": "permission",
        "session": "8f14e45f-ceea-467f-a0e6-2b1b3c1c2c1d",
        "request": i,
        "subject": subject,
        "verdict": "allow",
        "by": "policy",
        "rule": "capability: edit-workspace",
        "reason": f"edit-workspace allows a write like {path}",
        "option": "allow_once",
    }


def sealed(record: dict[str, Any]) -> bytes:
    """The record's line as the writer seals it (its hash over the line without it)."""
    raw = orjson.dumps(record)
    return raw[:-1] + b',"hash":"' + hashlib.sha256(raw).hexdigest().encode() + b'"}\n'


def write_log(path: Path, records: int) -> None:
    """``records`` records in `ATTEMPTS` attempts, one after another."""
    per = max(3, records // ATTEMPTS)
    made = 0
    with path.open("wb") as f:
        for a in range(ATTEMPTS):
            attempt = f"attempt-{a:02d}"
            prev: str | None = None
            count = min(per, records - made)
            t0 = 1.7e9 + a * 1000
            for seq in range(1, count + 1):
                if seq == 1:
                    fields: dict[str, Any] = {"kind": "attempt-start", "agent": "demo", "preset": "demo",
                                              "workspace": WS, "roots": [WS], "approvals": "unattended"}  # fmt: skip
                elif seq == count:
                    fields = {"kind": "attempt-end", "status": "completed", "duration_s": 12.5}
                else:
                    fields = body(made + seq)
                record = {"seq": seq, "time": t0 + seq * 1e-3, "attempt": attempt, **fields, "prev": prev}
                line = sealed(record)
                prev = orjson.loads(line)["hash"]
                f.write(line)
            made += count
            if made >= records:
                break


def peak_rss(argv: list[str]) -> tuple[float, int]:
    """Peak RSS in MB of one process running ``argv`` (stdout discarded), and its exit status."""
    with open(os.devnull, "wb") as null:
        proc = subprocess.Popen(argv, stdout=null, stderr=subprocess.PIPE)
        assert proc.stderr is not None
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(argv)}: exit {proc.returncode}: {err.decode(errors='replace')[-500:]}")
    return usage.ru_maxrss / 1024, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=1_000)
    parser.add_argument("--only", nargs="*", metavar="VIEW", help="these views (and verify) only")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR"), prefix="bench-audit-memory-") as d:
        tmp = Path(d)
        policy = tmp / "policy.toml"
        policy.write_text('capability = "edit-workspace"\n[deny]\ncommands = ["pytest *"]\n', encoding="utf-8")
        logs = {"small": tmp / "small.jsonl", "large": tmp / "large.jsonl"}
        write_log(logs["small"], args.small)
        write_log(logs["large"], args.records)
        size_mb = logs["large"].stat().st_size / 1e6
        views: dict[str, list[str]] = {
            "verify (baseline)": ["verify"],
            "table": [],
            "table --json": ["--json"],
            "--refused": ["--refused"],
            "--refused --json": ["--refused", "--json"],
            "--network": ["--network"],
            "--attempt": ["--attempt", "attempt-03"],
            "--attempt --json": ["--attempt", "attempt-03", "--json"],
            "replay": ["replay", "--policy", str(policy)],
            "replay --json": ["replay", "--policy", str(policy), "--json"],
        }
        base, _ = peak_rss([sys.executable, "-c", "pass"])
        print(f"logs: {args.small:,} records ({logs['small'].stat().st_size / 1e6:.2f} MB) and "
              f"{args.records:,} records ({size_mb:.0f} MB); the interpreter's base {base:.1f} MB")  # fmt: skip
        print(f"{'view':20} {'small MB':>9} {'large MB':>9} {'large/small':>12} {'above base':>11} {'growth MB':>10} "
              f"{'/ log size':>11} {'/ verify':>9}")  # fmt: skip
        peaks: dict[str, tuple[float, float]] = {}
        for name, argv in views.items():
            if args.only and name not in args.only and name != "verify (baseline)":
                continue
            small, _ = peak_rss([str(GOVERNOR), "audit", *argv, str(logs["small"])] if argv[:1] != ["replay"]
                                else [str(GOVERNOR), "audit", "replay", str(logs["small"]), *argv[1:]])  # fmt: skip
            large, _ = peak_rss([str(GOVERNOR), "audit", *argv, str(logs["large"])] if argv[:1] != ["replay"]
                                else [str(GOVERNOR), "audit", "replay", str(logs["large"]), *argv[1:]])  # fmt: skip
            peaks[name] = (small, large)
            verify = peaks["verify (baseline)"][1]
            above = (large - base) / max(small - base, 1.0)
            print(f"{name:20} {small:9.1f} {large:9.1f} {large / small:12.2f} {above:11.2f} {large - small:10.1f} "
                  f"{large / size_mb:11.3f} {large / verify:9.2f}", flush=True)  # fmt: skip
        worst = max(((large - base) / max(small - base, 1.0), name) for name, (small, large) in peaks.items())
        print(f"\nworst view above the base: {worst[1]} at {worst[0]:.2f}x from {args.small:,} to "
              f"{args.records:,} records (target <= 1.5x): {'met' if worst[0] <= 1.5 else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()
