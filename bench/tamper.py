"""The tamper audit's cost on a 1,000-file diff, against just reading the files.

A workspace of N test files (Python, TypeScript, Rust and Go in turn, each a
few tests of a few assertions) is snapshotted, every file is rewritten (half
honestly, half with a skip marker added), and the audit runs as an attempt
runs it: `governor.tamper.baseline.keep` over the snapshot at the start,
`audit` at the end. Baseline, in the same run: reading every file's bytes
twice (once per side), which is the least any diff of the contents costs.

Against another checkout (``--against DIR``, e.g. main's worktree): the same
workload is run again in a child process that imports ``governor`` from DIR,
and the ratio of this code's keep + audit to that one's is printed: what
reading content (test bodies, code at import, coding cookies) costs per
attempt against the audit that counted assertions.

Run: ``.venv/bin/python bench/tamper.py [--files N] [--rounds R] [--against DIR]``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Run as a script, this file has bench/ first on sys.path: the project's root
# must come first for `governor` to be the package, not a script here (or the
# checkout `--against` names, in the child that measures it).
sys.path.insert(
    0, os.environ.get("GOVERNOR_BENCH_ROOT") or str(Path(__file__).resolve().parents[1])
)

from governor.confine.workspace import diff, snapshot
from governor.tamper import baseline

PY = "import pytest\n\n" + "".join(
    f"def test_case_{i}():\n    value = compute({i})\n    assert value == {i * 2}\n    assert value > 0\n\n"
    for i in range(8)
)
TS = (
    "describe('calc', () => {\n"
    + "".join(
        f"  it('case {i}', () => {{\n    expect(compute({i})).toBe({i * 2});\n  }});\n"
        for i in range(8)
    )
    + "});\n"
)
RS = (
    "#[cfg(test)]\nmod tests {\n"
    + "".join(
        f"    #[test]\n    fn case_{i}() {{\n        assert_eq!(compute({i}), {i * 2});\n    }}\n"
        for i in range(8)
    )
    + "}\n"
)
GO = 'package calc\n\nimport "testing"\n\n' + "".join(
    f'func TestCase{i}(t *testing.T) {{\n\tif compute({i}) != {i * 2} {{\n\t\tt.Errorf("bad")\n\t}}\n}}\n\n'
    for i in range(8)
)
KINDS = (
    ("tests/test_{n}.py", PY, ("def test_case_3", "@pytest.mark.skip\ndef test_case_3")),
    ("src/calc_{n}.test.ts", TS, ("it('case 3'", "it.skip('case 3'")),
    ("src/calc_{n}.rs", RS, ("fn case_3", "#[ignore]\n    fn case_3")),
    ("calc/calc_{n}_test.go", GO, ("if compute(3)", "t.Skip()\n\tif compute(3)")),
)


def make(root: Path, files: int) -> list[Path]:
    paths = []
    for n in range(files):
        name, text, _ = KINDS[n % len(KINDS)]
        path = root / name.format(n=n)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        paths.append(path)
    return paths


def rewrite(paths: list[Path]) -> None:
    for n, path in enumerate(paths):
        _, text, (old, new) = KINDS[n % len(KINDS)]
        path.write_text(text.replace(old, new) if n % 2 else text + "\n")


def read_all(paths: list[Path]) -> int:
    return sum(len(p.read_bytes()) for p in paths)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", help="another checkout, measured in a child process")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    theirs: list[dict[str, float]] = []
    bare, kept, audited, found = [], [], [], 0
    for _ in range(args.rounds):
        if args.against:  # a round of theirs before each of ours: the same load for both
            done = subprocess.run(
                [sys.executable, __file__, "--files", str(args.files), "--rounds", "1", "--json"],
                env={**os.environ, "GOVERNOR_BENCH_ROOT": args.against},
                capture_output=True,
                text=True,
                check=True,
            )
            theirs.append(json.loads(done.stdout))
        with tempfile.TemporaryDirectory() as tmp:
            root = Path(tmp)
            paths = make(root, args.files)
            t0 = time.perf_counter()
            read_all(paths)
            read_all(paths)
            bare.append(time.perf_counter() - t0)
            before = snapshot([tmp])
            t0 = time.perf_counter()
            base = baseline.keep(before.files, [tmp])
            kept.append(time.perf_counter() - t0)
            rewrite(paths)
            after = snapshot([tmp])
            changed = [c.path for c in diff(before, after)]
            t0 = time.perf_counter()
            result = baseline.audit(base, after.files, changed)
            audited.append(time.perf_counter() - t0)
            found = len(result.findings) + result.more
    b, k, a = (statistics.median(x) for x in (bare, kept, audited))
    if args.json:
        print(json.dumps({"bare": b, "keep": k, "audit": a, "found": found}))
        return
    print(
        f"files {args.files}, rounds {args.rounds}, findings {found} (expected {args.files // 2})"
    )
    print(f"baseline: read every file twice  {b * 1000:8.1f} ms")
    print(f"keep (at the start)              {k * 1000:8.1f} ms  = {k / b:5.2f} x baseline")
    print(f"audit (at the end)               {a * 1000:8.1f} ms  = {a / b:5.2f} x baseline")
    print(
        f"keep + audit                     {(k + a) * 1000:8.1f} ms  = {(k + a) / b:5.2f} x baseline, {(k + a) / args.files * 1e6:.0f} us per file"
    )
    if theirs:
        ob, ok, oa = (statistics.median(r[k] for r in theirs) for k in ("bare", "keep", "audit"))
        print(f"--against {args.against} (rounds interleaved): findings {theirs[-1]['found']}")
        print(
            f"  its keep {ok * 1000:8.1f} ms, audit {oa * 1000:8.1f} ms (its baseline {ob * 1000:.1f} ms)"
        )
        print(
            f"  this code's keep + audit = {(k + a) / (ok + oa):5.2f} x its "
            f"(keep {k / ok:4.2f} x, audit {a / oa:4.2f} x; baseline-normalized "
            f"{((k + a) / b) / ((ok + oa) / ob):4.2f} x)"
        )


if __name__ == "__main__":
    main()
