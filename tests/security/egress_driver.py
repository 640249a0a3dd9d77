"""One network attack, run the way an attempt runs its agent, as whoever runs this.

Started by test_escapes_network.py as root (in a subprocess) or as the
unprivileged account (``runuser``), with one JSON request on stdin. It starts
the loopback servers the attack aims at (``allowed`` and ``unlisted``, TCP
and a UDP one on the unlisted port, each counting who reached it; ``decoys``:
servers on other loopback addresses at the allowed port), opens the
egress proxy with the real judge (`governor.confine.egress.judge` over a real `Gate`
and a real audit log), starts ``bash -c SCRIPT`` in the agent's own sandbox
(`governor.confine.sandboxes.agent_profile`'s shape: own network namespace, the proxy)
with ``$A`` and ``$B`` the two ports, and prints one JSON line: the script's output and exit code, the servers' hits, the audit log's
network records, the proxy process's peak RSS.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import trio

from governor.audit.log import AuditLog
from governor.confine.egress import egress_for, judge
from governor.gate.approver import Unattended
from governor.gate.gatekeeper import Gate
from governor.policies.capability import Capability
from governor.policies.network import NetworkRules, parse_pattern
from governor.policies.policy import Policy
from governor.sandbox.net.judge import ProxyLimits
from governor.sandbox.net.proxy import open_egress
from governor.sandbox.plan.profile import Profile
from governor.sandbox.run.agent import agent_process
from governor.sandbox.run.spawn import PIPE


def peak_rss_kb() -> int:
    """This process's peak RSS since its exec (``VmHWM``; ``ru_maxrss`` would
    include the parent's before the exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


async def _tcp_server(
    name: str, hits: dict[str, int], host: str = "127.0.0.1", port: int = 0, *, task_status: Any
) -> None:
    listener = (await trio.open_tcp_listeners(port, host=host))[0]
    task_status.started(listener.socket.getsockname()[1])

    async def answer(stream: trio.SocketStream) -> None:
        hits[name] += 1
        async with stream:
            try:
                with trio.move_on_after(5):
                    data = b""
                    while b"\r\n\r\n" not in data:
                        chunk = await stream.receive_some(65536)
                        if not chunk:
                            break
                        data += chunk
                    body = f"{name}\n".encode()
                    await stream.send_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
                        % (len(body), body)
                    )
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass

    await trio.serve_listeners(answer, [listener])


async def _udp_server(port: int, hits: dict[str, int]) -> None:
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_DGRAM)
    await sock.bind(("127.0.0.1", port))
    while True:
        await sock.recvfrom(65536)
        hits["udp"] += 1


async def main(request: dict[str, Any]) -> dict[str, Any]:
    root = Path(request["root"])
    ws, home, log = root / "ws", root / "home", root / "audit.jsonl"
    ws.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    hits = {"allowed": 0, "unlisted": 0, "udp": 0}
    async with trio.open_nursery() as nursery:
        a = await nursery.start(_tcp_server, "allowed", hits)
        b = await nursery.start(_tcp_server, "unlisted", hits)
        nursery.start_soon(_udp_server, b, hits)
        for decoy in request.get("decoys", ()):  # where a lying resolver points, on $A
            hits.setdefault("decoy", 0)
            await nursery.start(_tcp_server, "decoy", hits, decoy, a)
        allow = [h.replace("$A", str(a)).replace("$B", str(b)) for h in request["allow"]]
        rules = NetworkRules(enabled=True, agent=tuple(parse_pattern(h) for h in allow))
        policy = Policy(capability=Capability.EDIT_WORKSPACE, network_rules=rules).bind(str(ws))
        audit = AuditLog(log, "net-attack")
        gate = Gate(policy, audit, Unattended())
        limits = ProxyLimits(**request.get("limits", {}))
        async with open_egress(judge(gate), limits) as proxy:
            egress = egress_for(rules, "agent")
            profile = Profile.for_agent(
                Capability.EDIT_WORKSPACE,
                ws,
                home=home,
                env={"PATH": "/usr/local/bin:/usr/bin:/bin", "A": str(a), "B": str(b)},
                network=False,
                egress=egress,
            )

            async def attach(pid: int) -> None:
                await proxy.attach(pid, egress, "agent")

            async with agent_process(
                profile, ["bash", "-c", request["script"]], stdin=None, stdout=PIPE,
                stderr=PIPE, attach=attach,
            ) as child:  # fmt: skip
                assert child.stdout is not None and child.stderr is not None
                out = bytearray()
                err = bytearray()

                async def pump(stream: Any, into: bytearray) -> None:
                    while data := await stream.receive_some(65536):
                        into.extend(data)

                with trio.move_on_after(request.get("timeout", 60)):
                    async with trio.open_nursery() as pumps:
                        pumps.start_soon(pump, child.stdout, out)
                        pumps.start_soon(pump, child.stderr, err)
                    code = await child.wait()
        audit.close()
        nursery.cancel_scope.cancel()
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    return {
        "stdout": out.decode(errors="replace"),
        "stderr": err.decode(errors="replace")[-4000:],
        "code": code,
        "hits": hits,
        "ports": [a, b],
        "network": [r for r in records if r.get("kind") == "network"],
        "peak_rss_kb": peak_rss_kb(),
        "uid": os.getuid(),
    }


if __name__ == "__main__":
    print(json.dumps(trio.run(main, json.loads(sys.stdin.read()))))
