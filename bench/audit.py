"""Audit records per second, by durability mode and number of concurrent producers.

Baselines, measured in the same run on the same disk:

- ``bare write``: the same lines, already serialized, written by a bare
  ``os.write()`` loop on an ``O_APPEND`` descriptor (the syscall alone);
- ``json + write``: the same records (envelope and fields) by ``json.dumps``,
  then ``os.write`` -- the least a JSON-lines logger does, without masking,
  canonical form or chain;
- ``fsync each``: the bare loop with an ``fsync`` after every line (one
  producer, no group commit).

Producers are trio tasks doing what a governor handler does: ``record()`` then
``await durable(record)``. Targets (issue 5): ``batch`` within 1.5x of the
plain JSON-lines loop; ``always`` at least 5,000 records/s with 8 producers
(group commit: concurrent decisions share one fsync).

Then ``governor audit DIR`` over 2,000 small logs (each a real `AuditLog`:
start, two decisions, end), next to a bare loop that reads the same files and
``json.loads`` every line (no grouping, no tally, no hash check).

With ``--signing`` (the signing extra): short attempts (start, 8 decisions,
end) through an `AuditLog` with no file, unsigned and with the operator's
Ed25519 key signing each end record, in the same rounds: what one signature
per attempt costs on the record path.

With ``--secrets K`` (default 20): the same records with no file against a
masker that knows no secret and one that knows K, each screened in every
spelling masking knows (`governor.boundary.secrets.spellings`): what each secret an
attempt knows costs on the record path.

Run: ``.venv/bin/python bench/audit.py [--records N] [--logs N] [--secrets K] [--signing]``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

# Run as a script, this file has bench/ first on sys.path, and bench/ holds scripts
# named like the project's packages (a script named like a package, as bench/sandbox.py was): put the project first.
HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))

import trio  # noqa: E402

from governor.audit.log import AuditLog, Durability  # noqa: E402
from governor.boundary.secrets import Masker  # noqa: E402

WS = "/work/app"


def fields(i: int) -> dict[str, Any]:
    """A realistic permission decision, different each time (no cache can help)."""
    path = f"{WS}/src/module_{i % 97}/file_{i}.py"
    return {
        "session": "8f14e45f-ceea-467f-a0e6-2b1b3c1c2c1d",
        "request": i,
        "subject": {
            "tool_call": f"toolu_01{i:08d}",
            "title": f"Edit src/module_{i % 97}/file_{i}.py",
            "tool_kind": "edit",
            "paths": [path],
            "input": {"file_path": path, "content": True},
        },
        "verdict": "allow",
        "by": "policy",
        "rule": "capability: edit-workspace",
        "reason": f"edit-workspace allows a write like {path}",
        "option": "allow_once",
    }


def masker() -> Masker:
    """A masker as a real attempt builds one: a few secret-looking variables known."""
    return Masker.from_environ(
        {
            "ANTHROPIC_API_KEY": "sk-ant-api03-" + "x" * 40,
            "GITHUB_TOKEN": "ghp_" + "y" * 36,
            "AWS_SECRET_ACCESS_KEY": "z" * 40,
            "PATH": "/usr/bin:/bin",
        }
    )


def bare(path: Path, lines: list[bytes], *, fsync: bool = False) -> float:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    start = time.perf_counter()
    for line in lines:
        os.write(fd, line)
        if fsync:
            os.fsync(fd)
    os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    return elapsed


def plain_json(path: Path, records: list[dict[str, Any]]) -> float:
    """The same records as a plain JSON-lines logger writes them: the same envelope
    (seq, time, attempt, kind) and fields, no masking, no canonical form, no chain."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)
    start = time.perf_counter()
    for seq, r in enumerate(records, 1):
        line = {"seq": seq, "time": round(time.time(), 6), "attempt": "bench-attempt"}
        line["kind"] = "permission"
        line.update(r)
        os.write(fd, json.dumps(line).encode() + b"\n")
    os.fsync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    return elapsed


