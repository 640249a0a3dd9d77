"""What the egress proxy asks its judge, and what it is told.

The proxy decides nothing itself: each connection (or plain-HTTP request) is
a `ConnectionRequest` handed to a `Judge` (the attempt's gate, or `governor
sandbox`'s), whose `ConnectionAnswer` names the addresses to connect to, so
that no second lookup can move the connection between the check and the
connect.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import trio


@dataclass(frozen=True, slots=True)
class ProxyLimits:
    """The proxy's bounds (see rule 3 of the module docstring)."""

    head_bytes: int = 64 * 1024
    head_timeout: float = 20.0
    idle_timeout: float = 600.0
    connect_timeout: float = 15.0
    connections: int = 256
    chunk: int = 1024 * 1024


@dataclass(frozen=True, slots=True)
class ConnectionRequest:
    """One connection (or one plain-HTTP request) to judge.

    ``via``: ``connect`` (a CONNECT tunnel), ``http`` (a forwarded request),
    ``forward`` (a loopback port forwarded as is). ``problem`` is set when the
    proxy refuses it whatever the rules (the judge records it as refused)."""

    host: str
    port: int
    method: str | None = None
    path: str | None = None
    via: str = "connect"
    origin: str = "command"
    problem: str | None = None


@dataclass(frozen=True, slots=True)
class ConnectionAnswer:
    """The judge's word: allowed or not, why, and where to connect."""

    allowed: bool
    reason: str
    addresses: tuple[str, ...] = ()


Judge = Callable[[ConnectionRequest], Awaitable[ConnectionAnswer]]


@functools.lru_cache(maxsize=4096)  # asked for every request; pure
def literal_address(host: str) -> str | None:
    """``host`` as an address if it is an IP literal (``[v6]`` too), else None."""
    try:
        return str(ipaddress.ip_address(host.strip("[]")))
    except ValueError:
        return None


async def resolve(host: str, port: int) -> tuple[str, ...]:
    """The addresses of ``host`` (the host's resolver), an IP literal as itself;
    empty when it does not resolve."""
    literal = literal_address(host)
    if literal is not None:
        return (literal,)
    try:
        infos = await trio.socket.getaddrinfo(host, port, type=trio.socket.SOCK_STREAM)
    except OSError:
        return ()
    return tuple(dict.fromkeys(str(info[4][0]) for info in infos))
