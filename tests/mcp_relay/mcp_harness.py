"""The real MCP servers `.ci/mcp-servers` installs, and the relay driven as an agent drives it.

The servers live in ``<agents folder>/mcp-servers`` (PyPI ones in a venv of
their own, npm ones in an npm prefix of their own). Missing, a test skips on a
developer's machine (run ``.ci/mcp-servers`` once) and fails under CI.

`governed` opens what an attempt opens for its MCP servers -- the audit log,
the gate, the egress proxy and the relay -- and `client` connects to a relayed
server the way an agent does: the official SDK's stdio client spawning the
shim command the agent is given in ``session/new``.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from governor.audit.log import AuditLog
from governor.audit.verify import read_lines, verify
from governor.boundary.secrets import Masker
from governor.confine import egress as network
from governor.gate.approver import Unattended
from governor.gate.gatekeeper import Gate
from governor.mcp.relay import McpRelay, open_relay
from governor.mcp.servers import secrets
from governor.policies.policy import Policy, parse_policy
from governor.sandbox.net.proxy import open_egress

REPO = Path(__file__).resolve().parents[2]
AGENTS = Path(os.environ.get("ACP_GOVERNOR_NPM_AGENTS") or REPO / ".npm-agents")
SERVERS = AGENTS / "mcp-servers"
PYTHON_BIN = SERVERS / "python" / "bin"
NODE_MODULES = SERVERS / "node_modules"


def need(path: Path) -> str:
    """``path`` as a string; skip (or fail under CI) when it is not installed."""
    problem = None
    if not path.exists():
        problem = f"{path} is not installed (run .ci/mcp-servers)"
    elif path.suffix == ".js" and shutil.which("node") is None:
        problem = "node is not on PATH"
    if problem is not None:
        if os.environ.get("CI"):
            pytest.fail(f"CI must install the real MCP servers: {problem}", pytrace=False)
        pytest.skip(problem)
    return str(path)


def python_server(program: str) -> str:
    """A PyPI server's program."""
    return need(PYTHON_BIN / program)


def npm_server(package: str, entry: str = "dist/index.js") -> list[str]:
    """``[node, entry point]`` of an npm server."""
    path = need(NODE_MODULES / "@modelcontextprotocol" / package / entry)
    node = shutil.which("node")
    assert node is not None
    return [node, path]


# server-everything listens on every interface (``app.listen(PORT)``): this
# preload keeps it on loopback, the only place a test wants it
LOOPBACK_ONLY = """
import net from "node:net";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (port, ...rest) {
  if (typeof port === "number" || typeof port === "string") {
    return listen.call(this, Number(port), "127.0.0.1", ...rest.filter((a) => typeof a === "function"));
  }
  return listen.call(this, port, ...rest);
};
"""


def free_port() -> int:
    """A loopback port nothing listens on (now)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def everything_http(folder: Path) -> Iterator[str]:
    """``@modelcontextprotocol/server-everything`` in its ``streamableHttp`` mode
    on a loopback port (``PORT``, its package's start script): its URL."""
    node, entry = npm_server("server-everything")
    preload = folder / "loopback.mjs"
    preload.write_text(LOOPBACK_ONLY)
    port = free_port()
    proc = subprocess.Popen(
        [node, "--import", preload.as_uri(), entry, "streamableHttp"],
        env={**os.environ, "PORT": str(port)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    said = []
    for line in proc.stderr:  # it says so once listening (or why not, and exits)
        said.append(line)
        if "listening on port" in line:
            break
    else:
        proc.wait(timeout=30)
        pytest.fail(f"server-everything did not start: {''.join(said)}")
    # the rest of its stderr (a line per request) drained, never blocking it
    drain = subprocess.Popen(["cat"], stdin=proc.stderr, stdout=subprocess.DEVNULL)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        drain.wait(timeout=30)
        proc.stderr.close()


@dataclass
class Governed:
    """One relay under way, with what it writes into."""

    relay: McpRelay
    gate: Gate
    log: Path
    events: list[tuple[str, dict[str, object]]]

    def records(self, kind: str = "mcp") -> list[dict[str, object]]:
        """The log's records of ``kind``, as written."""
        import json

        return [r for r in map(json.loads, self.log.read_text().splitlines()) if r.get("kind") == kind]

    def verified(self) -> bool:
        """Whether the log's hash chain holds, once ended."""
        self.gate.audit.record("attempt-end", status="completed")
        self.gate.audit.close()
        checked = verify(read_lines(self.log))
        return checked.problem is None and checked.records > 0


def bound(text: str, workspace: Path) -> Policy:
    """A policy file's text bound to ``workspace``."""
    return parse_policy(text, "job.toml").bind(str(workspace))


@asynccontextmanager
async def governed(
    policy: Policy,
    log: Path,
    *,
    listener: Callable[[str, dict[str, Any]], None] | None = None,
    approver: Any = None,
    attempt: str = "att",
) -> AsyncIterator[Governed]:
    """The audit log, gate, egress proxy and relay of ``policy``'s servers;
    every event kept, and also given to ``listener`` (an OTel trace); asks go to
    ``approver`` (default: unattended). The log is masked as an attempt's is
    (`governor.job.spec`: the environment's secrets, the servers' given values and
    header values)."""
    events: list[tuple[str, dict[str, object]]] = []
    environ = dict(os.environ)
    audit = AuditLog(log, attempt, masker=Masker.from_environ(environ, secrets(policy.mcp, environ)))
    # where a chain starts, naming the roots (as replay reads them)
    audit.record("attempt-start", agent="mcp-test", workspace=policy.workspace, roots=list(policy.roots))

    def on_event(kind: str, info: dict[str, Any]) -> None:
        events.append((kind, info))
        if listener is not None:
            listener(kind, info)

    gate = Gate(policy, audit, approver or Unattended(), on_event=on_event)
    async with (
        open_egress(network.judge(gate)) as proxy,
        open_relay(gate, policy, environ, lambda: proxy) as relay,
    ):
        assert relay is not None
        yield Governed(relay, gate, log, events)


async def connect(governed: Governed, path: str) -> Any:
    """A raw connection to one of the relay's sockets, as the shim makes it:
    the attempt's token said first (`governor.mcp.relay.McpRelay.admitted`)."""
    import trio

    from governor.mcp.relay import TOKEN_PREFIX

    stream = await trio.open_unix_socket(path)
    await stream.send_all(TOKEN_PREFIX + governed.relay.token.encode() + b"\n")
    return stream


@asynccontextmanager
async def client(governed: Governed, name: str, **options: Any) -> AsyncIterator[ClientSession]:
    """An initialized SDK client session with the relayed server ``name``,
    spawned from the entry the agent would get in ``session/new``."""
    entry = next(e for e in governed.relay.entries() if e["name"] == name)
    params = StdioServerParameters(
        command=str(entry["command"]),
        args=[str(a) for a in entry["args"]],  # type: ignore[union-attr]
        env={str(v["name"]): str(v["value"]) for v in entry["env"]},  # type: ignore[union-attr,index]
    )
    async with stdio_client(params) as (read, write), ClientSession(read, write, **options) as session:
        await session.initialize()
        yield session