def governed(path: Path, n: int, durability: Durability, producers: int) -> float:
    """Seconds for ``n`` records by ``producers`` trio tasks through `AuditLog`."""
    records = [fields(i) for i in range(n)]

    async def main() -> float:
        log = AuditLog(path, "bench-attempt", durability=durability, masker=masker())
        log.record("attempt-start", agent="bench", workspace=WS)
        per = n // producers

        async def producer(k: int) -> None:
            for r in records[k * per : (k + 1) * per]:
                rec = log.record("permission", **r)
                await log.durable(rec)

        start = time.perf_counter()
        async with trio.open_nursery() as outer:
            outer.start_soon(log.run_batch_sync)
            async with trio.open_nursery() as nursery:
                for k in range(producers):
                    nursery.start_soon(producer, k)
            outer.cancel_scope.cancel()
        log.close()  # the final fsync counts
        return time.perf_counter() - start

    return trio.run(main)


def many_secrets(k: int) -> Masker:
    """A masker that knows ``k`` secrets (each screened in its every spelling:
    clear, base64 in three alignments, hex, URL-encoded)."""
    return Masker([f"secret-value-{i:03d}-" + "q" * 24 for i in range(k)])


def in_memory(n: int, known: Masker | None = None) -> float:
    """Seconds for ``n`` records masked, chained and kept, with no file (the
    bench's masker, or ``known``)."""
    records = [fields(i) for i in range(n)]
    log = AuditLog(None, "bench-attempt", masker=known or masker())
    start = time.perf_counter()
    for r in records:
        log.record("permission", **r)
    return time.perf_counter() - start


