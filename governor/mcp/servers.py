"""Where a job's stdio MCP server runs: a sandbox of its own, built like a command's.

The server is the operator's choice, not the agent's, but what it does is the
agent's doing (it acts on the agent's calls), so it gets the least authority
that lets it work: the whole file system read-only, the roots read-write only
when the server is ``writable`` (and never above the job's capability), the
homes hidden, a private ``/tmp``, its install kept visible, an environment of
the names it declares only, and a network namespace of its own whose only way
out is the governor's proxy (origin ``mcp:NAME``): every connection it tries
is a ``network`` decision in the log, refused unless its ``network`` hosts
name it. It runs sandboxed even at full-access: a job that trusts its agent
has not said it trusts every server the agent is handed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from secrets import token_urlsafe
from typing import Any, Final

from governor.boundary.secrets import SHORTEST, secret_looking, spellings, spelt_bytes, spelt_text
from governor.confine.own_install import read_only_in
from governor.mcp import launchers
from governor.policies.capability import Capability
from governor.policies.mcp import OWN_SERVER, McpConfig, McpServer
from governor.policies.policy import Policy
from governor.sandbox import Profile, ProfileError, standalone
from governor.sandbox.host import processes
from governor.sandbox.plan.egress import Egress
from governor.sandbox.run.agent import resolve_install, resolve_links

SHIM: Final = Path(standalone.__file__).resolve().parent / "mcp_shim.py"
SYSTEM_PATH: Final = "/usr/local/bin:/usr/bin:/bin"
TOKEN_VARIABLE: Final = "ACP_GOVERNOR_MCP_TOKEN"
"""Where the shim finds the attempt's token (`governor.mcp.relay.McpRelay.admitted`):
in its entry's ``env``, not its argv, which the host's ``ps`` shows everyone."""


def relay_token() -> str:
    """A fresh token for one attempt's relay (256 random bits)."""
    return token_urlsafe(32)


SAFE_PATH: Final = {"PYTHONSAFEPATH": "1"}
"""Set for every server unless it declares the name: ``python -m
mcp_server_time`` would import a ``mcp_server_time.py`` of its cwd first (the
cwd is the governor's empty folder, `server_profile`; this holds should it
ever be another), which would run with the server's secrets and network
instead of the program the ceiling permits."""


def server_env(server: McpServer, environ: Mapping[str, str]) -> dict[str, str]:
    """The server's environment: `SAFE_PATH`, its declared names from
    ``environ`` (a name that is not set is left out), then a library call's
    own values."""
    env = dict(SAFE_PATH)
    env.update({name: environ[name] for name in server.env if name in environ})
    env.update(server.env_values)
    return env


def secrets(config: McpConfig, environ: Mapping[str, str]) -> list[str]:
    """The values a library call gave its servers' environments, and every HTTP
    server's header values (and a ``Bearer x`` value's credential alone):
    masked in every record like the agent's own secrets (the stdio servers'
    names from the policy file come from the environment, whose
    secret-looking variables are masked already; a header is masked whatever
    its variable is called)."""
    found = [v for s in config.servers for v in s.env_values.values()]
    for server in config.servers:
        found.extend(with_credentials(server_headers(server, environ).values()))
    return found


def with_credentials(values: Iterable[str]) -> list[str]:
    """``values``, each ``SCHEME credential`` one's credential alone after it
    (``Bearer eyJ...``: a server or an agent may quote the token without its scheme)."""
    found = []
    for value in values:
        found.append(value)
        scheme, _, credential = value.partition(" ")
        if credential.strip() and scheme.isalpha():
            found.append(credential.strip())
    return found


class Unsaid:
    """The operator's secrets a server was given, masked in what it sends the
    agent: a server that quotes its token ("invalid token Bearer ...") or
    prints its environment (server-everything's ``get-env``) hands the agent
    none, in clear or encoded (base64, hex, URL-encoded: `governor.boundary.secrets.spellings`).
    Values under 6 characters are too short to mask (`governor.boundary.secrets`)."""

    def __init__(self, values: Iterable[str]) -> None:
        known = {s for v in values if len(v) >= SHORTEST for s in spellings(v)}
        self._known = spelt_text(known) if known else None
        # a line of JSON holds a value as JSON writes it: both of its spellings
        spelt = {json.dumps(v, ensure_ascii=a)[1:-1] for v in known for a in (True, False)}
        self._bytes = spelt_bytes(spelt) if spelt else None

    @classmethod
    def of(cls, values: Iterable[str]) -> Unsaid:
        """These values, and a ``Bearer x`` value's credential alone."""
        return cls(with_credentials(values))

    def text(self, value: str) -> str:
        return value if self._known is None else self._known.sub(value)

    def line(self, line: bytes) -> bytes:
        """A line of JSON with each value masked where it is written."""
        return line if self._bytes is None else self._bytes.sub(line)

    def json(self, value: Any) -> Any:
        """A JSON value with every string masked (keys too: a server chooses them)."""
        if self._known is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k): self.json(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.json(v) for v in value]
        return value


