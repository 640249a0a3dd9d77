"""The governor's own tools (``[mcp] governor_tools``): the cost of a call through
MCP against the same request made the ACP way, same gate, same run.

- ``acp read``: `FileRequests.read_text_file` called with an ACP
  ``fs/read_text_file`` request (what the agent's ACP request reaches, less the
  ACP pipe and JSON parse), decided, recorded, the file read;
- ``mcp read``: the ``read`` tool from the official SDK's client through the
  shim the agent spawns, the socket, the SDK's server in the governor: the
  same handler behind it;
- ``acp run`` / ``mcp run``: ``true`` as a terminal (create, wait, output,
  release on the gate's `TerminalRelay`) against the ``run`` tool; the command
  runs in the session's sandbox either way.

The variants take turns in each repetition; the median per call is reported and
the ratio mcp / acp. Every call must be allowed and every record written; the
log must verify.

    .venv/bin/python bench/governor_tools.py [--calls 300] [--reps 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio
from acp import schema
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from governor.audit.log import AuditLog  # noqa: E402
from governor.audit.verify import read_lines, verify  # noqa: E402
from governor.confine import egress as network  # noqa: E402
from governor.confine.sandboxes import GovernedTerminals  # noqa: E402
from governor.gate.approver import Unattended  # noqa: E402
from governor.gate.gatekeeper import Gate  # noqa: E402
from governor.mcp.relay import open_relay  # noqa: E402
from governor.policies.policy import parse_policy  # noqa: E402
from governor.sandbox.net.proxy import EgressProxy, open_egress  # noqa: E402

POLICY = 'capability = "edit-workspace"\n[mcp]\ngovernor_tools = true\n'


async def timed(n: int, call: Callable[[], Awaitable[object]]) -> float:
    start = time.perf_counter()
    for _ in range(n):
        await call()
    return (time.perf_counter() - start) / n


async def main(calls: int, reps: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="bench-tools-"))
    workspace = folder / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text("a line\n" * 20)
    policy = parse_policy(POLICY, "bench.toml").bind(str(workspace))
    log = folder / "audit.jsonl"
    audit = AuditLog(log, "bench")
    audit.record("attempt-start", agent="bench", workspace=policy.workspace, roots=list(policy.roots))
    times: dict[str, list[float]] = {"acp read": [], "mcp read": [], "acp run": [], "mcp run": []}
    async with trio.open_nursery() as nursery:
        proxies: list[EgressProxy] = []  # the commands' sandbox has no network: never asked
        terminals = GovernedTerminals(
            nursery, policy, dict(os.environ), proxy=lambda: proxies[0] if proxies else None
        )
        gate = Gate(policy, audit, Unattended(), terminals=terminals)
        relay_of = gate.relay
        assert relay_of is not None
        async with (
            open_egress(network.judge(gate)) as proxy,
            open_relay(gate, policy, dict(os.environ), lambda: proxy) as relay,
        ):
            assert relay is not None
            proxies.append(proxy)
            (entry,) = relay.entries()
            params = StdioServerParameters(
                command=str(entry["command"]), args=[str(a) for a in entry["args"]]  # type: ignore[union-attr]
            )
            async with stdio_client(params) as (r, w), ClientSession(r, w) as session:
                await session.initialize()
                path = str(workspace / "notes.txt")

                async def acp_read() -> None:
                    answer = gate.files.read_text_file(schema.ReadTextFileRequest(session_id="", path=path))
                    if not isinstance(answer, schema.ReadTextFileResponse):
                        answer = await answer
                    assert answer.content.startswith("a line")

                async def mcp_read() -> None:
                    result = await session.call_tool("read", {"path": path})
                    assert not result.is_error

                async def acp_run() -> None:
                    created = await relay_of.create_terminal(
                        schema.CreateTerminalRequest(session_id="", command="true", cwd=str(workspace))
                    )
                    tid = created.terminal_id
                    await relay_of.wait_for_terminal_exit(
                        schema.WaitForTerminalExitRequest(session_id="", terminal_id=tid)
                    )
                    await relay_of.terminal_output(schema.TerminalOutputRequest(session_id="", terminal_id=tid))
                    await relay_of.release_terminal(schema.ReleaseTerminalRequest(session_id="", terminal_id=tid))

                async def mcp_run() -> None:
                    result = await session.call_tool("run", {"command": "true"})
                    assert not result.is_error and result.structured_content["exit_code"] == 0  # type: ignore[index]

                await acp_run()  # the session's sandbox opens once, outside the clock
                variants = {"acp read": acp_read, "mcp read": mcp_read, "acp run": acp_run, "mcp run": mcp_run}
                for _ in range(reps):
                    for name, call in variants.items():
                        n = calls if "read" in name else max(1, calls // 5)
                        times[name].append(await timed(n, call))
        await terminals.close()
        nursery.cancel_scope.cancel()
    audit.record("attempt-end", status="completed")
    audit.close()
    checked = verify(read_lines(log))
    assert checked.problem is None, checked.problem
    median = {k: statistics.median(v) for k, v in times.items()}
    for name, value in median.items():
        print(f"{name:9} {value * 1000:8.3f} ms per call")
    for what in ("read", "run"):
        mcp, acp = median[f"mcp {what}"], median[f"acp {what}"]
        print(f"{what}: mcp / acp = {mcp / acp:.2f} x (+{(mcp - acp) * 1000:.2f} ms)")
    print(f"log: {checked.records} records, verified")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    trio.run(main, args.calls, args.reps)
