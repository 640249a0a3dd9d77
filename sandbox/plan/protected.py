"""The paths a sandboxed command may never change or read, as data.

The names themselves come from `governor.policies.protected`, the one list: the policy
engine refuses governed writes to them and the profile renderer and the
workspace survey pin them here, so the in-process `fs/write_text_file` check and
the bwrap mounts refuse the same names.

Why each group is here:

* Version-control execution surface. Parts of ``.git`` run code at the user's
  next *host* ``git`` command (hooks, ``core.fsmonitor``, filters,
  ``core.hooksPath``). Where commits are allowed (edit-workspace, unless the
  profile says ``git_read_only``) those parts, `GIT_DIR_PROTECTED`, are pinned
  and the rest of the git dir (objects, refs, index, logs, ``HEAD``) is
  writable; the git dir itself is bound over itself, so ``mv .git .git-old``
  and rebuilding it (sandbox-reference §4.2) fail with EBUSY. Otherwise
  ``.git`` is pinned as a whole. ``.githooks``/``.husky`` are where hook
  managers point ``core.hooksPath``.
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

from governor.policies import protected as policy_protected

PROTECTED_NAMES: Final[tuple[str, ...]] = policy_protected.PROTECTED_NAMES
"""Names pinned read-only at the top of every writable root (existing or not): the
policy engine's list, so governed writes and sandboxed commands refuse the same."""

UNPROTECTABLE: Final[tuple[str, ...]] = policy_protected.UNPROTECTABLE
"""The names a profile may leave unpinned (`Profile.unprotected`): the policy's
``unprotect``, checked against the same list."""

NESTED_GIT_NAME: Final = ".git"
"""Nested repositories (``**/.git``) are protected like the top one: a nested
``.git/hooks`` runs as soon as the user commits inside that directory
(openai/codex#37081)."""

GIT_DIR_PROTECTED: Final[tuple[str, ...]] = (
    "config",
    "config.worktree",
    "hooks",
    "info",
    "modules",
    "worktrees",
    "commondir",
    "objects/info/alternates",
    "objects/info/http-alternates",
)
"""What stays read-only inside a git dir where commits are allowed, existing or
not (a placeholder holds a missing one; git takes each for absent, see
`governor.sandbox.run.stubs`). Each can run code at the person's next host ``git``:

* ``config``: ``core.fsmonitor``, ``core.hooksPath``, ``core.sshCommand``,
  aliases, filter and diff drivers, credential helpers.
* ``config.worktree``: the same keys. git reads it only when the pinned
  ``config`` sets ``extensions.worktreeConfig``, and it is pinned even so: the
  person may turn the extension on later (``git sparse-checkout``), and a file
  planted today would take effect then.
* ``hooks/``: run by commit, merge, checkout, push.
* ``info/``: ``attributes`` picks filter and diff drivers; ``exclude``,
  ``sparse-checkout`` and ``grafts`` change what git sees.
* ``modules/``: the submodules' git dirs, whose config and hooks run at
  ``git submodule update`` and recursive commands.
* ``worktrees/``: the linked worktrees' git dirs, whose ``commondir`` and
  ``config.worktree`` decide what a worktree elsewhere runs.
* ``commondir``: names the directory whose config and hooks git uses; pointing
  it elsewhere swaps them all.
* ``objects/info/alternates`` and ``http-alternates``: more object stores
  (paths, URLs) git reads as its own (gitrepository-layout(5)): the person's
  repository would depend on, and read, a store the agent keeps where it likes
  and the snapshot does not look. Pinned alone: the rest of ``objects/`` is
  where commits go.

Not here, on purpose: ``rebase-merge/``, ``rebase-apply/`` and ``sequencer/``.
A planted ``git-rebase-todo`` with ``exec`` lines runs only if the person runs
``git rebase --continue`` on a rebase ``git status`` shows as in progress;
protecting them would break rebases inside the sandbox."""

GIT_DIR_CONTAINERS: Final[frozenset[str]] = frozenset({"modules", "worktrees"})
"""The parts of `GIT_DIR_PROTECTED` that hold other git dirs (a submodule's, a
linked worktree's). Such a git dir, when a ``.git`` file leads to it, is opened
again inside its pinned container under the same rules; nothing else inside a
pinned path is ever made writable."""

