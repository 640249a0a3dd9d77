"""The governor's use of `sandbox/`: profiles from a policy, the preflight, the
agent process and the terminals.

One place translates a bound `Policy` into `governor.sandbox.Profile`s, so the agent's
wrapper and every command see the same roots, capability and protected paths:

- commands (``terminal/*``): the policy's capability, its roots, its network
  switch, the agent's ``$HOME`` and ``PATH`` (with the toolchains under the
  homes it leads to, `governor.sandbox.host.toolchains`), and otherwise only the variables
  the agent declares for that command;
- both: the policy's ``[sandbox] git`` (commits allowed at edit-workspace, or
  ``.git`` read-only as a whole), the governor's own install pinned
  read-only where it lies in a root (`governor.confine.own_install`), and the policy's
  frozen paths pinned read-only too (`governor.confine.frozen`);
- the agent process: the same roots and capability, its preset's home folders
  kept writable on the empty ``$HOME`` but for what in them runs code on the
  host later (the preset's ``runs_code``: read-only, or a throwaway copy), its install kept visible, its
  environment as the attempt built it. ``--no-sandbox-agent`` (or
  full-access) runs it bare, under a watchdog that takes it and everything it
  started down with the attempt or the governor (`governor.sandbox.standalone.watchdog`), and the
  outcome says so.

Networks: below full-access every sandbox has a network namespace of its own.
The agent's only way out is the attempt's egress proxy (`governor.sandbox.net.proxy`,
`governor.confine.egress`): its model API and what the policy allows, each
connection a ``network`` record. The commands' session sandbox is behind the
same proxy when the policy has network on (its ``[network]`` hosts only), and
has no way out at all otherwise. None shares the host's namespace, so the
host's abstract sockets (X11, D-Bus) are out of every sandbox's reach;
the agent's own tools and the commands may make Unix sockets (a test server on
``./t.sock``), and the survey hides the host's socket files from them (``/run`` is an empty tmpfs, the sockets found elsewhere are covered;
`governor.sandbox.host.sockets` says how, and what stays reachable). A full-access agent or
command is not sandboxed at all and has the host's network.
"""

from __future__ import annotations

import os
import posixpath
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Final

import structlog
import trio

from governor.agents.presets import NPM_HOME, Preset, operator_presets_path
from governor.confine import frozen, harness
from governor.confine import stray_processes as leftovers
from governor.confine.egress import egress_for
from governor.confine.own_install import read_only_in
from governor.policies.capability import Capability
from governor.policies.paths import is_literal, is_under
from governor.policies.policy import Policy
from governor.sandbox import (
    BwrapUnavailable,
    Profile,
    ProfileError,
    SandboxStartFailed,
    Terminals,
    agent_process,
)
from governor.sandbox.host import concealed, processes
from governor.sandbox.host.survey import survey
from governor.sandbox.net.proxy import EgressProxy
from governor.sandbox.run.agent import resolve_install, resolve_links
from governor.sandbox.run.execution import Execution
from governor.sandbox.run.preflight import preflight
from governor.sandbox.run.spawn import Child

log = structlog.get_logger("governor.confine.sandboxes")

AGENT_PEER: Final = Path(__file__).resolve().parents[1] / "agents" / "stdio_peer.py"
"""The JSON-RPC loop that the stdlib agents we ship and test with import by
path (`governor.agents.stdio_peer`): kept visible to every sandboxed agent, as
an agent found under a folder its sandbox hides (a checkout under ``$HOME`` or
``/tmp``) is seen as its own file only. Ours, public, and holds nothing."""


class SandboxUnavailable(Exception):
    """bwrap cannot work here; the message says what to install or enable."""


def configured_bwrap() -> str | None:
    """The bwrap an operator configured (``$ACP_GOVERNOR_BWRAP``), for the agent and
    every command alike; None lets `sandbox` find one."""
    return os.environ.get("ACP_GOVERNOR_BWRAP") or None


async def check(policy: Policy) -> None:
    """Preflight bwrap once per run when anything will be sandboxed; fail closed."""
    if policy.capability >= Capability.FULL_ACCESS:
        return  # full-access runs nothing under bwrap
    try:
        await preflight(configured_bwrap())
    except SandboxStartFailed as e:  # the machine can; this one did not (bwrap's line says why)
        raise SandboxUnavailable(str(e)) from None
    except BwrapUnavailable as e:
        raise SandboxUnavailable(f"the sandbox cannot work here: {e}") from None
    except ProfileError as e:  # e.g. limits this machine cannot set (governor.sandbox.host.limits)
        raise SandboxUnavailable(f"the agent's sandbox cannot be built: {e}") from None


