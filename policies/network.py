"""Network rules: which host:port a sandboxed process may reach through the proxy.

Everything that decides a connection lives here (`decide_connect`, called by
`governor.policies.decide.decide` for a `Connect`), pure and fast. The rules of this
file:

1. A subject is a host and a port; an IP literal is judged as the IP, a name
   as the name first (a lookup of a refused name would already leak it to a
   DNS server), then, once allowed, again with every address it resolved to.
   A host is compared as `normalize_host` writes it (``127.0.0.1.`` is
   ``127.0.0.1``), and that spelling is what is resolved or connected to:
   the name a rule matched is the name that reaches the resolver.
2. Patterns: ``host``, ``*.suffix`` (subdomains only, not the suffix itself),
   an IP literal (``[::1]`` for IPv6), each with ``:port``, or without a port
   meaning 443 and 80 (the web's ports, nothing else).
3. Special hosts -- loopback, link-local (``169.254.0.0/16``, ``fe80::/10``:
   cloud metadata), private and other non-global ranges, ``localhost`` and the
   metadata names -- are refused unless a rule names them **exactly**, host
   and port; a wildcard or a port-less rule never reaches them. A name that
   an allowed rule matches, exactly or not, but that resolves to such an
   address (DNS rebinding, a ``*.corp`` wildcard, a hostile resolver) is
   refused the same way unless a rule names that address exactly too; only
   a special name named exactly (``localhost:8080``) keeps the addresses it
   resolves to, since naming it was naming them. An address a deny rule
   covers is refused whatever name led to it.
4. deny > ask > allow > refused. For the agent, its own hosts (its preset's
   model API, its base-URL variable) are allow rules too; a command is
   refused everything when the policy has network off.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from governor.policies import by as who
from governor.policies.actions import Connect
from governor.policies.rules import Verdict

WEB_PORTS: Final = (443, 80)
"""The ports a rule without a port allows."""

METADATA_NAMES: Final = frozenset(
    {
        "metadata",
        "metadata.google.internal",
        "metadata.goog",
        "metadata.azure.com",
        "instance-data",
        "instance-data.ec2.internal",
        "localhost",
    }
)
"""Names refused unless a rule names them exactly (cloud metadata services,
and ``localhost``, which is the host's loopback)."""


class HostPatternError(ValueError):
    """A host pattern that cannot be parsed; the message names it."""


@dataclass(frozen=True, slots=True)
class HostPattern:
    """One ``host[:port]`` rule, as written and parsed."""

    text: str
    host: str
    """Lower case, no trailing dot; ``*.suffix`` for a wildcard; an IP as written
    by `ipaddress` (compressed)."""
    port: int | None

    @property
    def wildcard(self) -> bool:
        return self.host.startswith("*.")

    def matches(self, host: str, port: int) -> bool:
        """Whether this rule covers ``host:port`` (``host`` normalized)."""
        if self.port is None:
            if port not in WEB_PORTS:
                return False
        elif self.port != port:
            return False
        if self.wildcard:
            return host.endswith(self.host[1:]) and host != self.host[2:]
        return host == self.host

    def exact(self, host: str, port: int) -> bool:
        """Whether this rule names ``host:port`` exactly (no wildcard, a port)."""
        return not self.wildcard and self.port == port and self.host == host


@functools.lru_cache(maxsize=4096)  # every request asks again for the same few hosts
def normalize_host(host: str) -> str:
    """A host as rules compare it: lower case, no trailing dot, no IPv6
    brackets, an IP literal in its canonical form (an IPv4-mapped IPv6 one as
    the IPv4 address)."""
    host = host.strip().lower().rstrip(".")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)  # the same IPv4 host, judged as such
    return str(ip)


