"""The governor's cost per request, against the official Python SDK client and a bare floor.

One flood agent (`bench/flood_agent.py`, stdlib only) sends N
``session/request_permission`` and N ``fs/read_text_file`` one after another,
each waiting for its answer. The whole attempt -- spawn, initialize,
session/new, the prompt's 2N round trips, the agent's exit -- is timed through:

- ``floor``: a bare stdlib client that answers without any checks (blocking
  reads and writes on the pipes, the file read with ``open``);
- ``sdk``: the official Python SDK's client (``acp.spawn_agent_process``,
  asyncio), allowing everything;
- ``governor``: `governor.attempt.lifecycle.run_attempt` with an edit-workspace policy,
  an audit log file (default durability ``batch``) and the CLI's structlog
  set-up: the full decision, validation and audit path, agent not sandboxed;
- ``governor-always``: the same with ``durability="always"`` (an fsync before
  every answer, shared by concurrent decisions; the disk's own time for one
  appended line and its fsync is printed beside it);
- ``governor-sandboxed``: the same as ``governor`` with the agent under bwrap.
  It is skipped, with the reason, when the sandboxed attempt cannot run here.
- ``governor-json``: the same as ``governor``, and then the outcome written as
  ``governor run --json`` writes it (`governor.cli.outcome_json`: the decision
  records streamed from the audit log into the document) to a file, inside the
  clock; the file must hold every decision. Target (issue 25): within 5 % of
  ``governor``, at full N beside it in the same run.
- ``governor-signed`` (``--signing``, or named in ``--variants``): the same as
  ``governor`` with the operator's Ed25519 key in ``$ACP_GOVERNOR_AUDIT_PRIVATE_KEY``
  (a key made for the run): the end record is signed, and must verify. At full
  N, beside ``governor`` in the same run: one signature per attempt must not
  show per request.

The two side variants run at N/4 by default (``--side-n``) to keep the whole
bench to a few minutes; every comparison is per request.

Every run is its own fresh Python process (no state shared between variants),
the variants take turns in each repetition, and the median of the repetitions
is reported. Every run must come back with all N permissions allowed and all N
reads right (the agent checks), so a client that answers wrongly cannot pass
for a fast one; the governor's audit log must verify and hold every decision.
Imports happen before the clock starts and the log check after it stops.

Columns: wall time of the whole attempt; the agent's own clock per permission
and per read round trip (no spawn, no start-up); CPU per request of the client
process (all its threads, from getrusage) and of the agent. On a shared machine
the CPU columns move much less than the wall times.

Target (issue): ``c/b = governor / sdk <= 1.0``, wall time per request; ``c/a``
is against the floor; ``governor-json / governor <= 1.05``.

Run: ``.venv/bin/python bench/roundtrip.py`` (``--n``, ``--reps``, ``--variants``;
``--profile STATS`` runs the governor variant once under cProfile instead).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import importlib
import importlib.util
import json
import os
import pstats
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
FLOOD = HERE / "flood_agent.py"
# Run as a script, this file has bench/ first on sys.path, and bench/ holds scripts
# named like the project's packages (a script named like a package, as bench/sandbox.py was): the project's root goes first
# instead, and the flood agent is loaded from its file.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != HERE]
sys.path.insert(0, str(HERE.parent))


def _flood_agent() -> ModuleType:
    spec = importlib.util.spec_from_file_location("flood_agent", FLOOD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_flood = _flood_agent()
EDIT_FILE: str = _flood.EDIT_FILE
READ_FILE: str = _flood.READ_FILE
parse_report: Callable[[str], dict[str, Any]] = _flood.parse_report

READ_CONTENT = "".join(
    f"line {i}: the flood agent reads this file again and again\n" for i in range(4)
)
"""The small file the agent reads (about 220 bytes)."""

VARIANTS = (
    "floor", "sdk", "governor", "governor-json", "governor-always", "governor-sandboxed",
    "governor-signed",
)  # fmt: skip
SIDE_VARIANTS = ("governor-always", "governor-sandboxed")
"""Run at a smaller N by default (``--side-n``); compared per request."""


def agent_argv(n: int) -> list[str]:
    return [sys.executable, str(FLOOD), str(n)]


def make_workspace(root: Path) -> Path:
    ws = root / "ws"
    (ws / Path(EDIT_FILE).parent).mkdir(parents=True)
    (ws / READ_FILE).write_text(READ_CONTENT, encoding="utf-8")
    return ws


class Clock:
    """Wall time and CPU time (this process with all its threads; reaped children) of a block."""

    def __enter__(self) -> Clock:
        self.own, self.children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.started
        self.own = _cpu(resource.RUSAGE_SELF) - self.own
        self.children = _cpu(resource.RUSAGE_CHILDREN) - self.children


def _cpu(who: int) -> float:
    """User + system CPU seconds of this process (all threads) or of its reaped children."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