def _literal_paths(globs: Sequence[str]) -> tuple[str, ...]:
    """The policy's extra protected globs that name one path (bwrap binds paths;
    globbed ones are enforced by the policy engine for governed writes only)."""
    out = []
    for g in globs:
        g = g.removesuffix("/**")
        if g and not g.startswith("/") and is_literal(g) and ".." not in g.split("/"):
            out.append(g.removeprefix("./"))
    return tuple(out)


def _still_unprotected(policy: Policy) -> tuple[str, ...]:
    """The policy's ``unprotect`` names that none of its protected globs (the
    ceiling's among them) covers again: the sandbox leaves exactly the names
    unpinned that governed writes may change."""
    root = policy.workspace
    return tuple(
        name
        for name in policy.unprotected
        if policy.protected.first(posixpath.join(root, name), (root,)) is None
    )


def kept_folders(policy: Policy) -> tuple[Path, ...]:
    """The policy's ``[sandbox] keep`` folders, ``~/`` taken as the governor's
    ``$HOME`` (the person's, where their toolchain is)."""
    return tuple(Path(os.path.expanduser(folder)) for folder in policy.keep)


def command_profile(policy: Policy, agent_env: Mapping[str, str] | None = None) -> Profile:
    """The profile every governed command runs under. With the agent's
    environment, a command gets the agent's ``$HOME`` and ``PATH`` (it runs the
    command for the agent, as if it ran it itself); else the governor's own."""
    env = os.environ if agent_env is None else agent_env
    home = env.get("HOME", "")
    sandboxed = policy.capability < Capability.FULL_ACCESS
    behind_proxy = sandboxed and policy.network
    return Profile(
        capability=policy.capability,
        workspace=Path(policy.workspace),
        extra_roots=tuple(Path(r) for r in policy.roots[1:]),
        network=policy.network and not sandboxed,
        egress=egress_for(policy.network_rules, "command") if behind_proxy else None,
        env={"HOME": home} if agent_env is not None and os.path.isabs(home) else {},
        path=env.get("PATH"),
        keep=kept_folders(policy),
        toolchains=policy.toolchains,
        protected=_literal_paths(policy.protected_extra),
        unprotected=_still_unprotected(policy),
        hidden=_literal_paths(tuple(h for h in policy.hidden_globs if not h.startswith("**/"))),
        git_read_only=policy.git == "read-only",
        limits=policy.limits.effective(),
        read_only=read_only_in(policy.roots) + own_config_in(policy.roots) + frozen.pins(policy) + harness.pins(policy),
        masked=policy.masked,
    )