def parse_hostport(text: str, *, default_port: int | None = None) -> tuple[str, int | None]:
    """``host``, ``host:port``, ``[v6]``, ``[v6]:port`` or a bare IPv6 -> (host, port)."""
    text = text.strip()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise HostPatternError(f"{text!r}: an IPv6 address opened with '[' is not closed")
        host, rest = text[1:end], text[end + 1 :]
        if rest and not rest.startswith(":"):
            raise HostPatternError(f"{text!r}: expected ':port' after ']'")
        port_text = rest[1:] if rest else None
    elif text.count(":") > 1:
        host, port_text = text, None  # a bare IPv6 address
    elif ":" in text:
        host, port_text = text.rsplit(":", 1)
    else:
        host, port_text = text, None
    port = default_port
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) < 65536:
            raise HostPatternError(f"{text!r}: the port must be a number from 1 to 65535")
        port = int(port_text)
    return host, port


def parse_pattern(text: str) -> HostPattern:
    """A rule from ``host[:port]`` (``*.suffix`` allowed); `HostPatternError` if bad."""
    if not isinstance(text, str) or not text.strip():
        raise HostPatternError("an empty host pattern matches nothing")
    host, port = parse_hostport(text)
    name = normalize_host(host)
    bare = name[2:] if name.startswith("*.") else name
    if not bare or "*" in bare or any(c in bare for c in "/@ \t?#"):
        raise HostPatternError(
            f"{text!r} is not a host pattern (host, *.domain or an IP, optionally :port)"
        )
    return HostPattern(text, name, port)


@functools.lru_cache(maxsize=4096)  # as normalize_host: pure, and asked per request
def special(host: str) -> str | None:
    """Why ``host`` (normalized) is special (refused unless named exactly), or None."""
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        if host in METADATA_NAMES or host.endswith(".localhost"):
            return "a metadata or loopback name"
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    if ip.is_loopback:
        return "a loopback address"
    if ip.is_link_local:
        return "a link-local address (cloud metadata lives there)"
    if ip.is_private or not ip.is_global:
        return "a private or non-global address"
    return None


@dataclass(frozen=True, slots=True)
class NetworkRules:
    """A policy's ``[network]`` table, and the agent's own hosts.

    ``enabled`` is whether commands may use the network at all (the policy's
    ``network``); ``agent`` holds the hosts the governor adds for the agent
    process (its model API), never read from a policy file.
    """

    enabled: bool = False
    allow: tuple[HostPattern, ...] = ()
    ask: tuple[HostPattern, ...] = ()
    deny: tuple[HostPattern, ...] = ()
    agent: tuple[HostPattern, ...] = ()

    def with_agent(self, hosts: Sequence[str]) -> NetworkRules:
        """These rules with ``hosts`` allowed to the agent."""
        extra = tuple(parse_pattern(h) for h in hosts)
        return NetworkRules(self.enabled, self.allow, self.ask, self.deny, self.agent + extra)

    def with_allowed(self, hosts: Sequence[str], *, enable: bool = False) -> NetworkRules:
        """These rules with ``hosts`` allowed (``--allow-host``); ``enable``
        turns network on for commands too."""
        extra = tuple(parse_pattern(h) for h in hosts)
        on = self.enabled or enable
        return NetworkRules(on, self.allow + extra, self.ask, self.deny, self.agent)

    def loopback_forwards(self, origin: str) -> tuple[tuple[str, int], ...]:
        """The loopback ``(host, port)`` pairs that an exact allow rule names for
        ``origin``: each is forwarded into the sandbox at the same address."""
        patterns = [*self.allow, *(self.agent if origin == "agent" else ())]
        if origin != "agent" and not self.enabled:
            return ()
        out: list[tuple[str, int]] = []
        for p in patterns:
            if p.port is None or p.wildcard:
                continue
            if p.host == "localhost" or special(p.host) == "a loopback address":
                out.append((p.host, p.port))
        return tuple(dict.fromkeys(out))

    @property
    def patterns(self) -> tuple[str, ...]:
        """Every allow and ask pattern as written (what a ceiling bounds)."""
        return tuple(p.text for p in (*self.allow, *self.ask))


@dataclass(frozen=True, slots=True)
class ConnectDecision:
    """`decide_connect`'s answer before it becomes a `governor.policies.decide.Decision`."""

    verdict: Verdict
    rule: str
    reason: str
    by: str
    """What decided (`governor.policies.by`): ``rule``, ``protected`` (a special address),
    ``protocol`` (a request the proxy cannot carry out) or ``capability`` (no rule
    allows it)."""