# -- (a) the floor: a bare stdlib client ------------------------------------------------


def run_floor(n: int, ws: Path, clock: Clock) -> str:
    """Drive one turn with blocking pipe I/O and no checks; return the agent's final message."""
    with clock:
        return _floor(n, ws)


def _floor(n: int, ws: Path) -> str:
    process = subprocess.Popen(
        agent_argv(n),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        cwd=ws,
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout
    loads, dumps = json.loads, json.dumps

    def send(message: dict[str, Any]) -> None:
        stdin.write(dumps(message, separators=(",", ":")).encode() + b"\n")
        stdin.flush()

    message_text: list[str] = []

    def call(rid: int, method: str, params: dict[str, Any]) -> Any:
        send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            line = stdout.readline()
            if not line:
                raise RuntimeError(f"the flood agent ended before answering {method}")
            msg = loads(line)
            method_in = msg.get("method")
            if method_in is None:
                if msg.get("id") == rid:
                    return msg.get("result")
                continue
            if method_in == "session/request_permission":
                chosen = next(
                    o["optionId"] for o in msg["params"]["options"] if o["kind"] == "allow_once"
                )
                result: Any = {"outcome": {"outcome": "selected", "optionId": chosen}}
            elif method_in == "fs/read_text_file":
                with open(msg["params"]["path"], encoding="utf-8") as f:
                    result = {"content": f.read()}
            elif method_in == "session/update":
                update = msg["params"]["update"]
                if update.get("sessionUpdate") == "agent_message_chunk":
                    message_text.append(update["content"].get("text", ""))
                continue
            else:
                send(
                    {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}}
                )
                continue
            send({"jsonrpc": "2.0", "id": msg["id"], "result": result})

    call(
        0,
        "initialize",
        {"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": True}}},
    )
    session = call(1, "session/new", {"cwd": str(ws), "mcpServers": []})["sessionId"]
    call(2, "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "flood"}]})
    stdin.close()
    process.wait()
    stdout.close()
    return "".join(message_text)


# -- (b) the official Python SDK's client ---------------------------------------------


def run_sdk(n: int, ws: Path, clock: Clock) -> str:
    """Drive one turn with `acp.spawn_agent_process`, allowing everything."""
    from acp import PROTOCOL_VERSION, spawn_agent_process, text_block
    from acp.schema import (
        AllowedOutcome,
        ClientCapabilities,
        FileSystemCapabilities,
        Implementation,
        ReadTextFileResponse,
        RequestPermissionResponse,
    )

    message_text: list[str] = []

    class AllowingClient:
        async def request_permission(
            self, options: Any, session_id: str, tool_call: Any, **kwargs: Any
        ) -> RequestPermissionResponse:
            chosen = next(o.option_id for o in options if o.kind == "allow_once")
            return RequestPermissionResponse(
                outcome=AllowedOutcome(outcome="selected", option_id=chosen)
            )

        async def read_text_file(
            self,
            path: str,
            session_id: str,
            line: int | None = None,
            limit: int | None = None,
            **kwargs: Any,
        ) -> ReadTextFileResponse:
            with open(path, encoding="utf-8") as f:
                return ReadTextFileResponse(content=f.read())

        async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
            if getattr(update, "session_update", None) == "agent_message_chunk":
                message_text.append(getattr(update.content, "text", ""))

    async def main() -> None:
        async with spawn_agent_process(
            AllowingClient(),  # type: ignore[arg-type]  # the Protocol's optional methods are absent
            *agent_argv(n),
            cwd=ws,
            transport_kwargs={"stderr": asyncio.subprocess.DEVNULL},
        ) as (conn, _process):
            await conn.initialize(
                protocol_version=PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(
                    fs=FileSystemCapabilities(read_text_file=True, write_text_file=False)
                ),
                client_info=Implementation(name="roundtrip-bench", version="1"),
            )
            session = await conn.new_session(cwd=str(ws), mcp_servers=[])
            await conn.prompt(session_id=session.session_id, prompt=[text_block("flood")])

    with clock:
        asyncio.run(main())
    return "".join(message_text)


# -- (c) the governor ------------------------------------------------------------------


def governor_spec(
    n: int, ws: Path, log: Path, *, durability: str, sandboxed: bool, signed: bool = False
) -> Any:
    from governor.job.spec import AttemptSpec
    from governor.policies.policy import parse_policy

    environ = None
    if signed:
        from governor.audit.signing import KEY_VARIABLE, keygen

        keygen(ws.parent / "audit.key")
        environ = {**os.environ, KEY_VARIABLE: (ws.parent / "audit.key").read_text()}
    return AttemptSpec(
        environ=environ,
        prompt="flood",
        argv=agent_argv(n),
        workspace=ws,
        policy=parse_policy('capability = "edit-workspace"', "roundtrip-bench"),
        log=log,
        sandbox_agent=sandboxed,
        durability=durability,  # type: ignore[arg-type]
        timeout=3600,
    )


def run_governor(
    n: int,
    ws: Path,
    clock: Clock,
    *,
    durability: str = "batch",
    sandboxed: bool = False,
    signed: bool = False,
    as_json: bool = False,
) -> str:
    """One governed attempt through `run_attempt`; the audit log must verify and hold every
    decision (and, signed, end at its head with a signature that holds; as JSON, the
    outcome's document hold every decision too)."""
    import trio

    from governor.attempt.lifecycle import run_attempt
    from governor.audit.verify import read_lines, verify
    from governor.observe import logs

    logs.configure(json_lines=True)
    log = ws.parent / "audit.jsonl"
    spec = governor_spec(n, ws, log, durability=durability, sandboxed=sandboxed, signed=signed)
    from governor.cli import exit_code
    from governor.cli.outcome_json import document, write_json
    from governor.cli.run import freeze_startup_heap

    printed = ws.parent / "outcome.json"
    with clock:
        freeze_startup_heap()  # as `governor run` does before its attempt
        outcome = trio.run(run_attempt, spec)
        if as_json:  # as `governor run --json` prints it, into a file instead of stdout
            with open(printed, "w", encoding="utf-8") as out:
                write_json(document(outcome, exit_code(outcome)), out, indent=2)
                out.write("\n")
    if as_json and len(json.loads(printed.read_text(encoding="utf-8"))["tool_calls"]) != 2 * n:
        raise RuntimeError("the --json outcome does not hold every decision")
    if outcome.status != "completed":
        raise RuntimeError(f"the governed flood did not complete: {outcome.reason}")
    if outcome.acp is None or outcome.acp.sandboxed_agent != sandboxed:
        raise RuntimeError(f"the agent was not run {'in' if sandboxed else 'outside'} its sandbox")
    checked = verify(read_lines(log), {outcome.log_head or ""})
    if checked.problem is not None or checked.records != 2 * n + 2:
        raise RuntimeError(f"the audit log is not whole: {checked}")
    if signed:
        from governor.audit.anchor import Anchor, authenticate
        from governor.audit.signing import PublicKey

        key = PublicKey.load(ws.parent / "audit.key.pub")
        auth = authenticate(checked, anchors=[Anchor(outcome.log_head or "")], key=key)
        if not auth.ok or auth.signatures != 1:
            raise RuntimeError(f"the signed log does not hold: {auth.problems}")
    return outcome.summary or ""


def fsync_floor(root: Path, count: int = 200) -> float:
    """Median seconds of one appended audit-sized line plus its fsync on this disk: what
    ``durability="always"`` adds to every answer of a one-at-a-time agent at the least."""
    line = b"x" * 400 + b"\n"
    fd = os.open(root / "fsync-probe", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    times = []
    try:
        for _ in range(count):
            started = time.perf_counter()
            os.write(fd, line)
            os.fsync(fd)
            times.append(time.perf_counter() - started)
    finally:
        os.close(fd)
    return statistics.median(times)


RUNNERS: dict[str, Callable[[int, Path, Clock], str]] = {
    "floor": run_floor,
    "sdk": run_sdk,
    "governor": run_governor,
    "governor-json": lambda n, ws, clock: run_governor(n, ws, clock, as_json=True),
    "governor-always": lambda n, ws, clock: run_governor(n, ws, clock, durability="always"),
    "governor-sandboxed": lambda n, ws, clock: run_governor(n, ws, clock, sandboxed=True),
    "governor-signed": lambda n, ws, clock: run_governor(n, ws, clock, signed=True),
}


WARM_UP: dict[str, tuple[str, ...]] = {
    "floor": (),
    "sdk": ("acp", "acp.schema"),
    "governor": (
        "trio",
        "governor.attempt.lifecycle",
        "governor.audit.log",
        "governor.observe.logs",
        "governor.cli.outcome_json",
    ),
}
"""Modules each variant imports before the clock starts (start-up is not the subject)."""


def run_one(variant: str, n: int) -> dict[str, Any]:
    """One timed run in this process, in a fresh temporary workspace."""
    for module in WARM_UP[variant.split("-")[0]]:
        importlib.import_module(module)
    root = Path(tempfile.mkdtemp(prefix="roundtrip-"))
    clock = Clock()
    try:
        message = RUNNERS[variant](n, make_workspace(root), clock)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report = parse_report(message)
    if report["allowed"] != n or report["reads_ok"] != n:
        raise RuntimeError(f"{variant}: the agent did not get every answer right: {report}")
    return {
        "variant": variant,
        "wall_s": clock.wall,
        "client_cpu_s": clock.own,
        "agent_cpu_s": clock.children,
        **report,
    }


def run_in_child(variant: str, n: int) -> dict[str, Any]:
    """`run_one` in a fresh interpreter, so no variant inherits another's state."""
    done = subprocess.run(
        [sys.executable, __file__, "--one", variant, "--n", str(n)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{variant} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


# -- the table -------------------------------------------------------------------------


def summarize(results: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Medians per variant; per-request figures divide by that variant's own 2N."""
    rows = []
    for variant, runs in results.items():
        n = runs[0]["n"]
        wall = statistics.median(r["wall_s"] for r in runs)
        rows.append(
            {
                "variant": variant,
                "n": n,
                "wall_s": wall,
                "spread": (min(r["wall_s"] for r in runs), max(r["wall_s"] for r in runs)),
                "req_s": 2 * n / wall,
                "wall_us": wall / (2 * n) * 1e6,
                "perm_us": statistics.median(r["permission_s"] for r in runs) / n * 1e6,
                "read_us": statistics.median(r["read_s"] for r in runs) / n * 1e6,
                "cpu_us": statistics.median(r["client_cpu_s"] for r in runs) / (2 * n) * 1e6,
                "agent_us": statistics.median(r["agent_cpu_s"] for r in runs) / (2 * n) * 1e6,
            }
        )
    return rows


def print_table(rows: list[dict[str, Any]], n: int, reps: int, notes: list[str]) -> None:
    by = {r["variant"]: r for r in rows}
    floor, sdk = by["floor"], by["sdk"]
    print(f"\nroundtrip: N = {n} permission asks + N reads per attempt, median of {reps} runs")
    print("  wall: the whole attempt (spawn to exit); perm/read: the agent's clock per round trip;")
    print(
        "  cpu: user+sys CPU per request of the client process (all its threads) and of the agent;"
    )
    print("  /floor, /sdk: wall time per request against the floor's and the SDK client's\n")
    head = (
        f"{'variant':<20}{'N':>7}{'wall s':>8}{'(min..max)':>16}{'req/s':>7}{'perm us':>9}"
        f"{'read us':>9}{'client cpu':>12}{'agent cpu':>11}{'/floor':>8}{'/sdk':>7}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        lo, hi = r["spread"]
        print(
            f"{r['variant']:<20}{r['n']:>7}{r['wall_s']:>8.2f}{f'({lo:.2f}..{hi:.2f})':>16}"
            f"{r['req_s']:>7.0f}{r['perm_us']:>9.0f}{r['read_us']:>9.0f}{r['cpu_us']:>12.0f}"
            f"{r['agent_us']:>11.0f}{r['wall_us'] / floor['wall_us']:>8.2f}"
            f"{r['wall_us'] / sdk['wall_us']:>7.2f}"
        )
    gov = by.get("governor")
    if gov is not None:
        cb, ca = gov["wall_us"] / sdk["wall_us"], gov["wall_us"] / floor["wall_us"]
        verdict = "met" if cb <= 1.0 else "NOT met"
        print(
            f"\nc/b = {cb:.2f}  c/a = {ca:.2f}  (b/a = {sdk['wall_us'] / floor['wall_us']:.2f});"
            f" target c/b <= 1.0: {verdict}"
        )
        print(
            f"client CPU per request: governor/sdk = {gov['cpu_us'] / sdk['cpu_us']:.2f},"
            f" governor/floor = {gov['cpu_us'] / floor['cpu_us']:.2f}"
        )
    as_json = by.get("governor-json")
    if gov is not None and as_json is not None:
        ratio = as_json["wall_us"] / gov["wall_us"]
        print(
            f"json/plain: wall per request {ratio:.3f}, client CPU per request "
            f"{as_json['cpu_us'] / gov['cpu_us']:.3f} (the outcome printed as --json prints it);"
            f" target <= 1.05: {'met' if ratio <= 1.05 else 'NOT met'}"
        )
    signed = by.get("governor-signed")
    if gov is not None and signed is not None:
        print(
            f"signed/unsigned: wall per request {signed['wall_us'] / gov['wall_us']:.2f}, "
            f"client CPU per request {signed['cpu_us'] / gov['cpu_us']:.2f} "
            "(one signature per attempt, on its end record)"
        )
    for note in notes:
        print(f"note: {note}")


def profile_governor(n: int, out: Path) -> None:
    """The governor variant once under cProfile (in this process); the top functions."""
    profiler = cProfile.Profile()
    profiler.enable()
    result = run_one("governor", n)
    profiler.disable()
    profiler.dump_stats(out)
    print(f"profiled governor run (cProfile inflates small calls): {result}")
    stats = pstats.Stats(profiler).strip_dirs()
    stats.sort_stats("tottime").print_stats(35)
    stats.sort_stats("cumulative").print_stats(60)
    print(f"stats written to {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20_000, help="asks and reads each (default 20000)")
    parser.add_argument("--reps", type=int, default=3, help="runs per variant (median; default 3)")
    parser.add_argument("--variants", nargs="+", choices=VARIANTS, default=None)
    parser.add_argument(
        "--side-n",
        type=int,
        default=None,
        help="N for governor-always and governor-sandboxed (default N/4, to keep the run short)",
    )
    parser.add_argument(
        "--signing",
        action="store_true",
        help="also governor-signed: the end record signed (needs the signing extra)",
    )
    parser.add_argument("--one", choices=VARIANTS, help=argparse.SUPPRESS)
    parser.add_argument(
        "--profile",
        type=Path,
        metavar="STATS",
        default=None,
        help="profile one governor run with cProfile and write STATS",
    )
    args = parser.parse_args(argv)
    if args.n <= 0 or args.reps <= 0 or (args.side_n is not None and args.side_n <= 0):
        parser.error("--n, --reps and --side-n must be positive")
    if args.one is not None:
        print(json.dumps(run_one(args.one, args.n)))
        return 0
    if args.profile is not None:
        profile_governor(args.n, args.profile)
        return 0
    notes = []
    variants = list(args.variants or [v for v in VARIANTS if v != "governor-signed"])
    if args.signing and "governor-signed" not in variants:
        variants.append("governor-signed")
    for needed in ("sdk", "floor"):
        if needed not in variants:
            variants.insert(0, needed)
    if "governor-sandboxed" in variants:
        try:
            run_in_child("governor-sandboxed", 2)
        except SystemExit as e:
            variants.remove("governor-sandboxed")
            notes.append(f"governor-sandboxed not measured: the sandboxed attempt failed: {e}")
    side_n = args.side_n or max(1, args.n // 4)
    sizes = {v: side_n if v in SIDE_VARIANTS else args.n for v in variants}
    results: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    for rep in range(args.reps):
        order = variants[rep % len(variants) :] + variants[: rep % len(variants)]
        for variant in order:
            result = run_in_child(variant, sizes[variant])
            results[variant].append(result)
            print(f"  rep {rep + 1} {variant:<20}{result['wall_s']:.2f} s", file=sys.stderr)
    if "governor-always" in variants:
        with tempfile.TemporaryDirectory() as d:
            notes.append(
                "governor-always waits for an fsync before each answer; one appended line"
                f" + fsync on this disk alone takes {fsync_floor(Path(d)) * 1e6:.0f} us"
            )
    if "governor-sandboxed" in variants:
        notes.append(
            "governor-sandboxed: the agent under bwrap (agent cpu is not counted: bwrap's"
            " children are not reaped through the bench)"
        )
    print_table(summarize(results), args.n, args.reps, notes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
