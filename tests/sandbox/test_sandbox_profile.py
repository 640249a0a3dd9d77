"""Profile -> bwrap argv, pure: synthetic host facts, no filesystem, no bwrap."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from governor.policies.capability import Capability
from governor.policies.limits import Limits
from governor.sandbox.plan.bwrap_argv import environment, render
from governor.sandbox.plan.profile import (
    BwrapFeatures,
    HomeFolder,
    HomeMount,
    HomesParent,
    HostFacts,
    Profile,
    ProfileError,
    ancestors_between,
)

WS = "/home/u/src/proj"
FACTS = HostFacts(
    home="/home/u",
    home_env="/home/u",
    uid=1000,
    roots=(WS,),
    cwd=WS,
    private_dirs=("/tmp", "/var/tmp"),
    run_user_dir="/run/user/1000",
    sockets=("/run/docker.sock",),
    ancestors=(f"{WS}/vendor",),
    pins=(f"{WS}/.git", f"{WS}/.codex", f"{WS}/vendor/lib/.git"),
    stubs=(f"{WS}/.codex",),
    hidden=(f"{WS}/.env",),
)
ALL = BwrapFeatures()


def profile(capability: Capability = Capability.EDIT_WORKSPACE, **kw: object) -> Profile:
    return Profile(capability=capability, workspace=Path(WS), **kw)  # type: ignore[arg-type]


def pairs(argv: list[str], option: str) -> list[str]:
    """The first argument of every occurrence of ``option``."""
    return [argv[i + 1] for i, a in enumerate(argv) if a == option]


def position(argv: list[str], *words: str) -> int:
    for i in range(len(argv) - len(words) + 1):
        if tuple(argv[i : i + len(words)]) == words:
            return i
    raise AssertionError(f"{words} not in argv")


def test_every_namespace_is_unshared_and_privileges_dropped() -> None:
    argv = render(profile(), FACTS, ALL, seccomp_fd=9)
    for flag in (
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--assert-userns-disabled",
        "--die-with-parent",
        "--new-session",
        "--clearenv",
    ):
        assert flag in argv
    assert position(argv, "--cap-drop", "ALL") >= 0
    assert position(argv, "--seccomp", "9") >= 0
    assert "--share-net" not in argv


def test_network_is_shared_only_when_the_profile_enables_it() -> None:
    assert "--share-net" in render(profile(network=True), FACTS, ALL, seccomp_fd=9)
    assert "--share-net" not in render(profile(network=False), FACTS, ALL, seccomp_fd=9)


def test_the_environment_is_cleared_and_holds_only_the_basics_and_the_declared() -> None:
    argv = render(profile(env={"CI": "1"}), FACTS, ALL, seccomp_fd=9)
    assert position(argv, "--clearenv") < position(argv, "--setenv", "PATH")
    assert sorted(pairs(argv, "--setenv")) == ["CI", "HOME", "LANG", "PATH", "TERM"]
    assert position(argv, "--setenv", "HOME", "/home/u") >= 0


def test_the_root_is_read_only_and_home_tmp_and_run_user_are_fresh_tmpfs() -> None:
    argv = render(profile(), FACTS, ALL, seccomp_fd=9)
    assert position(argv, "--ro-bind", "/", "/") < position(argv, "--tmpfs", "/tmp")
    assert set(pairs(argv, "--tmpfs")) == {
        "/tmp", "/var/tmp", "/home/u", "/run/user/1000", "/dev/shm"
    }
    assert position(argv, "--dev", "/dev") >= 0
    assert position(argv, "--proc", "/proc") >= 0


def test_dev_is_read_only_once_its_mounts_are_made_and_dev_shm_is_sized_at_the_memory_limit() -> None:
    """bwrap's ``--dev`` is a tmpfs without ``--size`` the sandbox's user may
    write: ``/dev/shm`` is a tmpfs of its own, sized at ``memory``, and
    ``/dev`` is remounted read-only after every other mount."""
    argv = render(profile(limits=Limits(memory=1 << 29, tmp=1 << 24)), FACTS, ALL, seccomp_fd=9)
    shm = position(argv, "--tmpfs", "/dev/shm")
    assert position(argv, "--dev", "/dev") < shm
    assert argv[shm - 2 : shm] == ["--size", str(1 << 29)]
    remount = position(argv, "--remount-ro", "/dev")
    assert remount > max(i for i, a in enumerate(argv) if a in ("--tmpfs", "--bind", "--ro-bind"))


def test_the_workspace_is_bound_after_the_home_tmpfs_that_would_hide_it() -> None:
    argv = render(profile(), FACTS, ALL, seccomp_fd=9)
    assert position(argv, "--tmpfs", "/home/u") < position(argv, "--bind", WS, WS)


def test_other_homes_under_a_parent_get_its_one_tmpfs_and_no_mount_point_of_their_own() -> None:
    """No mount point of a foreign home is made at start (one gone since the
    survey failed it); the parent's other entries come back, then the
    person's own home gets its tmpfs inside, then the workspace."""
    parent = HomesParent(
        "/home", kept=("/home/linuxbrew", "/home/README"), links=(("/home/v", "/data/v"),)
    )
    facts = replace(
        FACTS,
        foreign_homes=("/home/bob", "/home/bob/inner", "/root"),
        home_parents=(parent,),
    )
    argv = render(profile(), facts, ALL, seccomp_fd=9)
    tmpfs = pairs(argv, "--tmpfs")
    assert "/home" in tmpfs and "/root" in tmpfs  # / is no parent: /root keeps its own
    assert "/home/bob" not in tmpfs and "/home/bob/inner" not in tmpfs
    assert "/home/bob" not in argv
    assert pairs(argv, "--ro-bind-try")[-2:] == ["/home/linuxbrew", "/home/README"]
    assert position(argv, "--tmpfs", "/home") < position(argv, "--ro-bind-try", "/home/linuxbrew")
    assert position(argv, "--symlink", "/data/v", "/home/v") < position(argv, "--tmpfs", "/home/u")
    assert position(argv, "--tmpfs", "/home/u") < position(argv, "--bind", WS, WS)
    outside = replace(facts, home_parents=())  # no parent found: each home as before
    assert "/home/bob" in pairs(render(profile(), outside, ALL, seccomp_fd=9), "--tmpfs")