def short_attempts(count: int, signer: Any) -> float:
    """Seconds for ``count`` attempts of 10 records each (start, 8 decisions, end)
    through `AuditLog` with no file, the end record signed when ``signer`` is given."""
    records = [fields(i) for i in range(8)]
    start = time.perf_counter()
    for k in range(count):
        log = AuditLog(None, f"attempt-{k}", masker=masker(), signer=signer)
        log.record("attempt-start", agent="bench", workspace=WS)
        for r in records:
            log.record("permission", **r)
        log.record("attempt-end", status="completed", duration_s=0.5)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--logs", type=int, default=2000)
    parser.add_argument(
        "--secrets", type=int, default=20,
        help="also records screened against a masker that knows this many secrets",
    )  # fmt: skip
    parser.add_argument(
        "--signing", action="store_true", help="also short attempts with their end records signed"
    )
    args = parser.parse_args()
    signer = None
    if args.signing:
        from governor.audit.signing import KEY_VARIABLE, keygen, load_signer

        with tempfile.TemporaryDirectory() as d:
            keygen(Path(d) / "k")
            signer = load_signer(None, {KEY_VARIABLE: (Path(d) / "k").read_text()})
    n = args.records
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as d:
        tmp = Path(d)
        counter = iter(range(10**9))

        def fresh() -> Path:
            path = tmp / f"log-{next(counter)}.jsonl"
            return path

        probe = AuditLog(None, "bench-attempt", masker=masker())
        lines = [
            json.dumps(probe.record("permission", **fields(i)), separators=(",", ":")).encode()
            + b"\n"
            for i in range(n)
        ]
        records = [fields(i) for i in range(n)]
        few = max(200, n // 50)
        synced = max(1000, n // 5)
        # (name, records per run, one run -> seconds)
        cases: list[tuple[str, int, Callable[[], float]]] = [
            ("bare write", n, lambda: bare(fresh(), lines)),
            ("json + write", n, lambda: plain_json(fresh(), records)),
            ("AuditLog, no file", n, lambda: in_memory(n)),
            ("no file, no secrets", n, lambda: in_memory(n, Masker())),
            (f"no file, {args.secrets} secrets", n, lambda: in_memory(n, many_secrets(args.secrets))),
            ("fsync each", few, lambda: bare(fresh(), lines[:few], fsync=True)),
            ("batch, 1 producer", n, lambda: governed(fresh(), n, "batch", 1)),
            ("batch, 8 producers", n, lambda: governed(fresh(), n, "batch", 8)),
            ("always, 1 producer", few, lambda: governed(fresh(), few, "always", 1)),
            ("always, 8 producers", synced, lambda: governed(fresh(), synced, "always", 8)),
        ]
        attempts = max(200, n // 20)
        if signer is not None:  # records per second, 10 records an attempt
            cases += [
                ("attempts, unsigned", 10 * attempts, lambda: short_attempts(attempts, None)),
                ("attempts, signed", 10 * attempts, lambda: short_attempts(attempts, signer)),
            ]
        # Rounds interleave the cases, so that a busy moment of the machine
        # does not land on one case only; the best round of each counts.
        rate = dict.fromkeys((name for name, _, _ in cases), 0.0)
        for _ in range(args.rounds):
            for name, count, run in cases:
                rate[name] = max(rate[name], count / run())
                for p in tmp.iterdir():
                    p.unlink()

    base = rate["json + write"]
    print(f"records of ~{sum(len(x) for x in lines) // n} bytes, best of {args.rounds} rounds")
    print(f"{'':22} {'records/s':>12} {'time vs json+write':>19} {'vs bare write':>14}")
    for name, r in rate.items():
        print(f"{name:22} {r:12,.0f} {base / r:18.2f}x {rate['bare write'] / r:13.2f}x")
    batch = rate["batch, 1 producer"]
    always8 = rate["always, 8 producers"]
    print()
    print(
        f"batch (1 producer) takes {base / batch:.2f}x the time of the plain JSON-lines loop "
        f"(target <= 1.5x): {'met' if base / batch <= 1.5 else 'MISSED'}; "
        f"{rate['AuditLog, no file'] / batch:.2f}x the same AuditLog with no file "
        "(what batch durability itself costs)"
    )
    print(
        f"always with 8 producers: {always8:,.0f} records/s "
        f"(target >= 5,000): {'met' if always8 >= 5000 else 'MISSED'}; "
        f"{always8 / rate['always, 1 producer']:.1f}x one producer (group commit)"
    )
    none, known, usual = (
        rate["no file, no secrets"], rate[f"no file, {args.secrets} secrets"], rate["AuditLog, no file"]
    )
    print(
        f"the screen of known secrets: {args.secrets} secrets take {none / known:.2f}x the time "
        f"of none, the bench's 3 take {none / usual:.2f}x "
        f"({(1 / known - 1 / none) / args.secrets * 1e6:.2f} us per record per secret)"
    )
    if signer is not None:
        unsigned, signed = rate["attempts, unsigned"], rate["attempts, signed"]
        per = (10 / signed - 10 / unsigned) * 1e6
        print(
            f"short attempts (10 records): signed takes {unsigned / signed:.2f}x the time of "
            f"unsigned: {per:.0f} us per attempt for its one signature"
        )
    report(args.logs)


def write_log(path: Path, n: int) -> None:
    log = AuditLog(path, f"attempt-{n:05d}", masker=masker())
    log.record("attempt-start", agent="demo", preset="demo", workspace=f"{WS}/{n}")
    log.record("permission", **fields(n))
    log.record("write", request=n + 1, subject={"path": f"{WS}/{n}/f"}, verdict="deny")
    log.record("attempt-end", status="completed", duration_s=0.5)
    log.close()


def report(count: int) -> None:
    """`governor audit DIR --json` over ``count`` logs, against a bare read."""
    from governor import cli

    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as d:
        tmp = Path(d)
        with ThreadPoolExecutor(16) as pool:
            list(
                pool.map(lambda n: write_log(tmp / f"d{n // 100}" / f"a{n}.jsonl", n), range(count))
            )

        def bare_read() -> float:
            start = time.perf_counter()
            lines = 0
            for path in sorted(tmp.rglob("*.jsonl")):
                for line in path.read_bytes().splitlines():
                    json.loads(line)
                    lines += 1
            return time.perf_counter() - start

        def audit_report() -> float:
            start = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()) as out:
                code = cli.main(["audit", "--json", str(tmp)])
            elapsed = time.perf_counter() - start
            assert code == 0 and len(json.loads(out.getvalue())) == count
            return elapsed

        bare_s = min(bare_read() for _ in range(3))
        audit_s = min(audit_report() for _ in range(3))
    print()
    print(f"governor audit --json over {count:,} logs: {audit_s:.2f} s")
    print(f"bare read + json.loads of the same files: {bare_s:.2f} s")
    print(
        f"the report (grouping, tally, hash chain verified) takes {audit_s / bare_s:.1f}x the bare read"
    )


if __name__ == "__main__":
    main()
