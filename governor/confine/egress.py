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

- What failed is not refused: a name that does not resolve, and an allowed
  connection the host refused or did not answer (the proxy tells the judge:
  `ConnectionAnswer.connected`), are recorded with ``failed`` (`FAILURES`), so
  that the tally counts them apart from the policy's refusals.
- The model API (`model_api_hosts`: the base URL's host when one is set, else
  the preset's ``api_hosts``) that cannot be reached ends the attempt
  (`ModelApiReach`): at its first failure when no connection to it was ever
  made, or at the `IN_A_ROW`-th failure in a row after one was. An agent
  retries its API for minutes (Claude Code: 57 times in 120 s, printing
  nothing) while the governor knows the answer from the first failure.

The judge asks only for what it uses of whoever records and answers (`Recorder`:
the policy, `ruled` and `fail`), which `governor.gate.gatekeeper.Gate` satisfies:
this room sits below the gate's, so it names a protocol rather than the gate.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Final, Protocol
from urllib.parse import urlsplit

from governor.acp.dispatch import RpcError
from governor.agents.presets import Preset, presets
from governor.policies import by as who
from governor.policies.actions import Connect
from governor.policies.decide import Decision, decide_network
from governor.policies.network import HostPattern, NetworkRules, normalize_host, parse_pattern
from governor.policies.rules import Verdict
from governor.sandbox.net.judge import (
    CONNECT_FAILURES,
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
        detail: dict[str, Any], *, overrules: Any = None,
    ) -> Ruled: ...

    def fail(self, why: str) -> None:
        """End the attempt failed, naming `why`; refuse everything from now on."""

    @property
    def cancelled(self) -> bool:
        """Whether the turn is over (or cancelled)."""


def base_url_variables(preset: Preset | None) -> tuple[str, ...]:
    """The variables whose URL names the agent's API host."""
    if preset is not None:
        return preset.base_url_env
    return tuple(dict.fromkeys(v for p in presets().values() for v in p.base_url_env))


def agent_hosts(preset: Preset | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """The ``host:port`` patterns the agent's sandbox may reach for its model API."""
    hosts = list(preset.api_hosts if preset is not None else ())
    return tuple(dict.fromkeys([*hosts, *_base_url_hosts(preset, env)]))


def model_api_hosts(preset: Preset | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """Where the agent's model calls go: the host of its base URL when one is
    set (the preset's own hosts are then at most a side channel: an agent
    told to use a gateway that also pings ``api.anthropic.com`` must not end
    because that does not resolve), else its preset's ``api_hosts``."""
    return _base_url_hosts(preset, env) or tuple(preset.api_hosts if preset is not None else ())


def _base_url_hosts(preset: Preset | None, env: Mapping[str, str]) -> tuple[str, ...]:
    hosts: list[str] = []
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
        return Decision(Verdict.DENY, "network.dns", reason, who.PROTOCOL, failed="dns"), ()
    return decide_network(_action(request, addresses), policy), addresses


IN_A_ROW: Final = 3
"""Failures in a row that end an attempt whose model API was reached before."""


@dataclass(slots=True)
class ModelApiReach:
    """Whether the model API can be reached, from what came of the agent's
    connections to it: the first failure ends the attempt when none was ever
    made (nothing suggests the next will do better, and the agent would retry
    to the wall limit); once one was, `IN_A_ROW` failures in a row do (a
    reachable API that stops answering)."""

    hosts: tuple[HostPattern, ...]
    made: int = 0
    failures: int = 0

    @classmethod
    def of(cls, hosts: tuple[str, ...]) -> ModelApiReach:
        """The reach of the API at ``hosts`` (``host:port`` patterns)."""
        return cls(tuple(parse_pattern(h) for h in hosts))

    def covers(self, request: ConnectionRequest) -> bool:
        """Whether ``request`` is the agent's, to its model API."""
        if request.origin != "agent" or request.problem is not None:
            return False
        host = normalize_host(request.host)
        return any(p.matches(host, request.port) for p in self.hosts)

    def connected(self) -> None:
        """A connection to the API was made."""
        self.made += 1
        self.failures = 0

    def failed(self, where: str, what: str) -> str | None:
        """A connection to the API failed (``what``, in words): why the attempt
        ends, or None while it goes on."""
        self.failures += 1
        if self.made and self.failures < IN_A_ROW:
            return None
        tries = "at its first try" if not self.made else f"{self.failures} times in a row"
        return (
            f"the model API {where} cannot be reached: {what} ({tries}; no rule refused it: "
            "check the base URL, this machine's DNS and network)"
        )


def judge(
    gate: Recorder,
    refused: dict[str, tuple[str, str]] | None = None,
    model_api: tuple[str, ...] = (),
) -> Judge:
    """The proxy's judge for one attempt: decided by the engine under the
    gate's policy (the agent's hosts are in its network rules), recorded by the
    gate, then answered. A log that cannot be written refuses (fail closed).
    ``refused`` collects the agent's refused ``host:port`` with who refused and
    why (for the outcome's reason when it fails). ``model_api``: the agent's
    model API hosts (`model_api_hosts`), whose failures end the attempt
    (`ModelApiReach`)."""
    reach = ModelApiReach.of(model_api)

    def unreachable(request: ConnectionRequest, what: str) -> None:
        if gate.cancelled or not reach.covers(request):
            return  # a turn that is over is not failed by what fails after it
        if (why := reach.failed(shown(request), what)) is not None:
            gate.fail(why)

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
        if not ruling.allowed:
            if decision.failed is not None and ruling.by == decision.by:
                unreachable(request, "the host does not resolve")
            return ConnectionAnswer(False, ruling.reason)

        async def connected(failure: str | None) -> None:
            """What came of the allowed connection (the proxy's word)."""
            if failure is None:
                if reach.covers(request):
                    reach.connected()
                return
            what = CONNECT_FAILURES.get(failure, failure)
            failed = Decision(
                Verdict.DENY, "network.connect", f"{shown(request)}: {what}", who.PROTOCOL,
                failed=failure,
            )  # fmt: skip
            with contextlib.suppress(RpcError):  # a log that cannot be written has failed the gate
                await gate.ruled("network", record, shown(request), failed, {}, overrules=ruling)
            if refused is not None and agent and len(refused) < 64:
                refused.setdefault(shown(request), (who.PROTOCOL, failed.reason))
            unreachable(request, what)

        return ConnectionAnswer(True, ruling.reason, addresses, connected)

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
