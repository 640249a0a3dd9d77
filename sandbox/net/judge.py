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
from dataclasses import dataclass, replace
from typing import Final

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
    """The judge's word: allowed or not, why, and where to connect.

    ``connected``, when given, is told what came of an allowed connection:
    None once it is made, else the `CONNECT_FAILURES` word of why it could not
    be (the judge records a failure; the governor's counts a model API that
    does not answer)."""

    allowed: bool
    reason: str
    addresses: tuple[str, ...] = ()
    connected: Callable[[str | None], Awaitable[None]] | None = None


CONNECT_FAILURES: Final = {
    "refused": "the host refused the connection",
    "timeout": "the host did not answer in time",
    "unreachable": "no route to the host",
}
"""What can come of connecting to an allowed host's addresses, when nothing does."""


Judge = Callable[[ConnectionRequest], Awaitable[ConnectionAnswer]]

HOST_CHARS = 253
"""The longest host name DNS can hold."""
METHOD_CHARS = 32


def bounded(request: ConnectionRequest) -> ConnectionRequest:
    """``request`` with what cannot be a real one refused by its length: a host
    over `HOST_CHARS` (or a method over `METHOD_CHARS`) becomes a problem that
    says how long it was, and only its start is kept, so that a 60 KB host is
    neither judged nor recorded (once, or three times over) at its length."""
    problem = request.problem
    host, method = request.host, request.method
    if len(host) > HOST_CHARS:
        problem = f"the host is {len(host)} characters long; DNS allows {HOST_CHARS}"
        host = host[:64] + "..."
    if method is not None and len(method) > METHOD_CHARS:
        problem = problem or f"the method is {len(method)} characters long"
        method = method[:METHOD_CHARS] + "..."
    if problem is request.problem:
        return request
    return replace(request, host=host, method=method, problem=problem)


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