def test_host_daemon_sockets_are_covered_with_dev_null_after_the_visible_paths() -> None:
    facts = replace(FACTS, sockets=("/srv/app/x.sock",), visible=("/srv/app",))
    argv = render(profile(), facts, ALL, seccomp_fd=9)
    assert position(argv, "--ro-bind", "/dev/null", "/srv/app/x.sock") > position(
        argv, "--ro-bind", "/srv/app", "/srv/app"
    )


def test_edit_workspace_binds_roots_writable_then_pins_protected_paths_read_only() -> None:
    argv = render(profile(), FACTS, ALL, seccomp_fd=9)
    bind = position(argv, "--bind", WS, WS)
    for pin in FACTS.pins:
        assert position(argv, "--ro-bind", pin, pin) > bind


def test_pins_use_the_checked_descriptor_when_bwrap_supports_it() -> None:
    fds = {f"{WS}/.git": 11, f"{WS}/.codex": 12}
    argv = render(profile(), FACTS, ALL, seccomp_fd=9, pin_fds=fds)
    assert position(argv, "--ro-bind-fd", "11", f"{WS}/.git") >= 0
    assert position(argv, "--ro-bind-fd", "12", f"{WS}/.codex") >= 0
    old = replace(ALL, ro_bind_fd=False)
    argv = render(profile(), FACTS, old, seccomp_fd=9, pin_fds=fds)
    assert "--ro-bind-fd" not in argv
    assert position(argv, "--ro-bind", f"{WS}/.git", f"{WS}/.git") >= 0


def test_ancestors_of_nested_pins_become_mount_points_before_the_pins() -> None:
    argv = render(profile(), FACTS, ALL, seccomp_fd=9)
    ancestor = position(argv, "--bind", f"{WS}/vendor", f"{WS}/vendor")
    nested = f"{WS}/vendor/lib/.git"
    assert position(argv, "--bind", WS, WS) < ancestor < position(argv, "--ro-bind", nested, nested)


def test_self_binds_and_pins_mount_outer_first_so_a_submodules_git_dir_opens_inside_modules() -> None:
    git = f"{WS}/.git"
    sub = f"{git}/modules/sub"
    facts = replace(
        FACTS,
        ancestors=(git, sub),
        pins=(f"{git}/config", f"{git}/modules", f"{sub}/config"),
        stubs=(),
    )
    argv = render(profile(), facts, ALL, seccomp_fd=9)
    order = [
        position(argv, "--bind", git, git),
        position(argv, "--ro-bind", f"{git}/modules", f"{git}/modules"),
        position(argv, "--bind", sub, sub),
        position(argv, "--ro-bind", f"{sub}/config", f"{sub}/config"),
    ]
    assert order == sorted(order)
    assert position(argv, "--bind", git, git) < position(argv, "--ro-bind", f"{git}/config", f"{git}/config")