def agent_profile(
    argv: Sequence[str],
    policy: Policy,
    preset: Preset | None,
    env: Mapping[str, str],
    *,
    sandbox: bool,
    via_npx: bool = False,
) -> Profile:
    """The profile that wraps the agent process itself: sandboxed, it has a
    network namespace of its own whose only way out is the governor's proxy
    (`governor.confine.egress`); unsandboxed, the host's network."""
    capability = policy.capability if sandbox else Capability.FULL_ACCESS
    home_folders: list[str] = []
    runs_code: tuple[str, ...] = ()
    moved: dict[str, str] = {}
    if preset is not None:
        home_folders += [h.removeprefix("~/") for h in preset.home if h.startswith("~/")]
        runs_code = tuple(h.removeprefix("~/") for h in preset.runs_code)
        if sandbox:
            moved = relocated_home(preset, env, policy.roots)
            runs_code = tuple(
                dict.fromkeys((*runs_code, *held_at_other_names(preset, env, home_folders, moved)))
            )
    # npx's cache: an overlay, never writable, since the host's next fetch and
    # the person's own npx run what lies there (`governor.sandbox.host.processes`)
    overlay_folders = (NPM_HOME.removeprefix("~/"),) if via_npx else ()
    try:
        sandboxed = capability < Capability.FULL_ACCESS
        install = (
            (*resolve_install(argv, search_path=env.get("PATH")), AGENT_PEER) if sandboxed else ()
        )
        links = resolve_links(argv, search_path=env.get("PATH")) if sandboxed else ()
    except ProfileError as e:
        raise SandboxUnavailable(str(e)) from None
    env = dict(env)
    if moved:  # shown at their usual places inside: the agent finds them there
        assert preset is not None
        for var in {r.var for r in preset.relocate}:
            env.pop(var, None)
    if preset is not None:  # the agent's own process only: no host process runs with them
        env.update(preset.set_env)
    if capability >= Capability.FULL_ACCESS:
        env[leftovers.MARKER] = uuid.uuid4().hex  # finds what left the watchdog's tree
    return Profile.for_agent(
        capability,
        Path(policy.workspace),
        extra_roots=tuple(Path(r) for r in policy.roots[1:]),
        home_folders=tuple(dict.fromkeys(h for h in home_folders if h and h != ".")),
        home_sources=moved,
        home_runs_code=runs_code,
        overlay_folders=overlay_folders,
        install=install,
        links=links,
        env=env,
        network=not sandboxed,
        egress=egress_for(policy.network_rules, "agent") if sandboxed else None,
        protected=_literal_paths(policy.protected_extra),
        unprotected=_still_unprotected(policy),
        keep=kept_folders(policy),
        toolchains=policy.toolchains,
        git_read_only=policy.git == "read-only",
        limits=policy.limits.effective(),
        read_only=read_only_in(policy.roots) + own_config_in(policy.roots) + frozen.pins(policy) + harness.pins(policy),
        masked=policy.masked,
    )


def relocated_home(
    preset: Preset, env: Mapping[str, str], roots: Sequence[str]
) -> dict[str, str]:
    """The preset's home folders a variable of the agent's moves away from
    ``$HOME`` (``XDG_DATA_HOME=/srv/data``: OpenCode's data is in
    ``/srv/data/opencode``), each as its name under ``$HOME`` and its host
    place: its sandbox binds that place at the usual name, writable, with
    what in it runs code later held read-only as at home, and the agent is
    given none of the relocating variables (it finds its folders where they
    would be without them). `SandboxUnavailable` for a place inside a root or
    the governor's state, or one holding either: bound writable, it would
    open the workspace past its capability, or the state to the agent."""
    home = env.get("HOME", "")
    if not os.path.isabs(home):
        return {}
    state = os.path.realpath(concealed.state_dir())
    moved: dict[str, str] = {}
    for entry, place in zip(preset.home, preset.home_paths(env, Path(home)), strict=True):
        name = entry.removeprefix("~/")
        if place == Path(home) / name:
            continue
        real = os.path.realpath(place)
        if real != os.path.normpath(place):
            # what the survey binds is the link's target: a link in a folder an
            # earlier agent could write (CLAUDE_CONFIG_DIR holds ~/.claude.json's
            # place) would point the writable bind anywhere
            raise SandboxUnavailable(
                f"{preset.name}'s {entry} is moved to {place}, which is (or passes through) a "
                f"symbolic link to {real}: a moved place is bound as it is, never through a "
                "link an agent could have left; make it a real file or folder, or unset "
                f"{', '.join(sorted({r.var for r in preset.relocate if r.entry == entry}))}"
            )
        for other in (*(os.path.realpath(r) for r in roots), state):
            if is_under(real, other) or is_under(other, real):
                raise SandboxUnavailable(
                    f"{preset.name}'s folder {entry} is moved to {place} by its variables "
                    f"({', '.join(sorted({r.var for r in preset.relocate if r.entry == entry}))}), "
                    f"which {'is inside' if is_under(str(place), other) else 'holds'} {other}: "
                    "kept writable there, it would reach past its sandbox; point the variable elsewhere"
                )
        moved[name] = str(place)
    return moved


def own_config_in(roots: Sequence[str]) -> tuple[Path, ...]:
    """The operator's own presets folder (``$XDG_CONFIG_HOME/acp-governor``) when it
    lies inside a root (a project's ``.config`` as ``XDG_CONFIG_HOME``): pinned
    read-only in every sandbox, as the governor's own install is, since it names
    the programs the governor starts. Made elsewhere after, by an agent, it is
    refused when read (`governor.agents.presets.load_operator_presets`)."""
    folder = os.path.realpath(operator_presets_path().parent)
    inside = os.path.isdir(folder) and any(
        folder != os.path.realpath(r) and is_under(folder, os.path.realpath(r)) for r in roots
    )
    return (Path(folder),) if inside else ()


