"""Where a sandbox's way out is, as values: the proxy's port inside and the
loopback addresses forwarded at their own address, and the variables that
point clients at it. Pure: `governor.sandbox.net` makes the sockets, `plan.profile`
puts the variables into the sandbox's environment.

Loopback inside is the sandbox's own (its network namespace is private), so
``NO_PROXY`` covers it: a client that honours the proxy variables would
otherwise send a request for its own dev server, or an agent's for its own
local server, to the proxy, which connects on the host and finds nothing (or
the host's server). A forwarded loopback address is still judged and recorded:
its listener is inside the namespace, and the proxy serves it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

PROXY_PORT: Final = 3128
"""The proxy's port inside a sandbox (its namespace is fresh: any port is free)."""

PROXY_VARIABLES: Final = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
NO_PROXY_VARIABLES: Final = ("NO_PROXY", "no_proxy")
LOOPBACK: Final = ("localhost", "127.0.0.0/8", "127.0.0.1", "::1")
"""What ``NO_PROXY`` names: the sandbox's own loopback (``127.0.0.1`` spelled
out for clients that read no CIDR, such as older curl and Python's urllib).
A job's own ``NO_PROXY`` is not kept: a host it names would be dialled
directly, from a namespace with no route out."""


@dataclass(frozen=True, slots=True)
class Egress:
    """Where a sandbox's proxy listens inside: its port and the loopback
    ``(host, port)`` pairs forwarded at the same address."""

    port: int = PROXY_PORT
    forwards: tuple[tuple[str, int], ...] = ()

    @classmethod
    def plan(cls, forwards: Sequence[tuple[str, int]]) -> Egress:
        """An egress whose proxy port is none of ``forwards``' ports."""
        taken = {port for _, port in forwards}
        port = PROXY_PORT
        while port in taken:
            port += 1
        return cls(port, tuple(dict.fromkeys(forwards)))

    def environment(self) -> dict[str, str]:
        """The proxy variables (both cases) that point every client at the
        proxy for everything but the sandbox's own loopback (`LOOPBACK`)."""
        url = f"http://127.0.0.1:{self.port}"
        env = {name: url for name in PROXY_VARIABLES}
        env |= {name.lower(): url for name in PROXY_VARIABLES}
        return env | dict.fromkeys(NO_PROXY_VARIABLES, ",".join(LOOPBACK))
