"""Where a sandbox's way out is, as values: the proxy's port inside and the
loopback addresses forwarded at their own address, and the variables that
point clients at it. Pure: `sandbox.net` makes the sockets, `plan.profile`
puts the variables into the sandbox's environment.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

PROXY_PORT: Final = 3128
"""The proxy's port inside a sandbox (its namespace is fresh: any port is free)."""

PROXY_VARIABLES: Final = ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY")
NO_PROXY_VARIABLES: Final = ("NO_PROXY", "no_proxy")


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
        """The proxy variables (both cases) that point every client at the proxy."""
        url = f"http://127.0.0.1:{self.port}"
        env = {name: url for name in PROXY_VARIABLES}
        return env | {name.lower(): url for name in PROXY_VARIABLES}