def held_at_other_names(
    preset: Preset, env: Mapping[str, str], names: Sequence[str], moved: Mapping[str, str]
) -> tuple[str, ...]:
    """What the host trusts later that lies inside another writable home folder
    than its own: each as a path under ``$HOME`` in the sandbox, held read-only
    there too (`Profile.home_runs_code`). A variable can put one home entry's
    place inside another's (``CLAUDE_CONFIG_DIR`` puts ``~/.claude.json`` in
    ``~/.claude``'s place), and the operator's own presets file, which names
    the programs the governor starts, can lie in a folder an agent keeps
    (``XDG_CONFIG_HOME`` moved with it): held at its own name only, it would be
    writable at the other."""
    home = env.get("HOME", "")
    if not os.path.isabs(home):
        return ()
    held = [
        (os.path.realpath(place), entry.endswith("/"))
        for entry, place in zip(preset.runs_code, preset.runs_code_paths(env, Path(home)), strict=True)
    ]
    held.append((os.path.realpath(operator_presets_path()), False))
    out: list[str] = []
    for name in names:
        folder = os.path.realpath(moved.get(name, os.path.join(home, name)))
        for place, is_folder in held:
            if place != folder and is_under(place, folder):
                out.append(f"{name}/{os.path.relpath(place, folder)}" + ("/" if is_folder else ""))
    return tuple(dict.fromkeys(out))


def host_places(
    policy: Policy, preset: Preset | None, env: Mapping[str, str]
) -> processes.Places:
    """Where the attempt's agent may write, as `governor.sandbox.host.processes` refuses
    it for every host process of the attempt (the npx fetch): the roots, the
    preset's home folders (kept writable in its sandbox) under the agent's
    ``$HOME`` and where its variables relocate them (``CODEX_HOME``), npm's
    cache and the temporary folders."""
    home = env.get("HOME", "")
    homes = (
        preset.home_paths(env, Path(home)) if preset is not None and os.path.isabs(home) else ()
    )
    return processes.Places.of(roots=policy.roots, homes=homes, environ=env)


FOLDER_VARIABLE: Final = re.compile(r"[A-Z0-9_]+_(HOME|DIR)\Z")
"""The variables that name a folder the agent works in (``XDG_CACHE_HOME``,
``CODEX_HOME``, ``CLAUDE_CONFIG_DIR``): one its sandbox hides makes it fail at
its start, in its own words, which rarely name the folder."""


def unseen_folders(profile: Profile) -> tuple[str, ...]:
    """``VAR=path`` for each folder variable of the agent's environment whose
    absolute path its sandbox does not show: under a private tmpfs (``/tmp``,
    ``$HOME``, another home) and not kept (a root, the install, a home folder,
    a toolchain). Only asked after a failed start: it surveys the host again.
    Empty for an unsandboxed agent, or when the survey itself fails."""
    if not profile.sandboxed:
        return ()
    try:
        facts = survey(profile)
    except (OSError, ProfileError):
        return ()
    hidden = (*facts.private_dirs, *facts.other_homes, *([facts.home] if facts.home else []))
    kept = (
        *facts.roots,
        *facts.visible,
        *(m.dest for m in facts.home_mounts),
        *(m.source for m in facts.home_mounts),
        *(k.path for k in facts.kept),
    )
    out: list[str] = []
    for name, value in sorted(profile.env.items()):
        if not FOLDER_VARIABLE.match(name) or not os.path.isabs(value):
            continue
        place = os.path.realpath(value)
        shown = any(is_under(place, k) or is_under(value, k) for k in kept)
        if not shown and any(is_under(place, h) or is_under(value, h) for h in hidden):
            out.append(f"{name}={value}")
    return tuple(out)


