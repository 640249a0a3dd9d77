"""Credentials the agent never holds: placeholders out, the real value swapped in
at the proxy, on the hosts it is bound to only.

The operator's key (``ANTHROPIC_API_KEY``, ...) stays with the governor. The
sandbox gets a placeholder of the same shape (its prefix kept, ``sk-ant-api03-``,
the rest random, fresh per attempt), so that a client that checks a key's
form still starts. The proxy reads the requests to the hosts the credential is
bound to (its own API hosts and base URL's host, never another key's: TLS
terminated there, `governor.sandbox.net.tls`) and puts the real value in a key
header holding the placeholder (`KEY_HEADERS`), only: on that host's own
transport (a TLS binding's value inside the TLS the proxy opened, never in
clear), and, where the binding names calls (`Binding.calls`), into those
calls only. A placeholder seen anywhere else (in a request the proxy reads:
plain HTTP, or a terminated host) is refused before anything is sent, and
recorded as an exfiltration try.

What the agent can then leak is the placeholder, worth nothing anywhere but
through this proxy, for this attempt. What this cannot cover: a request
inside a tunnel to a host that is not terminated (the proxy never reads it:
the placeholder is worthless there all the same), and a login folder
(``~/.claude``, OAuth tokens it refreshes itself), which the agent holds.

Everything here is pure: the proxy asks, this answers.
"""

from __future__ import annotations

import functools
import re
import secrets
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

_PREFIX: Final = re.compile(r"[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*[-_]")
_RANDOM_CHARS: Final = 24
"""A placeholder's random part is at least this long, whatever the real value's
length: long enough that it never appears in traffic by chance."""



