"""The governor's use of the egress proxy: what the agent may reach, and the judge.

- The agent's own hosts: its preset's ``api_hosts`` plus the ``host:port`` of
  each base-URL variable it is given (its preset's ``base_url_env``; for an
  argv of your own, every preset's), so that a company gateway or a loopback
  model stand-in is reached with no flag.
- The judge (`judge`): a proxy `governor.sandbox.net.judge.ConnectionRequest` becomes a
  `governor.policies.actions.Connect`, decided by the engine on its name first (a
  refused name is never looked up: the lookup alone would leak it to a DNS
  server), then, once allowed, again with the addresses the host's resolver
  gave for the name as the rules compared it (``127.0.0.1.`` is the literal
  ``127.0.0.1``, connected to as such: never a query for a spelling the
  rules did not see); the final decision goes through `Gate.ruled`
  (`Gate.govern`, awaited: approver, audit record of kind ``network``,
  written before the proxy answers).

The judge asks only for what it uses of whoever records and answers (`Recorder`:
the policy, and `ruled`), which `governor.gate.gatekeeper.Gate` satisfies: this
room sits below the gate's, so it names a protocol rather than the gate.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from governor.acp.dispatch import RpcError
from governor.agents.presets import Preset, presets
from governor.policies import by as who
from governor.policies.actions import Connect
from governor.policies.decide import Decision, decide_network
from governor.policies.network import NetworkRules, normalize_host
from governor.policies.rules import Verdict
from governor.sandbox.net.judge import (
    ConnectionAnswer,
    ConnectionRequest,
    Judge,
    literal_address,
    resolve,
)
from governor.sandbox.plan.egress import Egress

if TYPE_CHECKING:
    from governor.policies.policy import Policy


class Ruled(Protocol):
    """A connection's final word, as recorded (`governor.gate.ruling.Ruling`)."""

    @property
    def allowed(self) -> bool: ...
    @property
    def by(self) -> str: ...
    @property
    def reason(self) -> str: ...


class Recorder(Protocol):
    """What the judge needs of the gate: the attempt's policy, and a decision
    made final (approver, audit record) before the proxy answers."""

    @property
    def policy(self) -> Policy: ...

    async def ruled(
        self, kind: str, subject: dict[str, Any], shown: str, decision: Decision,
        detail: dict[str, Any],
    ) -> Ruled: ...


def base_url_variables(preset: Preset | None) -> tuple[str, ...]:
    """The variables whose URL names the agent's API host."""
    if preset is not None:
        return preset.base_url_env
    return tuple(dict.fromkeys(v for p in presets().values() for v in p.base_url_env))