def test_a_sealed_stub_gets_no_mount_but_its_neighbours_and_ancestors_still_do() -> None:
    facts = replace(FACTS, pins=(*FACTS.pins, f"{WS}/vendor/lib/.claude"))
    argv = render(profile(), facts, ALL, seccomp_fd=9, sealed={f"{WS}/.codex", f"{WS}/vendor/lib/.claude"})
    for stub in (f"{WS}/.codex", f"{WS}/vendor/lib/.claude"):
        assert argv.count(stub) == 1  # no mount, only the sandbox's lock on it
        assert position(argv, "--lock-file", stub) >= 0
    assert position(argv, "--ro-bind", f"{WS}/.git", f"{WS}/.git") >= 0
    assert position(argv, "--bind", f"{WS}/vendor", f"{WS}/vendor") >= 0  # no rename of the parent
    unsealed = render(profile(), facts, ALL, seccomp_fd=9)
    assert position(unsealed, "--ro-bind", f"{WS}/.codex", f"{WS}/.codex") >= 0


def test_read_only_binds_the_roots_read_only_and_needs_no_pins() -> None:
    argv = render(profile(Capability.READ_ONLY), FACTS, ALL, seccomp_fd=9)
    assert position(argv, "--ro-bind", WS, WS) >= 0
    assert WS not in pairs(argv, "--bind")
    assert f"{WS}/.git" not in pairs(argv, "--ro-bind")


def test_hidden_files_are_masked_last_at_every_capability() -> None:
    for capability in (Capability.READ_ONLY, Capability.EDIT_WORKSPACE):
        argv = render(profile(capability), FACTS, ALL, seccomp_fd=9)
        mask = position(argv, "--ro-bind", "/dev/null", f"{WS}/.env")
        assert mask > position(argv, "--ro-bind" if capability == Capability.READ_ONLY else "--bind", WS, WS)


def test_home_folders_are_bound_on_top_of_the_empty_home_with_their_mode() -> None:
    facts = replace(
        FACTS,
        home_mounts=(
            HomeMount("/home/u/.claude", "/home/u/.claude", True),
            HomeMount("/opt/rustup", "/home/u/.rustup", False),
        ),
    )
    argv = render(profile(), facts, ALL, seccomp_fd=9)
    home = position(argv, "--tmpfs", "/home/u")
    assert position(argv, "--bind", "/home/u/.claude", "/home/u/.claude") > home
    assert position(argv, "--ro-bind", "/opt/rustup", "/home/u/.rustup") > home


def test_what_runs_code_in_a_home_folder_is_pinned_after_it_and_a_home_file_that_does_is_a_copy() -> None:
    c = "/home/u/.claude"
    facts = replace(
        FACTS,
        home_mounts=(
            HomeMount(c, c, True),
            HomeMount("/home/u/.claude.json", "/home/u/.claude.json", True, throwaway=True),
        ),
        home_pins=(
            (f"{c}/settings.json", f"{c}/settings.json"),
            (f"{c}/hooks", f"{c}/hooks"),
            (f"{c}/plugins/x", f"{c}/plugins/x"),
        ),
        home_stubs=(f"{c}/hooks",),
        home_opened=((f"{c}/plugins", f"{c}/plugins"),),
    )
    argv = render(
        profile(), facts, ALL, seccomp_fd=9, pin_fds={f"{c}/settings.json": 7},
        sealed={f"{c}/hooks"}, throwaway_fds={"/home/u/.claude.json": 8},
    )  # fmt: skip
    folder = position(argv, "--bind", c, c)
    assert position(argv, "--ro-bind-fd", "7", f"{c}/settings.json") > folder
    assert position(argv, "--lock-file", f"{c}/hooks") > folder  # a sealed stub needs no mount
    assert folder < position(argv, "--bind", f"{c}/plugins", f"{c}/plugins") < position(
        argv, "--ro-bind", f"{c}/plugins/x", f"{c}/plugins/x"
    )
    assert position(argv, "--perms", "0600", "--bind-data", "8", "/home/u/.claude.json") > 0
    assert "/home/u/.claude.json" not in pairs(argv, "--bind")
    # at read-only too: the agent's home folders are writable at every capability
    ro = render(profile(Capability.READ_ONLY), facts, ALL, seccomp_fd=9)
    assert position(ro, "--ro-bind", f"{c}/settings.json", f"{c}/settings.json") > 0
    # without its copy, a home file that runs code is bound read-only, never writable
    assert position(ro, "--ro-bind", "/home/u/.claude.json", "/home/u/.claude.json") > 0