SCAN_MAX_DEPTH: Final = 4
"""How many directory levels below a root the survey descends looking for nested
repositories and ``.env`` files. Bounded so that a survey stays in milliseconds;
a repository or secret deeper than this is not found (documented limit)."""

SCAN_SKIP_DIRS: Final[frozenset[str]] = frozenset(
    {"node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache", ".git"}
)
"""Directories the bounded scan never enters: huge, generated, or (``.git``)
protected by its own rules; the git dirs inside one (``modules/*``) are found
through their checkouts' ``.git`` files."""

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
(`governor.sandbox.host.sockets`)."""

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


CREDENTIAL_DIRS: Final[tuple[str, ...]] = (
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".config/gh",
    ".config/op",
    ".docker",
    ".kube",
    ".password-store",
    ".local/share/keyrings",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
)
"""Home folders (relative to a home) that hold keys, tokens and logins as a
whole. A toolchain folder that contains one is never kept by detection, and an
operator's ``[sandbox] keep`` naming one is refused."""

CREDENTIAL_FILES: Final[tuple[str, ...]] = (
    ".npmrc",
    ".yarnrc.yml",
    ".pypirc",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".docker/config.json",
    ".kube/config",
    ".config/gh/hosts.yml",
    ".gem/credentials",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".composer/auth.json",
    ".config/pip/pip.conf",
    ".pip/pip.conf",
    ".terraform.d/credentials.tfrc.json",
    ".vault-token",
)
"""Files (relative to a home) where tools keep tokens and passwords; each one
inside a kept folder is covered with an empty file."""

CREDENTIALS_IN_TOOLCHAIN: Final[tuple[str, ...]] = (
    "credentials",
    "credentials.toml",
    ".npmrc",
    "etc/npmrc",
    "gradle.properties",
)
"""The same, relative to the top of any kept folder: ``$CARGO_HOME`` elsewhere,
an nvm prefix's global ``etc/npmrc``."""

HOST_SECRET_FILES: Final[tuple[str, ...]] = (
    "/etc/shadow",
    "/etc/shadow-",
    "/etc/gshadow",
    "/etc/gshadow-",
    "/etc/sudoers",
    "/etc/security/opasswd",
    "/etc/ssh/ssh_host_*_key",
    "/etc/krb5.keytab",
    "/etc/ppp/chap-secrets",
    "/etc/ppp/pap-secrets",
    "/etc/libvirt/*.key",
    "/etc/wireguard/*",
    "/var/backups/shadow.bak",
    "/var/backups/gshadow.bak",
)
"""The host's secret files (globs), each covered with ``/dev/null`` in every
sandbox whoever runs it: a root caller stays uid 0 inside, the owner of
``/etc/shadow``, so its mode alone lets the sandbox read every password hash
(and the SSH host keys, ``sudoers``) without any capability. The list is the
one firejail's ``disable-common.inc`` and bubblejail mask."""

HOST_SECRET_DIRS: Final[tuple[str, ...]] = (
    "/etc/sudoers.d",
    "/etc/ssl/private",
    "/etc/NetworkManager/system-connections",
    "/etc/wpa_supplicant",
    "/etc/ipsec.d/private",
    "/etc/letsencrypt",
    "/etc/polkit-1/localauthority",
)
"""Host folders of keys and passwords, each an empty tmpfs in every sandbox."""

OTHER_HOMES_PARENT: Final = "/home"
"""Every directory here is someone's home (or a shared one): all of them but
the sandboxed person's are gone inside (the folder is one tmpfs, what is kept
bound back), with the password database's homes of the other people (uid at
least `PEOPLE_UID_MIN`, and root's)."""

PEOPLE_UID_MIN: Final = 1000
"""The smallest uid of a person's account (``UID_MIN`` of ``login.defs`` on
every major distribution); below it are system accounts, whose homes are
``/usr/sbin``, ``/bin``, ``/var/spool/...`` and must stay."""

NOBODY_UID: Final = 65534
