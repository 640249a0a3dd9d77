"""The proxy terminating TLS for a model host (the key swapped in, each call
read and recorded) against the plain CONNECT tunnel, measured in the same run.

    .venv/bin/python bench/proxy_terminated.py [--sse 50] [--big-mb 100] [--small 300]

An HTTPS origin (a certificate of a bench CA) runs in a process of its own:
``/sse`` streams an Anthropic Messages event stream (60 events), ``/big`` a
``--big-mb`` body, ``/small`` a short JSON answer. The proxy runs here, its
judge over a real `Gate` writing a real audit log, once without an
interception (every host a tunnel: curl trusts the bench CA and speaks TLS to
the origin itself) and once with the origin's host bound to a credential
(terminated: curl trusts the attempt's CA, the proxy speaks TLS to the origin,
puts the key in, reads each response's usage and records a ``model`` record).
The same curl commands both times; figures are the terminated path against
the tunnel:

- time to the first byte of the SSE response, median of ``--sse`` requests
  (each a new connection: the terminated path pays a second handshake);
  target: within 5 ms of the tunnel's;
- a ``--big-mb`` download: throughput ratio, target >= 0.9;
- ``--small`` requests on one keep-alive connection: wall time ratio, and the
  per-request cost of the swap and the record (no target set).
"""

from __future__ import annotations

import argparse
import datetime
import ipaddress
import json
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import trio
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from governor.audit.log import AuditLog
from governor.confine.egress import judge
from governor.gate.approver import Unattended
from governor.gate.gatekeeper import Gate
from governor.gate.model_calls import ModelCalls
from governor.policies.capability import Capability
from governor.policies.network import NetworkRules, parse_pattern
from governor.policies.policy import Policy
from governor.sandbox.net.credentials import Binding, Credential, Credentials, placeholder_for
from governor.sandbox.net.proxy import open_egress
from governor.sandbox.net.terminate import Interception
from governor.sandbox.net.tls import AttemptCA, upstream_context

SERVER = r"""
import http.server, json, socketserver, ssl, sys
cert, key, big = sys.argv[1], sys.argv[2], int(sys.argv[3])
CHUNK = b"x" * (1 << 20)
start = {"type": "message_start", "message": {"model": "bench-1", "usage": {"input_tokens": 10, "output_tokens": 1}}}
delta = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "word " * 8}}
end = {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 500}}
EVENTS = [("message_start", start)] + [("content_block_delta", delta)] * 58 + [("message_delta", end)]
SSE = b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in EVENTS)
SMALL = json.dumps({"model": "bench-1", "usage": {"input_tokens": 3, "output_tokens": 2}}).encode()
class H(http.server.BaseHTTPRequestHandler):
    disable_nagle_algorithm = True
    protocol_version = "HTTP/1.1"
    def log_message(self, *a): pass
    def do_GET(self):
        if self.path.startswith("/sse"):
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(SSE)))
            self.end_headers()
            self.wfile.write(SSE[:200]); self.wfile.flush(); self.wfile.write(SSE[200:])
        elif self.path.startswith("/big"):
            self.send_response(200)
            self.send_header("Content-Length", str(big << 20))
            self.end_headers()
            for _ in range(big):
                self.wfile.write(CHUNK)
        else:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(SMALL)))
            self.end_headers()
            self.wfile.write(SMALL)
class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
s = S(("127.0.0.1", 0), H)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER); ctx.load_cert_chain(cert, key)
s.socket = ctx.wrap_socket(s.socket, server_side=True)
print(s.server_address[1], flush=True)
s.serve_forever()
"""