def test_userns_flags_are_left_out_when_bwrap_lacks_them() -> None:
    argv = render(profile(), FACTS, replace(ALL, disable_userns=False), seccomp_fd=9)
    assert "--disable-userns" not in argv
    assert "--assert-userns-disabled" not in argv


def test_a_session_sandbox_keeps_three_capabilities_for_its_fork_server_only() -> None:
    argv = render(profile(), FACTS, ALL, seccomp_fd=None, fork_server=True)
    drop = position(argv, "--cap-drop", "ALL")
    added = [argv[i + 1] for i, word in enumerate(argv) if word == "--cap-add"]
    assert added == ["CAP_SYS_ADMIN", "CAP_SETPCAP", "CAP_SYS_RESOURCE"]
    assert drop < argv.index("--cap-add")
    # the server installs the filter and the user namespace limit itself
    assert "--seccomp" not in argv and "--disable-userns" not in argv
    # everything else is the command's profile, pins included
    plain = render(profile(), FACTS, ALL, seccomp_fd=9)
    assert pairs(argv, "--ro-bind") == pairs(plain, "--ro-bind")
    assert pairs(argv, "--bind") == pairs(plain, "--bind")


def test_host_wide_proc_knobs_are_bound_read_only_after_the_fresh_proc() -> None:
    argv = render(profile(), FACTS, ALL, seccomp_fd=9)
    proc = position(argv, "--proc", "/proc")
    for knob in ("/proc/sys", "/proc/sysrq-trigger", "/proc/irq", "/proc/bus"):
        assert position(argv, "--ro-bind-try", knob, knob) > proc
    # a fork server covers them in each command's own /proc (governor.sandbox.standalone.forkserver)
    served = render(profile(), FACTS, ALL, seccomp_fd=None, fork_server=True)
    assert "/proc/sys" not in served


def test_a_filter_is_required_unless_a_fork_server_installs_it() -> None:
    with pytest.raises(ProfileError, match="seccomp filter is required"):
        render(profile(), FACTS, ALL, seccomp_fd=None)
    with pytest.raises(ProfileError, match="seccomp filter is required"):
        render(profile(), FACTS, ALL, seccomp_fd=9, fork_server=True)


def test_a_bwrap_without_seccomp_is_refused() -> None:
    with pytest.raises(ProfileError, match="--seccomp"):
        render(profile(), FACTS, replace(ALL, seccomp=False), seccomp_fd=9)


@pytest.mark.parametrize(
    ("root", "culprit"),
    [("/", "'/'"), ("/home/u", "home"), ("/home", "home")],
)
def test_a_root_that_is_or_contains_home_or_is_slash_is_refused(root: str, culprit: str) -> None:
    facts = replace(FACTS, roots=(root,), cwd=root)
    for capability in (Capability.READ_ONLY, Capability.EDIT_WORKSPACE):
        with pytest.raises(ProfileError, match=culprit):
            render(profile(capability), facts, ALL, seccomp_fd=9)


def test_a_writable_root_inside_a_system_directory_is_refused_but_read_only_is_fine() -> None:
    facts = replace(FACTS, roots=("/usr/share/doc",), cwd="/usr/share/doc")
    with pytest.raises(ProfileError, match="/usr"):
        render(profile(), facts, ALL, seccomp_fd=9)
    assert render(profile(Capability.READ_ONLY), facts, ALL, seccomp_fd=9)


def test_a_working_directory_outside_the_roots_is_refused() -> None:
    with pytest.raises(ProfileError, match="outside the roots"):
        render(profile(), replace(FACTS, cwd="/srv"), ALL, seccomp_fd=9)
    argv = render(profile(), replace(FACTS, cwd=f"{WS}/src"), ALL, seccomp_fd=9)
    assert position(argv, "--chdir", f"{WS}/src") >= 0


def test_full_access_has_no_sandbox_argv() -> None:
    with pytest.raises(ProfileError, match="full-access"):
        render(profile(Capability.FULL_ACCESS), FACTS, ALL, seccomp_fd=9)


@pytest.mark.parametrize("name", ["1BAD", "A-B", "A=B", ""])
def test_an_invalid_environment_name_is_refused_by_name(name: str) -> None:
    with pytest.raises(ProfileError, match="environment name"):
        profile(env={name: "x"})