@asynccontextmanager
async def spawn_agent(
    profile: Profile, argv: Sequence[str], proxy: EgressProxy | None = None
) -> AsyncIterator[Child]:
    """Start the agent under its profile with piped stdio; the block owns it and
    kills it (its whole tree: the sandbox's PID namespace, or what the unsandboxed
    agent's watchdog finds) when left, then sweeps for the marker variable. A
    profile behind the proxy is attached to ``proxy`` before the agent starts."""
    marker = profile.env.get(leftovers.MARKER)
    attach = None
    egress = profile.egress
    if egress is not None:
        if proxy is None:
            raise SandboxUnavailable("the agent's sandbox needs the egress proxy")

        async def attach(pid: int) -> None:
            await proxy.attach(pid, egress, "agent")

        proxy.keep_spare()  # its interpreter starts while bwrap builds the sandbox

    try:
        async with agent_process(
            profile, argv, bwrap=configured_bwrap(), attach=attach
        ) as child:
            yield child
    except SandboxStartFailed as e:  # the machine can; this one did not (bwrap's line says why)
        raise SandboxUnavailable(str(e)) from None
    except BwrapUnavailable as e:
        raise SandboxUnavailable(f"the sandbox cannot work here: {e}") from None
    except ProfileError as e:  # e.g. limits this machine cannot set (governor.sandbox.host.limits)
        raise SandboxUnavailable(f"the agent's sandbox cannot be built: {e}") from None
    finally:
        if marker is not None:  # unsandboxed: what left its process group dies too
            leftovers.kill_marked(marker)


class GovernedTerminals:
    """`governor.sandbox.Terminals` plus the time window of each command, which the
    attempt uses to attribute workspace changes to governed commands."""

    def __init__(
        self,
        nursery: trio.Nursery,
        policy: Policy,
        agent_env: Mapping[str, str] | None = None,
        proxy: Callable[[], EgressProxy | None] | None = None,
    ) -> None:
        profile = command_profile(policy, agent_env)
        egress = profile.egress

        async def attach(pid: int) -> None:
            found = proxy() if proxy is not None else None
            if found is None or egress is None:
                raise ProfileError("the commands' sandbox needs the egress proxy")
            await found.attach(pid, egress, "command")

        self.inner = Terminals(nursery, profile, bwrap=configured_bwrap(), attach=attach)
        self.windows: dict[str, list[int | None]] = {}

    async def create(
        self,
        command: str,
        args: Sequence[str],
        *,
        env: Mapping[str, str],
        cwd: str,
        output_byte_limit: int | None,
        on_exit: Callable[[Execution], None] | None = None,
    ) -> str:
        started = time.time_ns()
        fallback = self.inner.fallback
        terminal_id = await self.inner.create(
            command, args, env=env, cwd=cwd, output_byte_limit=output_byte_limit, on_exit=on_exit
        )
        if fallback is None and self.inner.fallback is not None:
            log.warning(
                "session_sandbox_unavailable",
                reason=self.inner.fallback,
                effect="each command runs in a bwrap of its own (as strong, slower)",
            )
        self.windows[terminal_id] = [started, None]
        return terminal_id

    def knows(self, terminal_id: str) -> bool:
        """Whether `terminal_id` is a live terminal of the attempt (a lookup: the
        output, up to its byte limit, is rendered only when asked for)."""
        return terminal_id in self.inner

    def output(self, terminal_id: str) -> tuple[str, bool, tuple[int | None, str | None] | None]:
        out = self.inner.output(terminal_id)
        status = out.exit_status
        if status is not None:
            self._ended(terminal_id)
        return (
            out.output,
            out.truncated,
            None if status is None else (status.exit_code, status.signal),
        )

    async def wait_for_exit(self, terminal_id: str) -> tuple[int | None, str | None]:
        status = await self.inner.wait_for_exit(terminal_id)
        self._ended(terminal_id)
        return status.exit_code, status.signal

    async def kill(self, terminal_id: str) -> None:
        self.inner.kill(terminal_id)

    async def release(self, terminal_id: str) -> None:
        await self.inner.release(terminal_id)
        self._ended(terminal_id)

    def _ended(self, terminal_id: str) -> None:
        window = self.windows.get(terminal_id)
        if window is not None and window[1] is None:
            window[1] = time.time_ns()

    async def close(self) -> None:
        await self.inner.close()
        now = time.time_ns()
        for window in self.windows.values():
            if window[1] is None:
                window[1] = now


def command_windows(terminals: Any) -> list[tuple[int, int | None]]:
    """(start, end) of each governed command, for attributing changes."""
    if not isinstance(terminals, GovernedTerminals):
        return []
    return [(a, b) for a, b in terminals.windows.values() if a is not None]