def _first(patterns: Sequence[HostPattern], host: str, port: int) -> HostPattern | None:
    for pattern in patterns:
        if pattern.matches(host, port):
            return pattern
    return None


def _refused_address(
    addresses: Sequence[str],
    host: str,
    port: int,
    why_special: str | None,
    rules: NetworkRules,
    tiers: Sequence[tuple[Verdict, str, tuple[HostPattern, ...]]],
) -> tuple[str, str, str] | None:
    """The first address of ``host`` that refuses the connection, why, and what
    decided: one a deny rule covers (``rule``), or a special one no rule names
    exactly (rule 3: ``protected``)."""
    for address in addresses:
        ip = normalize_host(address)
        if ip == host:
            continue  # an IP literal is its own address, judged as the host
        denied = _first(rules.deny, ip, port)
        if denied is not None:
            return address, f"which {denied.text} refuses", who.RULE
        why = special(ip)
        if why is None or why_special is not None:
            continue
        named = any(
            p.exact(ip, port)
            for verdict, _, patterns in tiers
            if verdict is not Verdict.DENY
            for p in patterns
        )
        if not named:
            shown = f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"
            return address, (
                f"{why}: only a rule naming it exactly allows that (--allow-host {shown})"
            ), who.PROTECTED
    return None


def decide_connect(action: Connect, rules: NetworkRules) -> ConnectDecision:
    """The verdict on one connection (see the module docstring for the order)."""
    host = normalize_host(action.host)
    port = action.port
    shown = f"{host}:{port}" if ":" not in host else f"[{host}]:{port}"
    if action.problem is not None:
        return ConnectDecision(
            Verdict.DENY, "network.proxy", f"{shown}: {action.problem}", who.PROTOCOL
        )
    if not 0 < port < 65536:
        return ConnectDecision(
            Verdict.DENY, "network.proxy", f"port {port} is not a port", who.PROTOCOL
        )
    tiers: list[tuple[Verdict, str, tuple[HostPattern, ...]]] = [
        (Verdict.DENY, "network.deny", rules.deny),
        (Verdict.ASK, "network.ask", rules.ask),
        (Verdict.ALLOW, "network.allow", rules.allow),
    ]
    if action.origin == "agent":
        tiers.append((Verdict.ALLOW, "network.agent", rules.agent))
    elif not rules.enabled:
        return ConnectDecision(
            Verdict.DENY,
            "network.off",
            f"{shown}: network is off for commands (the policy's network, or --allow-host)",
            who.CAPABILITY,
        )
    why_special = special(host)
    for verdict, name, patterns in tiers:
        hit = _first(patterns, host, port)
        if hit is None:
            continue
        if verdict is not Verdict.DENY and why_special is not None and not hit.exact(host, port):
            continue  # only an exact rule reaches a special host
        if verdict is not Verdict.DENY:
            refused = _refused_address(action.addresses, host, port, why_special, rules, tiers)
            if refused is not None:
                address, why, by = refused
                return ConnectDecision(
                    Verdict.DENY,
                    f"{name}: {hit.text}",
                    f"{shown} resolves to {address}, {why}",
                    by,
                )
        words = {Verdict.DENY: "refused", Verdict.ASK: "asks", Verdict.ALLOW: "allowed"}
        return ConnectDecision(
            verdict, f"{name}: {hit.text}", f"{shown} {words[verdict]} by {hit.text}", who.RULE
        )
    if why_special is not None:
        return ConnectDecision(
            Verdict.DENY,
            "network.special",
            f"{shown} is {why_special}: refused unless a rule names it exactly "
            f"(--allow-host {shown})",
            who.PROTECTED,
        )
    return ConnectDecision(
        Verdict.DENY,
        "network.default",
        f"{shown} is not in the allowed hosts (--allow-host {shown} would allow it)",
        who.CAPABILITY,
    )