def test_an_environment_value_with_nul_is_refused_without_echoing_it() -> None:
    with pytest.raises(ProfileError) as info:
        profile(env={"TOKEN": "sekrit\0x"})
    assert "sekrit" not in str(info.value)


@pytest.mark.parametrize("rel", ["../x", "/etc/passwd", "a/../../b", ""])
def test_protected_and_hidden_extras_must_be_plain_relative_paths(rel: str) -> None:
    with pytest.raises(ProfileError):
        profile(protected=(rel,))
    with pytest.raises(ProfileError):
        HomeFolder(rel)


def test_a_relative_workspace_is_refused() -> None:
    with pytest.raises(ProfileError, match="absolute"):
        Profile(capability=Capability.READ_ONLY, workspace=Path("proj"))


def test_an_agent_profile_keeps_its_folders_writable_and_has_network() -> None:
    agent = Profile.for_agent(
        Capability.EDIT_WORKSPACE,
        Path(WS),
        home_folders=(".claude", ".npm"),
        install=(Path("/tmp/npx/claude-acp"),),
        env={"ANTHROPIC_API_KEY": "k"},
    )
    assert agent.network
    assert agent.home_folders == (HomeFolder(".claude", True), HomeFolder(".npm", True))
    assert agent.visible == (Path("/tmp/npx/claude-acp"),)
    facts = replace(FACTS, visible=("/tmp/npx/claude-acp",))
    argv = render(agent, facts, ALL, seccomp_fd=9)
    assert "--share-net" in argv
    assert position(argv, "--ro-bind", "/tmp/npx/claude-acp", "/tmp/npx/claude-acp") > position(
        argv, "--tmpfs", "/tmp"
    )
    assert "--disable-userns" in argv


def test_an_agent_path_is_passed_through_as_the_visible_entries() -> None:
    agent = Profile.for_agent(
        Capability.EDIT_WORKSPACE, Path(WS), env={"PATH": "/home/u/.local/bin:/usr/bin", "A": "1"}
    )
    assert agent.path == "/home/u/.local/bin:/usr/bin" and "PATH" not in agent.env
    facts = replace(FACTS, path="/usr/bin")  # what the survey found visible
    assert environment(agent, facts)["PATH"] == "/usr/bin"
    declared = agent.with_command(env={"PATH": "/opt/bin"})
    assert environment(declared, facts)["PATH"] == "/opt/bin"  # a declared PATH wins


def test_with_command_adds_cwd_and_env_without_touching_the_base() -> None:
    base = profile(env={"A": "1"})
    one = base.with_command(cwd=Path(f"{WS}/src"), env={"B": "2"})
    assert one.env == {"A": "1", "B": "2"}
    assert one.cwd == Path(f"{WS}/src")
    assert base.env == {"A": "1"} and base.cwd is None


def test_ancestors_between_lists_the_directories_strictly_inside() -> None:
    assert ancestors_between("/w", "/w/a/b/.git") == ["/w/a", "/w/a/b"]
    assert ancestors_between("/w", "/w/.git") == []


@pytest.mark.parametrize("visible", ["/", "/home", "/home/u"])
def test_a_visible_install_path_may_not_expose_the_home_directory(visible: str) -> None:
    with pytest.raises(ProfileError, match="home directory"):
        render(profile(), replace(FACTS, visible=(visible,)), ALL, seccomp_fd=9)
    assert render(profile(), replace(FACTS, visible=("/home/u/.nvm/versions/node",)), ALL, seccomp_fd=9)


def test_unix_sockets_are_allowed_exactly_where_the_network_namespace_is_its_own() -> None:
    assert profile().unix_sockets
    assert not profile(network=True).unix_sockets
    assert not Profile.for_agent(Capability.EDIT_WORKSPACE, Path(WS)).unix_sockets


def test_an_attempts_own_folder_is_bound_back_read_only_after_the_concealed_folder_that_hides_all() -> None:
    attempts = "/srv/state/acp-governor"
    own = f"{attempts}/attempts/mcp-1"
    facts = replace(FACTS, concealed=(attempts,), own=(own,))
    argv = render(profile(own=(Path(own),)), facts, ALL, seccomp_fd=9)
    assert position(argv, "--tmpfs", attempts) < position(argv, "--ro-bind", own, own)
    assert position(argv, "--ro-bind", own, own) < position(argv, "--bind", WS, WS)
