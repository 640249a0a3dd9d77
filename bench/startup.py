"""Start-up: how long the `governor` command takes before it does anything, against
the interpreter's own start and the official Python SDK client's, same run.

Every row is a fresh process timed from outside (spawn to exit, its output
captured), the rows take turns in each repetition, and the median is reported:

- ``python -c pass``: the interpreter alone, the floor of any Python command;
- ``import acp``: the SDK package imported (what any client validating with
  the ACP schema pays);
- ``governor --version``, ``--help``, ``presets``, ``check``, ``run --help``:
  the answers that should come at once (issue 26: without the ACP schema or
  trio);
- ``sdk client``: the official SDK's client (`bench/roundtrip.py`'s ``sdk``
  variant, ``acp.spawn_agent_process``) driving the flood agent with N = 0
  (initialize, session/new, one prompt answered at once, exit) end to end;
- ``governor run``: ``governor run`` driving the same agent, same N, with an
  edit-workspace policy and an audit log, the agent not sandboxed (as the SDK
  runs it), and ``governor run sandboxed`` with the agent under bwrap (the
  default below full-access; skipped, with the reason, when bwrap cannot run
  here).

Columns: wall time and CPU time (user + system, the process and everything it
reaped: the agent, bwrap) of each row, medians; the wall ratios against ``python
-c pass``, ``import acp`` and the SDK client. On a loaded machine the CPU column
moves much less than the wall.

Bytecode: every row runs with ``PYTHONDONTWRITEBYTECODE`` unset, so the
warm-up run leaves each module's ``.pyc`` as an installed package has it (pip
compiles at install; a ``uv tool`` install writes them on first use). Under
``PYTHONDONTWRITEBYTECODE=1`` an editable checkout recompiles the governor's
~120 modules at every start (about 0.1 s here) while the SDK's, installed in
site-packages, come compiled: that race measures the checkout, not the tool.

``--base PATH`` adds every ``governor`` row again, run with the ``governor``
script at PATH (another tree's venv): a before and after, interleaved.

Targets (issue 26): ``governor run`` / ``sdk client`` <= 1.0; the quick
answers well under the SDK import.

Run: ``.venv/bin/python bench/startup.py`` (``--reps``, ``--rows``, ``--base``).
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GOVERNOR = str(Path(sys.executable).parent / "governor")
FLOOD = [sys.executable, str(HERE / "flood_agent.py"), "0"]
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
"""Each row's environment: bytecode written and read (see the module docstring)."""


def rows(ws: Path, log: Path, governor: str = GOVERNOR) -> dict[str, list[str]]:
    """Each row's command line."""
    run = [governor, "run", "--workspace", str(ws), "--log", str(log), "--policy",
           str(ROOT / "policies" / "edit-workspace.toml"), "flood"]  # fmt: skip
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "import acp": [sys.executable, "-c", "import acp, acp.schema"],
        "governor --version": [governor, "--version"],
        "governor --help": [governor, "--help"],
        "governor presets": [governor, "presets"],
        "governor check": [
            governor,
            "check",
            "--policy",
            str(ROOT / "policies" / "read-only.toml"),
        ],
        "governor run --help": [governor, "run", "--help"],
        "sdk client": [sys.executable, __file__, "--sdk-client", str(ws)],
        "governor run": [*run[:2], "--no-sandbox-agent", *run[2:], "--", *FLOOD],
        "governor run sandboxed": [*run, "--", *FLOOD],
    }


def sdk_client(ws: Path) -> int:
    """The SDK client of `bench/roundtrip.py` at N = 0 (imports and all, timed from outside)."""
    sys.path.insert(0, str(HERE))
    import roundtrip

    message = roundtrip.run_sdk(0, ws, roundtrip.Clock())
    return 0 if roundtrip.parse_report(message)["n"] == 0 else 1


def timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """Seconds from spawn to exit, and CPU seconds of the process and what it reaped;
    a failing command ends the bench with its stderr."""
    cpu = _children_cpu()
    started = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, check=False, env=ENV)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        said = (done.stdout[-1500:] + done.stderr[-1500:]).strip()
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{said}")
    return wall, _children_cpu() - cpu


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=10, help="runs per row (median; default 10)")
    parser.add_argument("--rows", nargs="+", default=None, help="only these rows (and baselines)")
    parser.add_argument(
        "--base", metavar="PATH", help="also run every governor row with this governor script"
    )
    parser.add_argument("--sdk-client", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.sdk_client is not None:
        return sdk_client(args.sdk_client)
    root = Path(tempfile.mkdtemp(prefix="startup-"))
    notes = []
    try:
        ws = root / "ws"
        ws.mkdir()
        (ws / "flood-read.txt").write_text("", encoding="utf-8")
        table = rows(ws, root / "audit.jsonl")
        if args.base is not None:
            base = rows(ws, root / "audit.jsonl", args.base)
            table.update({f"base{k[len('governor') :]}": base[k] for k in base if "governor" in k})
        chosen = [
            r
            for r in table
            if args.rows is None or r in args.rows or r.replace("base", "governor", 1) in args.rows
        ]
        for base in ("python -c pass", "import acp", "sdk client"):
            if base not in chosen:
                chosen.insert(0, base)
        for sandboxed in ("governor run sandboxed", "base run sandboxed"):
            if sandboxed in chosen:
                try:
                    timed(table[sandboxed], ws)
                except SystemExit as e:
                    chosen.remove(sandboxed)
                    notes.append(f"{sandboxed} not measured: {str(e)[-300:]}")
        for name in chosen:  # once each before the clock: the page cache, pyc files
            timed(table[name], ws)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in chosen}
        loads = [os.getloadavg()[0]]
        for rep in range(args.reps):
            order = chosen[rep % len(chosen) :] + chosen[: rep % len(chosen)]
            for name in order:
                times[name].append(timed(table[name], ws))
            loads.append(os.getloadavg()[0])
    finally:
        shutil.rmtree(root, ignore_errors=True)
    median = {name: statistics.median(w for w, _ in t) for name, t in times.items()}
    cpu = {name: statistics.median(c for _, c in t) for name, t in times.items()}
    floor, schema, sdk = median["python -c pass"], median["import acp"], median["sdk client"]
    print(f"\nstartup: median of {args.reps} runs each, rows interleaved; "
          f"load average {min(loads):.1f}--{max(loads):.1f}\n")  # fmt: skip
    head = (
        f"{'row':<26}{'wall ms':>9}{'(min..max)':>18}{'cpu ms':>8}{'/pass':>8}"
        f"{'/import acp':>13}{'/sdk':>7}"
    )
    print(head)
    print("-" * len(head))
    for name in chosen:
        lo, hi = min(w for w, _ in times[name]) * 1e3, max(w for w, _ in times[name]) * 1e3
        m = median[name]
        print(f"{name:<26}{m * 1e3:>9.0f}{f'({lo:.0f}..{hi:.0f})':>18}{cpu[name] * 1e3:>8.0f}"
              f"{m / floor:>8.2f}{m / schema:>13.2f}{m / sdk:>7.2f}")  # fmt: skip
    print()
    for run in ("governor run", "governor run sandboxed", "base run", "base run sandboxed"):
        if run in median:
            ratio = median[run] / sdk
            print(f"{run} / sdk client = {ratio:.2f} (cpu {cpu[run] / cpu['sdk client']:.2f});"
                  f" target <= 1.0: {'met' if ratio <= 1.0 else 'NOT met'}")  # fmt: skip
    for name in chosen:
        other = name.replace("base", "governor", 1)
        if name.startswith("base") and other in median:
            print(f"{other}: after / before = {median[other] / median[name]:.2f} wall, "
                  f"{cpu[other] / cpu[name]:.2f} cpu")  # fmt: skip
    for note in notes:
        print(f"note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