def agent_hosts(preset: Preset | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """The ``host:port`` patterns the agent's sandbox may reach for its model API."""
    hosts = list(preset.api_hosts if preset is not None else ())
    for name in base_url_variables(preset):
        value = env.get(name, "")
        if not value:
            continue
        url = urlsplit(value if "://" in value else f"https://{value}")
        try:
            port = url.port or (80 if url.scheme == "http" else 443)
        except ValueError:
            continue
        if url.hostname:
            host = normalize_host(url.hostname)
            hosts.append(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    return tuple(dict.fromkeys(hosts))


def egress_for(rules: NetworkRules, origin: str) -> Egress:
    """Where the proxy listens inside a sandbox of ``origin``."""
    return Egress.plan(rules.loopback_forwards(origin))


def subject(request: ConnectionRequest) -> dict[str, Any]:
    """A network record's subject (what `governor audit` and replay read)."""
    out: dict[str, Any] = {"host": request.host, "port": request.port, "via": request.via}
    if request.method is not None:
        out["method"] = request.method
    if request.path is not None:
        out["path"] = request.path[:512]
    out["origin"] = request.origin
    if request.problem is not None:
        out["problem"] = request.problem
    return out


def shown(request: ConnectionRequest) -> str:
    """A connection as a person is asked about it and as a grant covers it: the
    host and port (a person's "always" allows the host for the rest of the
    attempt, whatever paths follow; method and path are in the subject)."""
    host = f"[{request.host}]" if ":" in request.host else request.host
    return f"{host}:{request.port}"[:300]


def _action(request: ConnectionRequest, addresses: tuple[str, ...]) -> Connect:
    return Connect(
        request.host,
        request.port,
        request.method,
        request.path,
        request.origin,
        addresses,
        request.problem,
    )


async def decide_connection(request: ConnectionRequest, policy: Policy) -> tuple[Decision, tuple[str, ...]]:
    """The engine's decision on one connection and the addresses it holds for:
    decided on the name first (a refused name is never looked up), then, once
    allowed, again with what the host's resolver gave for the name as the
    rules read it (an IP literal, however spelled, is its own address:
    decided once, never looked up). An ``ask`` is not looked up before the
    person answers (`looked_up` does it after)."""
    name = normalize_host(request.host)
    literal = literal_address(name)
    addresses: tuple[str, ...] = (literal,) if literal is not None else ()
    decision = decide_network(_action(request, addresses), policy)
    if decision.allowed and literal is None:
        return await looked_up(request, policy)
    return decision, addresses


async def looked_up(request: ConnectionRequest, policy: Policy) -> tuple[Decision, tuple[str, ...]]:
    """The decision on a name allowed on its own, with the addresses it
    resolves to (each judged again); a name that does not resolve is refused."""
    addresses = await resolve(normalize_host(request.host), request.port)
    if not addresses:
        reason = f"{shown(request)}: the host does not resolve"
        return Decision(Verdict.DENY, "network.dns", reason, who.PROTOCOL), ()
    return decide_network(_action(request, addresses), policy), addresses


def judge(gate: Recorder, refused: dict[str, tuple[str, str]] | None = None) -> Judge:
    """The proxy's judge for one attempt: decided by the engine under the
    gate's policy (the agent's hosts are in its network rules), recorded by the
    gate, then answered. A log that cannot be written refuses (fail closed).
    ``refused`` collects the agent's refused ``host:port`` with who refused and
    why (for the outcome's reason when it fails)."""

    async def ask(request: ConnectionRequest) -> ConnectionAnswer:
        policy = _policy_of(gate.policy, request.origin)
        decision, addresses = await decide_connection(request, policy)
        record = subject(request)
        if addresses:
            record["addresses"] = list(addresses[:8])
        try:
            ruling = await gate.ruled("network", record, shown(request), decision, {})
        except RpcError as e:
            return ConnectionAnswer(False, str(e))
        if ruling.allowed and not addresses:
            # allowed by a person (or a grant) before any lookup: the name is
            # looked up now, and its addresses judged as for any allowed name
            decision, addresses = await looked_up(request, policy)
            if decision.verdict is Verdict.DENY:
                record = {**subject(request), "addresses": list(addresses[:8])}
                try:
                    ruling = await gate.ruled("network", record, shown(request), decision, {})
                except RpcError as e:
                    return ConnectionAnswer(False, str(e))
        agent = request.origin == "agent" and request.problem is None
        if not ruling.allowed and refused is not None and agent and len(refused) < 64:
            host = f"[{request.host}]" if ":" in request.host else request.host
            refused.setdefault(f"{host}:{request.port}", (ruling.by, ruling.reason))
        return ConnectionAnswer(ruling.allowed, ruling.reason, addresses if ruling.allowed else ())

    return ask


def _policy_of(policy: Policy, origin: str) -> Policy:
    """The policy a connection is judged under: an MCP server's (origin
    ``mcp:NAME``) reaches only its own hosts (a stdio server's ``network``, an
    HTTP server's URL, reached by the governor), whatever the commands'
    network says."""
    if not origin.startswith("mcp:"):
        return policy
    server = policy.mcp.server(origin.removeprefix("mcp:"))
    hosts = server.hosts if server is not None else ()
    return replace(policy, network_rules=NetworkRules(enabled=bool(hosts), allow=hosts))
