"""A sandbox profile and the host's facts it is rendered on: pure values, no I/O.

`Profile` is what a policy asks for (capability, roots, network, declared
environment, home folders to keep). `HostFacts` is what the survey found on the
host (resolved paths, which protected paths exist, which must be stubbed, which
secrets to mask). `governor.sandbox.plan.bwrap_argv` renders the two to bwrap's
options, in the mount order its header gives.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final

from governor.policies.capability import Capability
from governor.policies.limits import Limits
from governor.sandbox.plan.egress import Egress
from governor.sandbox.plan.protected import UNPROTECTABLE

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
