"""The egress proxy against the host's direct path, measured in the same run.

    .venv/bin/python bench/proxy.py [--big-mb 200] [--small 1000] [--sse 50] [--concurrent 200]

A loopback HTTP server runs in a process of its own (``/big``, ``/small``,
``/sse``). The same curl script runs twice: on the host with no proxy
(direct), and inside an agent's sandbox (own network namespace, the real
proxy, the real judge over a `Gate` writing a real audit log: every request
is decided and recorded as in an attempt), and a third time on the host
through a bare hop (`HOP`: bytes copied both ways, nothing judged or
parsed), which shows what one more process on the path costs on this machine
whatever it does. Figures, each against direct (and the hop's beside it):

- a ``--big-mb`` download through the proxy (plain-HTTP forwarding, and a
  CONNECT tunnel) against direct: throughput ratio (target >= 0.7);
- ``--small`` small requests on one keep-alive connection (curl's URL glob):
  wall time ratio (target <= 2x), each one a decision and a record;
- time to the first byte of a streamed (SSE) response, median of ``--sse``
  requests: the proxy's extra milliseconds (target <= 1 ms);
- the proxy's peak memory with ``--concurrent`` tunnels open at once, each
  carrying a response: the RSS of this process (the proxy, the judge, the
  audit log; the server is elsewhere) before and at the peak.
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

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from governor.audit.log import AuditLog
from governor.confine.egress import egress_for, judge
from governor.gate.approver import Unattended
from governor.gate.gatekeeper import Gate
from governor.policies.capability import Capability
from governor.policies.network import NetworkRules, parse_pattern
from governor.policies.policy import Policy
from governor.sandbox.net.proxy import open_egress
from governor.sandbox.plan.profile import Profile
from governor.sandbox.run.agent import agent_process
from governor.sandbox.run.spawn import PIPE

SERVER = r"""
import http.server, socketserver, sys, time
CHUNK = b"x" * (1 << 20)
class H(http.server.BaseHTTPRequestHandler):
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if "://" in self.path:  # absolute form, from the bare hop
            self.path = "/" + self.path.split("/", 3)[3]
        if self.path.startswith("/big"):
            n = int(sys.argv[1]) << 20
            self.send_response(200); self.send_header("Content-Length", str(n)); self.end_headers()
            for _ in range(n >> 20):
                self.wfile.write(CHUNK)
        elif self.path.startswith("/sse"):
            self.send_response(200); self.send_header("Content-Type", "text/event-stream")
            self.send_header("Connection", "close"); self.end_headers()
            self.wfile.write(b"data: first\n\n"); self.wfile.flush()
            time.sleep(0.02); self.wfile.write(b"data: last\n\n"); self.close_connection = True
        else:
            body = b"ok\n"
            self.send_response(200); self.send_header("Content-Length", "3"); self.end_headers()
            self.wfile.write(body)
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    request_queue_size = 512
s = S(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


HOP = r"""
import socket, sys, threading
upstream = int(sys.argv[1])
listener = socket.create_server(("127.0.0.1", 0))
print(listener.getsockname()[1], flush=True)
def pump(a, b):
    try:
        while data := a.recv(1 << 20):
            b.sendall(data)
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass
while True:
    client, _ = listener.accept()
    server = socket.create_connection(("127.0.0.1", upstream))
    for s in (client, server):
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    threading.Thread(target=pump, args=(client, server), daemon=True).start()
    threading.Thread(target=pump, args=(server, client), daemon=True).start()
"""
"""The bare hop: a process that copies bytes both ways between the client and
the server (blocking threads; no parsing, no judge, no event loop). What an
extra process on the path costs on this machine whatever it does."""


def peak_rss_kb() -> int:
    """This process's peak RSS since its exec (``VmHWM``; ``ru_maxrss`` would
    include the parent's before the exec)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return 0


def script(port: int, big: int, small: int, sse: int) -> str:
    base = f"http://127.0.0.1:{port}"
    return f"""
set -e
curl -s -o /dev/null -w 'big_http=%{{time_total}}\\n' {base}/big
curl -s -o /dev/null --proxytunnel -w 'big_tunnel=%{{time_total}}\\n' {base}/big 2>/dev/null || echo big_tunnel=
start=$(date +%s%N)
curl -s -o /dev/null '{base}/small?[1-{small}]'
echo small=$(( ($(date +%s%N) - start) / 1000 ))
for i in $(seq {sse}); do curl -s -o /dev/null -w 'sse=%{{time_starttransfer}}\\n' {base}/sse; done
"""


def parse(out: str) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for line in out.splitlines():
        name, _, value = line.partition("=")
        if value:
            found.setdefault(name, []).append(float(value))
    return found


async def inside(port: int, text: str, root: Path, concurrent: int) -> tuple[str, dict[str, int], int]:
    rules = NetworkRules(enabled=True, agent=(parse_pattern(f"127.0.0.1:{port}"),))
    ws = root / "ws"
    ws.mkdir(exist_ok=True)
    policy = Policy(capability=Capability.EDIT_WORKSPACE, network_rules=rules).bind(str(ws))
    audit = AuditLog(root / "audit.jsonl", "bench-proxy")
    gate = Gate(policy, audit, Unattended())
    egress = egress_for(rules, "agent")
    rss: dict[str, int] = {}
    async with open_egress(judge(gate)) as proxy:

        async def attach(pid: int) -> None:
            await proxy.attach(pid, egress, "agent")

        async def run(line: str) -> str:
            profile = Profile.for_agent(
                Capability.EDIT_WORKSPACE, ws, home=root,
                env={"PATH": "/usr/local/bin:/usr/bin:/bin"}, network=False, egress=egress,
            )  # fmt: skip
            async with agent_process(profile, ["bash", "-c", line], stdin=None, stdout=PIPE,
                                     stderr=None, attach=attach) as child:  # fmt: skip
                assert child.stdout is not None
                out = bytearray()
                while data := await child.stdout.receive_some(65536):
                    out += data
                await child.wait()
            return out.decode()

        out = await run(text)
        rss["before"] = peak_rss_kb()
        held = f"""{"/usr/bin/python3"} - <<'EOF'
import socket, time
socks = []
for _ in range({concurrent}):
    s = socket.create_connection(("127.0.0.1", {egress.port}))
    s.sendall(b"CONNECT 127.0.0.1:{port} HTTP/1.1\\r\\nHost: 127.0.0.1:{port}\\r\\n\\r\\n")
    socks.append(s)
ok = 0
for s in socks:
    ok += s.recv(4096).startswith(b"HTTP/1.1 200")
    s.sendall(b"GET /small HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n")
for s in socks:
    s.recv(4096)
print("held=%d" % ok)
time.sleep(0.5)
EOF
"""
        out += await run(held)
        rss["peak"] = peak_rss_kb()
    audit.close()
    records = sum(1 for _ in (root / "audit.jsonl").open())
    return out, rss, records


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--big-mb", type=int, default=200)
    ap.add_argument("--small", type=int, default=1000)
    ap.add_argument("--sse", type=int, default=50)
    ap.add_argument("--concurrent", type=int, default=200)
    args = ap.parse_args()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(args.big_mb)], stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        text = script(port, args.big_mb, args.small, args.sse)
        env = {"PATH": "/usr/local/bin:/usr/bin:/bin"}
        direct = parse(subprocess.run(["bash", "-c", text], capture_output=True, text=True, env=env, check=True).stdout)
        hop = subprocess.Popen([sys.executable, "-c", HOP, str(port)], stdout=subprocess.PIPE, text=True)
        try:
            assert hop.stdout is not None
            via = {**env, "http_proxy": f"http://127.0.0.1:{int(hop.stdout.readline())}"}
            hopped = parse(subprocess.run(["bash", "-c", text], capture_output=True, text=True, env=via, check=True).stdout)
        finally:
            hop.kill()
            hop.wait()
        with tempfile.TemporaryDirectory(prefix="bench-proxy-") as tmp:
            out, rss, records = trio.run(inside, port, text, Path(tmp), args.concurrent)
        proxied = parse(out)
    finally:
        server.kill()
        server.wait()
    mb = args.big_mb
    rows = {
        "big_http_mb_s": (mb / direct["big_http"][0], mb / proxied["big_http"][0], mb / hopped["big_http"][0]),
        "small_total_ms": (direct["small"][0] / 1000, proxied["small"][0] / 1000, hopped["small"][0] / 1000),
        "sse_first_byte_ms_median": (
            statistics.median(direct["sse"]) * 1000,
            statistics.median(proxied["sse"]) * 1000,
            statistics.median(hopped["sse"]) * 1000,
        ),
    }
    if proxied.get("big_tunnel"):
        rows["big_tunnel_mb_s"] = (rows["big_http_mb_s"][0], mb / proxied["big_tunnel"][0], rows["big_http_mb_s"][2])
    print(f"{'figure':26} {'direct':>9} {'proxy':>9} {'bare hop':>9}  proxy/direct  hop/direct")
    for name, (d, p, h) in rows.items():
        print(f"{name:26} {d:9.2f} {p:9.2f} {h:9.2f}  {p / d:12.2f}  {h / d:10.2f}")
    first = rows["sse_first_byte_ms_median"]
    extra, hop_extra = first[1] - first[0], first[2] - first[0]
    print(f"SSE first byte: +{extra:.2f} ms through the proxy, +{hop_extra:.2f} through the bare hop (median of {args.sse})")
    held = int(proxied.get("held", [0])[0])
    print(
        f"proxy process RSS: {rss['before'] / 1024:.1f} MB before, {rss['peak'] / 1024:.1f} MB "
        f"at {held}/{args.concurrent} concurrent tunnels; {records} audit records written"
    )
    print(json.dumps({"rows": rows, "sse_extra_ms": extra, "hop_sse_extra_ms": hop_extra, "rss_kb": rss, "held": held,
                      "records": records, "pid": os.getpid(), "time": time.time()}))  # fmt: skip


if __name__ == "__main__":
    main()
