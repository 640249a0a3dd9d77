"""The paths a sandboxed command may never change or read, as data.

The names themselves come from `policies.protected`, the one list: the policy
engine refuses governed writes to them and the profile renderer and the
workspace survey pin them here, so the in-process `fs/write_text_file` check and
the bwrap mounts refuse the same names.

Why each group is here:

* Version-control execution surface. Anything under ``.git`` can run code at the
  user's next *host* ``git`` command (hooks, ``core.fsmonitor``, filters,
  ``core.hooksPath``). ``.git`` is protected **as a whole** because protecting
  only ``.git/hooks`` is bypassed by ``mv .git .git-old`` and rebuilding it
  (sandbox-reference §4.2). ``.githooks``/``.husky`` are where hook managers
  point ``core.hooksPath``.
* Agent and governor control plane: an agent must not rewrite its own policy,
  permissions, MCP servers or future instructions.
* Editor and auto-run configs: opening the folder in an IDE or ``cd``-ing into it
  with direnv runs them.
* Shell and tool rc files: they run at the user's next login or tool start when
  the workspace overlaps ``$HOME``, and some tools read project-level rc files.

Hidden files are *read*-denied: ``.env`` files hold the secrets a project needs
locally; commands see an empty file instead.
"""

from __future__ import annotations

import fnmatch
from typing import Final

from policies import protected as policy_protected

PROTECTED_NAMES: Final[tuple[str, ...]] = policy_protected.PROTECTED_NAMES
"""Names pinned read-only at the top of every writable root (existing or not): the
policy engine's list, so governed writes and sandboxed commands refuse the same."""

NESTED_GIT_NAME: Final = ".git"
"""Nested repositories (``**/.git``) are pinned too: a nested ``.git/hooks`` runs as
soon as the user commits inside that directory (openai/codex#37081)."""

SCAN_MAX_DEPTH: Final = 4
"""How many directory levels below a root the survey descends looking for nested
repositories and ``.env`` files. Bounded so that a survey stays in milliseconds;
a repository or secret deeper than this is not found (documented limit)."""

SCAN_SKIP_DIRS: Final[frozenset[str]] = frozenset(
    {"node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache", ".git"}
)
"""Directories the bounded scan never enters: huge, generated, or (``.git``)
already protected as a whole."""

HIDDEN_PATTERNS: Final[tuple[str, ...]] = policy_protected.HIDDEN_NAMES
"""File-name globs (matched on the last component) masked with an empty file."""

HOST_DAEMON_SOCKETS: Final[tuple[str, ...]] = (
    "/run/docker.sock",
    "/var/run/docker.sock",
    "/run/containerd/containerd.sock",
    "/run/podman/podman.sock",
    "/run/crio/crio.sock",
    "/run/buildkit/buildkitd.sock",
    "/run/dbus/system_bus_socket",
    "/var/run/dbus/system_bus_socket",
)
"""Host sockets that grant root-equivalent or session-wide power; each one that
exists is covered with ``/dev/null`` (a read-only bind does not stop ``connect``)
where the filter refuses ``socket(AF_UNIX)`` anyway: a second wall. Where a
process may make Unix sockets, all of ``/run`` is hidden instead
(`sandbox.sockets`)."""

RUN_DIRS: Final[tuple[str, ...]] = ("/run", "/var/run")
"""Where daemons keep their sockets; an empty tmpfs for a process that may make
Unix sockets (``/var/run`` is usually a link to ``/run``: one tmpfs then)."""

RUN_KEPT: Final[tuple[str, ...]] = ("wrappers", "binfmt")
"""Directories at the top of ``/run`` bound back on its tmpfs when they exist:
NixOS's setuid wrappers (``/run/wrappers/bin`` is on its PATH) and its
binfmt_misc interpreters (opened at exec time, from the caller's mounts).
Neither holds a socket. The links at the top of ``/run`` (NixOS's
``current-system``, ``opengl-driver``) are recreated as links."""

RUN_LINKED_FROM: Final[tuple[str, ...]] = ("/etc/resolv.conf",)
"""Files outside ``/run`` that are links into it; the file they lead to is bound
back (``/etc/resolv.conf`` to systemd-resolved's or NetworkManager's copy)."""

SOCKET_SCAN_DEPTH: Final = 5
"""How many directory levels below ``/`` the scan for host sockets lists
(``/var/snap/lxd/common/lxd/unix.socket`` is found, its directory being the
fifth level). Shallow levels of every directory come first (breadth-first)."""

SOCKET_SCAN_MAX_DIRS: Final = 3000
"""At most this many directories are listed by one scan for host sockets (about
7 us each here: a bound of some 25 ms); a socket beyond is not found
(documented limit). Deterministic, unlike a clock: what is found does not
depend on the load of the machine."""

SOCKET_SCAN_SKIP: Final[tuple[str, ...]] = ("/nix/store", "/snap")
"""Large trees the scan never enters: read-only (the Nix store, snaps' squashfs
images), so no daemon can bind a socket in them."""

SYSTEM_DIRS: Final[tuple[str, ...]] = (
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/lib",
    "/lib32",
    "/lib64",
    "/libx32",
    "/proc",
    "/run",
    "/sbin",
    "/sys",
    "/usr",
)
"""A writable root may not be one of these or lie inside one: the sandbox's own
PATH and loader live there."""


def is_hidden_name(name: str) -> bool:
    """Whether a file named ``name`` is read-denied (``.env``, ``.env.local``, ...)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in HIDDEN_PATTERNS)