def placeholder_for(value: str) -> str:
    """A stand-in of ``value``'s shape: its prefix up to the last ``-`` or ``_``
    within its first half (at most 16 characters) kept, the rest random from the
    same kind of characters, as long (at least `_RANDOM_CHARS`)."""
    head = value[: min(16, len(value) // 2)]
    match = _PREFIX.match(head)
    prefix = ""
    if match is not None:
        prefix = head[: max(i for i, c in enumerate(head) if c in "-_") + 1]
    rest = value[len(prefix) :]
    if rest and all(c in string.hexdigits.lower() for c in rest):
        alphabet = string.hexdigits.lower()[:16]
    elif rest and all(c in string.hexdigits.upper() for c in rest):
        alphabet = string.digits + "ABCDEF"
    else:
        alphabet = string.ascii_letters + string.digits
    size = max(len(rest), _RANDOM_CHARS)
    return prefix + "".join(secrets.choice(alphabet) for _ in range(size))


@dataclass(frozen=True, slots=True)
class Binding:
    """A host a credential may be sent to (``*.example.com``: its subdomains):
    ``port`` None is 443 and 80; ``calls``, when given, the only calls its
    real value goes into there (``GET /copilot_internal/**``: a method or
    ``*``, a path glob where ``*`` is one segment and ``**`` any)."""

    host: str
    port: int | None
    tls: bool = True
    calls: tuple[str, ...] = ()

    def allows(self, method: str, path: str) -> bool:
        """Whether a request of ``method`` to ``path`` (its query string left
        out) is one of `calls` (any, when none are named). A path a server
        could read as another (a ``.`` or ``..`` segment, an empty one, a
        ``%`` escape, a backslash) is none of them: the glob is matched on
        what is sent, never on what it might mean there."""
        if not self.calls:
            return True
        if not canonical_path(path):
            return False
        for call in self.calls:
            want, _, glob = call.partition(" ")
            if want in ("*", method) and _path_glob(glob).fullmatch(path):
                return True
        return False

    def covers(self, host: str, port: int, tls: bool | None = None) -> bool:
        """Whether ``host:port`` is this binding's (``*.example.com``: its
        subdomains only, as the network rules read it); with ``tls``, only on
        its own transport (a TLS binding's value never goes out in clear)."""
        if tls is not None and tls != self.tls:
            return False
        name = host.lower().rstrip(".")
        if self.host.startswith("*."):
            if not name.endswith(self.host[1:]) or len(name) <= len(self.host) - 1:
                return False
        elif name != self.host:
            return False
        return port == self.port if self.port is not None else port in (443, 80)


def canonical_path(path: str) -> bool:
    """Whether a request's path (no query string) means what it says to any
    server: absolute, no ``.`` or ``..`` segment, no empty one but a last, no
    ``%`` escape, no backslash. One that is not could be read as another path
    there (``/copilot_internal/../user/keys``), so no rule of ours names it."""
    if not path.startswith("/") or "%" in path or "\\" in path:
        return False
    segments = path.split("/")[1:]
    return not any(part in ("", ".", "..") for part in segments[:-1]) and segments[-1] not in (".", "..")


@functools.cache
def _path_glob(glob: str) -> re.Pattern[str]:
    """A path glob as a pattern: ``**`` any characters, ``*`` any but ``/``."""
    parts = glob.split("**")
    return re.compile(".*".join("[^/]*".join(map(re.escape, p.split("*"))) for p in parts))


def binding(pattern: str, *, tls: bool = True) -> Binding:
    """A ``host[:port]`` (``[v6]:port``) pattern as a `Binding`."""
    if pattern.startswith("["):
        end = pattern.find("]")
        host, rest = pattern[1:end], pattern[end + 1 :]
    else:
        host, _, port_text = pattern.partition(":")
        rest = f":{port_text}" if port_text else ""
    port = int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    return Binding(host.lower().rstrip("."), port, tls)


def url_binding(url: str) -> Binding | None:
    """The binding of a base URL (``http://127.0.0.1:8080/v1``): plain HTTP for
    ``http://``, TLS otherwise; None when it names no host."""
    parts = urlsplit(url if "://" in url else f"https://{url}")
    try:
        port = parts.port or (80 if parts.scheme == "http" else 443)
    except ValueError:
        return None
    if not parts.hostname:
        return None
    return Binding(parts.hostname.lower().rstrip("."), port, parts.scheme != "http")


@dataclass(frozen=True, slots=True)
class Credential:
    """One secret: the variable it came from, its real value, the placeholder
    the sandbox holds instead, and where it may go."""

    name: str
    value: str
    placeholder: str
    bindings: tuple[Binding, ...]

    def bound(self, host: str, port: int, tls: bool | None = None) -> bool:
        """Whether the value may go to ``host:port`` (with ``tls``: on that
        transport: a TLS binding's inside the TLS the proxy opened, only)."""
        return any(b.covers(host, port, tls) for b in self.bindings)

    def allows(self, host: str, port: int, tls: bool, method: str, path: str) -> bool:
        """Whether a binding on ``host:port`` over this transport takes the call."""
        return any(b.covers(host, port, tls) and b.allows(method, path) for b in self.bindings)

    def __repr__(self) -> str:  # never the value, whatever prints it
        return f"Credential({self.name!r}, placeholder={self.placeholder[:12]!r}...)"


class Leak(Exception):
    """A placeholder on its way to a host its credential is not bound to."""

    def __init__(self, name: str, why: str | None = None) -> None:
        super().__init__(
            why
            or f"the placeholder of {name} was sent to a host {name} is not bound to "
            "(an exfiltration try: refused)"
        )
        self.name = name


KEY_HEADERS: Final = frozenset(
    {b"authorization", b"x-api-key", b"api-key", b"x-goog-api-key", b"openai-api-key"}
)
"""The headers model APIs take a key in: the only places a real value is put."""


def _in_its_slot(name: bytes, value: bytes, placeholder: bytes) -> bool:
    """Whether a header is the placeholder as a key is sent: in a key header
    (`KEY_HEADERS`), its whole value (``x-api-key: P``) or one scheme word
    before it (``Authorization: Bearer P``). Anywhere else (the path, the
    query, another header, one holding more), the bound host could hand the
    real value back (an error quoting what it got)."""
    if name.strip().lower() not in KEY_HEADERS:
        return False
    value = value.strip()
    if value == placeholder:
        return True
    scheme, _, rest = value.partition(b" ")
    return rest.strip() == placeholder and scheme.isalpha() and len(scheme) <= 16


class Credentials:
    """The attempt's credentials, held by the governor; ``withheld``: the
    names of credential variables the agent is not given at all (no host of
    their own to be bound to: binding them to another key's would hand one
    provider's key to another's API)."""

    def __init__(self, held: Iterable[Credential] = (), withheld: Iterable[str] = ()) -> None:
        self.held = tuple(held)
        self.withheld = tuple(withheld)
        self._placeholders = [(c, c.placeholder.encode()) for c in self.held]

    def __bool__(self) -> bool:
        return bool(self.held)

    def sandbox_env(self, env: Mapping[str, str]) -> dict[str, str]:
        """What the sandbox holds of ``env``: each held variable's placeholder
        instead of its value, and no withheld variable."""
        out = {k: v for k, v in env.items() if k not in self.withheld}
        return {**out, **{c.name: c.placeholder for c in self.held}}

    def terminated(self, host: str, port: int) -> Binding | None:
        """The binding that covers ``host:port`` (the proxy reads its requests),
        or None."""
        for c in self.held:
            for b in c.bindings:
                if b.covers(host, port):
                    return b
        return None

    def swap(
        self,
        target: bytes,
        fields: Sequence[tuple[bytes, bytes]],
        host: str,
        port: int,
        *,
        tls: bool,
        method: str,
    ) -> tuple[bytes, list[tuple[bytes, bytes]], tuple[str, ...]]:
        """The request target and fields with each placeholder replaced by its
        real value when the credential is bound to ``host:port`` on this
        transport (``tls``: the request goes out inside TLS the proxy opened),
        and the names swapped; `Leak` when a placeholder goes anywhere else,
        in clear to a host its key goes to over TLS only, or into a call
        (``method`` and the target's path) its binding there does not name."""
        used: list[str] = []
        out = list(fields)
        for credential, placeholder in self._placeholders:
            seen = placeholder in target or any(placeholder in v for _, v in out)
            if not seen:
                continue
            if not credential.bound(host, port):
                raise Leak(credential.name)
            if not credential.bound(host, port, tls):
                raise Leak(
                    credential.name,
                    f"the placeholder of {credential.name} was sent in clear (plain HTTP) to "
                    f"{host}:{port}, where {credential.name} goes inside TLS only: its real "
                    "value never crosses the network unencrypted (an exfiltration try: refused)",
                )
            path = target.split(b"?", 1)[0].decode("ascii", "replace")
            if not credential.allows(host, port, tls, method, path):
                raise Leak(
                    credential.name,
                    f"the placeholder of {credential.name} was sent in {method} {path[:200]} to "
                    f"{host}:{port}, a call its agent does not make with it there: its real "
                    "value goes only into the calls its preset names (an exfiltration try: refused)",
                )
            if placeholder in target or any(
                placeholder in v and not _in_its_slot(k, v, placeholder) for k, v in out
            ):
                raise Leak(
                    credential.name,
                    f"the placeholder of {credential.name} was sent outside a key's place (the "
                    "path, the query, a header holding more than the key): the real value goes "
                    "only where a key is sent, never where the host could hand it back (refused)",
                )
            real = credential.value.encode()
            out = [(k, real if v.strip() == placeholder else v.replace(placeholder, real)) for k, v in out]
            used.append(credential.name)
        return target, out, tuple(used)

    def leaked(self, data: bytes | bytearray, host: str, port: int) -> str | None:
        """The name of a credential whose placeholder is in ``data`` (a body
        read on its way to ``host:port``) and not bound there, or None."""
        for credential, placeholder in self._placeholders:
            if placeholder in data and not credential.bound(host, port):
                return credential.name
        return None

    def secrets(self) -> tuple[str, ...]:
        """The real values (for the log's masker)."""
        return tuple(c.value for c in self.held)