def leaf_files(ca: AttemptCA, folder: Path) -> tuple[Path, Path]:
    """The origin's certificate chain and key as files (a bench process's own)."""
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(x509.NameOID.COMMON_NAME, "origin")]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .sign(ca.key, hashes.SHA256())
    )
    cert_file, key_file = folder / "origin.pem", folder / "origin.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM) + ca.cert_pem)
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def curl(proxy: int, cacert: Path, urls: list[str], fmt: str) -> list[str]:
    out = subprocess.run(
        ["curl", "-s", "-o", "/dev/null", "--proxy", f"http://127.0.0.1:{proxy}",
         "--cacert", str(cacert), "-H", "x-api-key: PLACEHOLDER", "-w", fmt + "\n", *urls],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.split()


async def measure(args: argparse.Namespace, terminated: bool, folder: Path, origin: int,
                  bench_ca: Path, ca: AttemptCA, trusted: Path) -> dict[str, float]:  # fmt: skip
    rules = NetworkRules(enabled=True, agent=(parse_pattern(f"127.0.0.1:{origin}"),))
    ws = folder / "ws"
    ws.mkdir(exist_ok=True)
    policy = Policy(capability=Capability.EDIT_WORKSPACE, network_rules=rules).bind(str(ws))
    audit = AuditLog(folder / f"audit-{terminated}.jsonl", "bench-terminated")
    calls = ModelCalls(audit)
    interception = None
    if terminated:
        key = "sk-ant-api03-" + "k" * 80
        held = Credential("ANTHROPIC_API_KEY", key, placeholder_for(key), (Binding("127.0.0.1", origin),))
        interception = Interception(Credentials([held]), ca, upstream_context(str(bench_ca)), calls.record)
    async with open_egress(judge(Gate(policy, audit, Unattended())), None, interception) as proxy:
        listener = socket.create_server(("127.0.0.1", 0))
        port = listener.getsockname()[1]
        proxy.serve(listener, "agent")
        base = f"https://127.0.0.1:{origin}"

        def run(urls: list[str], fmt: str) -> list[str]:
            return curl(port, trusted, urls, fmt)

        firsts = []
        for _ in range(args.sse):
            (first,) = await trio.to_thread.run_sync(run, [f"{base}/sse"], "%{time_starttransfer}")
            firsts.append(float(first))
        (speed,) = await trio.to_thread.run_sync(run, [f"{base}/big"], "%{speed_download}")
        smalls = await trio.to_thread.run_sync(
            run, [f"{base}/small[1-{args.small}]"], "%{time_total}"
        )
    audit.close()
    return {
        "sse_first_byte_ms": statistics.median(firsts) * 1000,
        "big_mb_s": float(speed) / (1 << 20),
        "small_total_ms": sum(float(t) for t in smalls) * 1000,
        "model_records": calls.calls,
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sse", type=int, default=50)
    parser.add_argument("--big-mb", type=int, default=100)
    parser.add_argument("--small", type=int, default=300)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=str(Path.cwd())) as tmp:
        folder = Path(tmp)
        bench_ca = AttemptCA.make("bench origin CA")
        (folder / "bench-ca.pem").write_bytes(bench_ca.cert_pem)
        cert, key = leaf_files(bench_ca, folder)
        server = subprocess.Popen(
            [sys.executable, "-c", SERVER, str(cert), str(key), str(args.big_mb)],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        try:
            assert server.stdout is not None
            origin = int(server.stdout.readline())
            ca = AttemptCA.make("bench attempt")
            (folder / "attempt-ca.pem").write_bytes(ca.cert_pem)
            tunnel = await measure(args, False, folder, origin, folder / "bench-ca.pem", ca,
                                   folder / "bench-ca.pem")  # fmt: skip
            ended = await measure(args, True, folder, origin, folder / "bench-ca.pem", ca,
                                  folder / "attempt-ca.pem")  # fmt: skip
        finally:
            server.kill()
            server.wait()
    per_request_us = (ended["small_total_ms"] - tunnel["small_total_ms"]) / args.small * 1000
    result = {
        "tunnel": tunnel,
        "terminated": ended,
        "sse_first_byte_extra_ms": round(ended["sse_first_byte_ms"] - tunnel["sse_first_byte_ms"], 2),
        "throughput_ratio": round(ended["big_mb_s"] / tunnel["big_mb_s"], 3),
        "small_ratio": round(ended["small_total_ms"] / tunnel["small_total_ms"], 3),
        "per_request_extra_us": round(per_request_us, 1),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    trio.run(main)
