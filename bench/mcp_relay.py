"""The relay's cost per MCP call, against calling the same server directly, same run.

One real server, ``mcp-server-time`` (installed by ``.ci/mcp-servers``), one
tool, ``get_current_time``, N calls one after another from the official SDK's
client, each waiting for its answer:

- ``direct``: the client spawns the server itself (no sandbox, no governor);
- ``relayed``: the client spawns the shim the agent is given
  (`sandbox/standalone/mcp_shim.py`), which connects to the governor's relay:
  every call decided by the engine and written to an audit log file (default
  durability ``batch``) before it is forwarded to the server, which runs in its
  own bwrap sandbox behind the egress proxy.

The two take turns in each repetition; the median of the repetitions is
reported, per call and as the ratio relayed / direct, and so is the time to a
first answer (spawn + ``initialize``: a sandbox and two more processes on the
relayed side). Every call must answer the time in UTC, and the relayed log must
hold N allowed ``mcp`` records and verify.

    .venv/bin/python bench/mcp_relay.py [--calls 500] [--reps 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import trio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from governor.audit.log import AuditLog  # noqa: E402
from governor.audit.verify import read_lines, verify  # noqa: E402
from governor.confine import egress as network  # noqa: E402
from governor.gate.approver import Unattended  # noqa: E402
from governor.gate.gatekeeper import Gate  # noqa: E402
from governor.mcp.relay import open_relay  # noqa: E402
from governor.policies.policy import parse_policy  # noqa: E402
from governor.sandbox.net.proxy import open_egress  # noqa: E402

AGENTS = Path(os.environ.get("ACP_GOVERNOR_NPM_AGENTS") or ROOT / ".npm-agents")
TIME = AGENTS / "mcp-servers" / "python" / "bin" / "mcp-server-time"
POLICY = f"""
capability = "read-only"
[[mcp.servers]]
name = "time"
command = ["{TIME}", "--local-timezone", "UTC"]
[mcp.allow]
tools = ["time.get_current_time"]
"""


async def _calls(params: StdioServerParameters, n: int) -> tuple[float, float]:
    """(seconds to a first answer, seconds per call) over ``n`` calls."""
    started = time.perf_counter()
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        first = time.perf_counter() - started
        t0 = time.perf_counter()
        for _ in range(n):
            result = await session.call_tool("get_current_time", {"timezone": "UTC"})
            text = result.content[0].text if result.content else ""  # type: ignore[union-attr]
            if result.is_error or '"timezone": "UTC"' not in text:
                raise SystemExit(f"a wrong answer: {text[:200]}")
        return first, (time.perf_counter() - t0) / n


async def direct(n: int) -> tuple[float, float]:
    return await _calls(StdioServerParameters(command=str(TIME), args=["--local-timezone", "UTC"]), n)


async def relayed(n: int, folder: Path) -> tuple[float, float]:
    workspace = folder / "ws"
    workspace.mkdir(exist_ok=True)
    policy = parse_policy(POLICY, "bench.toml").bind(str(workspace))
    log = folder / f"audit-{time.monotonic_ns()}.jsonl"
    audit = AuditLog(log, "bench")
    audit.record("attempt-start", agent="bench", workspace=str(workspace), roots=[str(workspace)])
    gate = Gate(policy, audit, Unattended())
    async with (
        open_egress(network.judge(gate)) as proxy,
        open_relay(gate, policy, dict(os.environ), lambda: proxy) as relay,
    ):
        assert relay is not None
        (entry,) = relay.entries()
        params = StdioServerParameters(
            command=str(entry["command"]), args=[str(a) for a in entry["args"]]  # type: ignore[union-attr]
        )
        timed = await _calls(params, n)
    audit.record("attempt-end", status="completed")
    audit.close()
    records = [json.loads(line) for line in log.read_text().splitlines()]
    allowed = sum(1 for r in records if r["kind"] == "mcp" and r["verdict"] == "allow")
    checked = verify(read_lines(log))
    if allowed != n or checked.problem is not None:
        raise SystemExit(f"the relayed log holds {allowed} allowed calls of {n}: {checked.problem}")
    return timed


async def main(calls: int, reps: int) -> None:
    if not TIME.exists():
        raise SystemExit(f"{TIME} is not installed: run .ci/mcp-servers")
    runs: dict[str, list[tuple[float, float]]] = {"direct": [], "relayed": []}
    with tempfile.TemporaryDirectory(prefix="bench-mcp-") as tmp:
        for rep in range(reps):
            runs["direct"].append(await direct(calls))
            runs["relayed"].append(await relayed(calls, Path(tmp)))
            d, r = runs["direct"][-1], runs["relayed"][-1]
            print(f"rep {rep + 1}: direct {d[1] * 1e6:7.0f} us/call, relayed {r[1] * 1e6:7.0f} us/call")
    first = {k: statistics.median(f for f, _ in v) for k, v in runs.items()}
    per = {k: statistics.median(p for _, p in v) for k, v in runs.items()}
    load = os.getloadavg()[0]
    print(f"\n{calls} calls x {reps} reps, load {load:.1f}")
    print(f"per call:      direct {per['direct'] * 1e6:.0f} us, relayed {per['relayed'] * 1e6:.0f} us "
          f"= {per['relayed'] / per['direct']:.2f} x direct (+{(per['relayed'] - per['direct']) * 1e6:.0f} us)")
    print(f"first answer:  direct {first['direct'] * 1e3:.0f} ms, relayed {first['relayed'] * 1e3:.0f} ms "
          f"= {first['relayed'] / first['direct']:.2f} x direct")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    trio.run(main, args.calls, args.reps)