def unsaid(server: McpServer, environ: Mapping[str, str]) -> Unsaid:
    """What ``server`` must not hand the agent: its header values, its
    secret-looking variables' values and a library call's own values."""
    env = server_env(server, environ)
    values = [v for k, v in env.items() if secret_looking(k) or k in server.env_values]
    return Unsaid.of([*server_headers(server, environ).values(), *values])


def server_headers(server: McpServer, environ: Mapping[str, str]) -> dict[str, str]:
    """An HTTP server's headers: each named variable's value from ``environ`` (one
    that is not set is left out: `problems` refuses it before start), then a
    library call's own values."""
    headers = {header: environ[variable] for header, variable in server.headers if variable in environ}
    headers.update(server.header_values)
    return headers


def server_profile(
    server: McpServer,
    policy: Policy,
    environ: Mapping[str, str],
    *,
    egress: Egress | None,
    hide: tuple[str, ...] = (),
    command: Sequence[str] | None = None,
) -> Profile:
    """The profile ``server`` runs under (see the module docstring); ``hide``:
    the relay's own sockets, covered wherever its folder shows (a server that
    reached one would be a client of the governor's tools or of another
    server). ``command``: what really starts (`governor.mcp.launchers.resolve`),
    default the configured one. Its cwd is the governor's empty folder, shown
    read-only, never the workspace: nothing there resolves to a file an agent
    wrote. `ProfileError` when its program cannot be found."""
    argv = tuple(server.command if command is None else command)
    search_path = environ.get("PATH") or os.environ.get("PATH")
    try:
        empty = processes.empty_folder(environ)
    except (OSError, processes.HostProcessRefused) as e:
        raise ProfileError(f"MCP server {server.name} has no folder to start from: {e}") from None
    writable = server.writable and policy.capability >= Capability.EDIT_WORKSPACE
    return Profile(
        capability=Capability.EDIT_WORKSPACE if writable else Capability.READ_ONLY,
        workspace=Path(policy.workspace),
        extra_roots=tuple(Path(r) for r in policy.roots[1:]),
        network=False,
        egress=egress,
        env=server_env(server, environ),
        visible=(*resolve_install(argv, search_path=search_path), empty),
        links=resolve_links(argv, search_path=search_path),
        path=search_path,
        cwd=empty,
        toolchains=policy.toolchains,
        git_read_only=policy.git == "read-only",
        limits=policy.limits.effective(),
        read_only=read_only_in(policy.roots),
        masked=(*policy.masked, *hide),
    )


def shim_interpreter() -> str:
    """A Python every sandbox shows for the shim: the system's (a venv's may lie
    under a private ``/tmp`` or a hidden home), else the governor's own."""
    return shutil.which("python3", path=SYSTEM_PATH) or sys.executable


def stdio_entry(
    name: str, socket_path: str, interpreter: str, shim: str, token: str
) -> dict[str, object]:
    """The ``mcpServers`` entry the agent gets in place of a real server: the
    shim, which connects back to the governor's socket for it and proves it
    is this attempt's with ``token`` (`TOKEN_VARIABLE`)."""
    return {
        "name": name,
        "command": interpreter,
        "args": ["-I", "-S", shim, socket_path],
        "env": [{"name": TOKEN_VARIABLE, "value": token}],
    }


def problems(
    servers: tuple[McpServer, ...], environ: Mapping[str, str], *, governor_tools: bool = False
) -> list[str]:
    """Why the job's servers cannot be relayed, for a refusal before anything
    starts: a name given twice (a policy's and a library call's, or the
    governor's own while ``governor_tools`` is on), an HTTP server's header
    variable that is not set, a program that is not there."""
    found: list[str] = []
    seen: set[str] = {OWN_SERVER} if governor_tools else set()
    for server in servers:
        if server.name in seen:
            found.append(
                f"MCP server {server.name}: the name of the governor's own tools "
                "(mcp.governor_tools); give it another"
                if server.name == OWN_SERVER and governor_tools
                else f"MCP server {server.name}: named twice"
            )
        seen.add(server.name)
        if server.stdio and (why := launchers.refused(server.name, server.command)):
            found.append(why)
            continue
        if not server.stdio:
            found.extend(
                f"MCP server {server.name}: headers.{header} names {variable}, which is not set"
                for header, variable in server.headers
                if variable not in environ and header not in server.header_values
            )
            continue
        try:
            resolve_install(server.command, search_path=environ.get("PATH") or os.environ.get("PATH"))
        except ProfileError as e:
            found.append(f"MCP server {server.name}: {str(e).replace('agent program', 'program')}")
    return found
