"""The survey on real directories: what gets pinned, stubbed, followed and masked."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from governor.policies.capability import Capability
from governor.sandbox.host.survey import home_parents, other_homes, survey
from governor.sandbox.plan.profile import HomeFolder, HomesParent, Profile, ProfileError
from governor.sandbox.plan.protected import GIT_DIR_PROTECTED, PROTECTED_NAMES, SCAN_MAX_DEPTH


def git(*args: str, cwd: Path) -> None:
    subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-c", "user.email=t@t", "-c", "user.name=t", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
    )


def edit(ws: Path, **kw: object) -> Profile:
    return Profile(capability=Capability.EDIT_WORKSPACE, workspace=ws, home=ws.parent / "home", **kw)  # type: ignore[arg-type]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    root = tmp_path / "ws"
    root.mkdir()
    git("init", "-q", cwd=root)
    return root


def test_where_commits_are_allowed_the_git_dir_is_bound_over_itself_and_its_code_is_pinned(
    ws: Path,
) -> None:
    facts = survey(edit(ws))
    git_dir = ws / ".git"
    assert str(git_dir) in facts.ancestors  # a mount point: mv .git and rm -r .git fail
    assert str(git_dir) not in facts.pins
    for name in GIT_DIR_PROTECTED:
        assert str(git_dir / name) in facts.pins
    for name in ("config.worktree", "modules", "worktrees", "commondir"):  # git init makes none
        assert str(git_dir / name) in facts.stubs
    for name in ("config", "hooks", "info"):
        assert str(git_dir / name) not in facts.stubs
    for name in ("HEAD", "refs", "index", "logs"):
        assert not any(p.startswith(str(git_dir / name)) for p in facts.pins)
    assert sorted(p for p in facts.pins if p.startswith(str(git_dir / "objects"))) == [
        str(git_dir / "objects" / "info" / "alternates"),
        str(git_dir / "objects" / "info" / "http-alternates"),
    ]  # the rest of objects/ is where commits go
    for name in PROTECTED_NAMES:
        if name != ".git":  # a missing folder on the way is held as a whole
            first = str(ws / name.split("/")[0])
            assert first in facts.stubs
            assert first in facts.pins


def test_with_git_read_only_the_git_dir_is_pinned_whole_and_missing_names_get_stubs(
    ws: Path,
) -> None:
    facts = survey(edit(ws, git_read_only=True))
    assert str(ws / ".git") in facts.pins
    assert str(ws / ".git") not in facts.stubs
    for name in PROTECTED_NAMES:
        if name != ".git":  # a missing folder on the way is held as a whole
            assert str(ws / name.split("/")[0]) in facts.stubs
            assert str(ws / name.split("/")[0]) in facts.pins
    assert not any(p.startswith(str(ws / ".git") + "/") for p in facts.pins)
    assert facts.ancestors == ()


def test_a_git_dir_with_a_symlinked_hooks_folder_is_pinned_whole(ws: Path) -> None:
    """A symlink cannot be pinned alone (the link stays replaceable): the repository
    falls back to read-only instead of refusing the whole profile."""
    (ws / "shared-hooks").mkdir()
    shutil.rmtree(ws / ".git" / "hooks")
    (ws / ".git" / "hooks").symlink_to(ws / "shared-hooks")
    facts = survey(edit(ws))
    assert str(ws / ".git") in facts.pins
    assert str(ws / ".git") not in facts.ancestors


def test_a_git_dirs_commondir_is_followed_and_protected_too(ws: Path) -> None:
    common = ws / "common.git"
    git("init", "-q", "--bare", str(common), cwd=ws)
    (ws / ".git" / "commondir").write_text("../common.git\n")
    facts = survey(edit(ws))
    assert str(ws / ".git" / "commondir") in facts.pins  # exists: pinned, not stubbed
    assert str(common) in facts.ancestors
    assert str(common / "hooks") in facts.pins and str(common / "config") in facts.pins


def test_a_missing_nested_protected_path_is_stubbed_at_its_first_missing_component(ws: Path) -> None:
    (ws / "ci").mkdir()
    facts = survey(edit(ws, protected=("ci/deploy/prod.yml", "docs/spec.md")))
    assert str(ws / "ci" / "deploy") in facts.stubs
    assert str(ws / "docs") in facts.stubs
    assert str(ws / "ci") in facts.ancestors


def test_a_file_where_a_protected_directory_would_be_is_pinned_itself(ws: Path) -> None:
    (ws / ".github").write_text("not a dir")
    facts = survey(edit(ws, protected=(".github/workflows",)))
    assert str(ws / ".github") in facts.pins
    assert str(ws / ".github") not in facts.stubs


def test_nested_repositories_get_the_same_rules_and_their_ancestors_are_bound(ws: Path) -> None:
    nested = ws / "vendor" / "lib"
    nested.mkdir(parents=True)
    git("init", "-q", cwd=nested)
    facts = survey(edit(ws))
    assert str(nested / ".git") in facts.ancestors
    assert str(nested / ".git" / "hooks") in facts.pins
    assert str(nested / ".git" / "modules") in facts.stubs
    assert str(ws / "vendor") in facts.ancestors
    assert str(nested) in facts.ancestors
    read_only = survey(edit(ws, git_read_only=True))
    assert str(nested / ".git") in read_only.pins
    assert read_only.ancestors == (str(ws / "vendor"), str(nested))


def test_a_pin_inside_another_pin_is_left_out_and_so_are_ancestors_inside_a_pin(ws: Path) -> None:
    inner = ws / "ci" / "deploy" / "sub"
    inner.mkdir(parents=True)
    git("init", "-q", cwd=inner)
    facts = survey(edit(ws, protected=("ci/deploy",)))
    assert str(ws / "ci" / "deploy") in facts.pins
    assert not any(p.startswith(str(ws / "ci" / "deploy") + "/") for p in facts.pins)
    git_dir = ws / ".git"  # (objects/ and objects/info/ lead to the alternates' pins)
    assert facts.ancestors == (
        str(git_dir), str(ws / "ci"), str(git_dir / "objects"), str(git_dir / "objects" / "info")
    )  # not ci/deploy/sub: inside the pin


def test_the_nested_scan_is_bounded_and_skips_node_modules(ws: Path) -> None:
    shallow = ws / "a" / "b" / "c"
    deep = ws / "a" / "b" / "c" / "d" / "e"
    skipped = ws / "node_modules" / "pkg"
    for path in (shallow, deep, skipped):
        path.mkdir(parents=True, exist_ok=True)
        (path / ".git").mkdir()
    facts = survey(edit(ws))
    found = {*facts.pins, *facts.ancestors}
    assert str(shallow / ".git") in found  # depth 4
    assert SCAN_MAX_DEPTH == 4
    assert str(deep / ".git") not in found  # documented limit
    assert str(skipped / ".git") not in found


def test_a_worktrees_git_dir_inside_a_writable_root_is_opened_inside_the_pinned_worktrees(
    tmp_path: Path,
) -> None:
    (tmp_path / "home").mkdir()
    main = tmp_path / "main"
    main.mkdir()
    git("init", "-q", cwd=main)
    git("commit", "-q", "--allow-empty", "-m", "init", cwd=main)
    worktree = tmp_path / "wt"
    git("worktree", "add", "-q", str(worktree), cwd=main)
    profile = Profile(
        capability=Capability.EDIT_WORKSPACE,
        workspace=worktree,
        extra_roots=(main,),
        home=tmp_path / "home",
    )
    facts = survey(profile)
    gitdir = main / ".git" / "worktrees" / "wt"
    assert str(worktree / ".git") in facts.pins  # the pointer file itself
    assert str(main / ".git" / "worktrees") in facts.pins
    assert str(gitdir) in facts.ancestors  # its HEAD and index: the worktree commits
    assert str(gitdir / "commondir") in facts.pins and str(gitdir / "commondir") not in facts.stubs
    assert str(gitdir / "config.worktree") in facts.stubs
    assert str(main / ".git" / "hooks") in facts.pins  # the common dir's rules
    read_only = survey(replace(profile, git_read_only=True))
    assert str(main / ".git") in read_only.pins
    assert not any(p.startswith(str(main / ".git") + "/") for p in read_only.pins)
    alone = survey(
        Profile(capability=Capability.EDIT_WORKSPACE, workspace=worktree, home=tmp_path / "home")
    )
    assert str(gitdir) in alone.git_dirs  # outside the roots: kept visible, read-only
    assert str(main / ".git") in alone.git_dirs
    assert not any(p.startswith(str(main)) for p in (*alone.pins, *alone.ancestors))


def test_a_submodules_git_dir_is_opened_again_inside_the_pinned_modules(ws: Path, tmp_path: Path) -> None:
    upstream = tmp_path / "upstream"
    upstream.mkdir()
    git("init", "-q", cwd=upstream)
    git("commit", "-q", "--allow-empty", "-m", "up", cwd=upstream)
    git("-c", "protocol.file.allow=always", "submodule", "add", "-q", str(upstream), "lib/up", cwd=ws)
    facts = survey(edit(ws))
    modules = ws / ".git" / "modules"
    assert str(modules) in facts.pins and str(modules) not in facts.stubs
    assert str(modules / "lib" / "up") in facts.ancestors
    for name in ("config", "hooks", "info"):
        assert str(modules / "lib" / "up" / name) in facts.pins
    assert str(ws / "lib" / "up" / ".git") in facts.pins  # the checkout's pointer file
    assert str(ws / ".gitmodules") in facts.pins


def test_a_planted_git_file_cannot_open_a_pinned_path(ws: Path, tmp_path: Path) -> None:
    """Only a real git dir (its HEAD exists) in a git dir's own modules/ or
    worktrees/ is opened again; a pointer into anything else pinned changes nothing."""
    (ws / ".git" / "modules" / "sub" / "hooks").mkdir(parents=True)
    (ws / ".git" / "modules" / "sub" / "modules" / "deep").mkdir(parents=True)
    (ws / ".git" / "modules" / "sub" / "modules" / "deep" / "HEAD").write_text("ref: refs/heads/x\n")
    (ws / "kept" / "repo" / ".git").mkdir(parents=True)
    (ws / "kept" / "repo" / ".git" / "HEAD").write_text("ref: refs/heads/x\n")
    targets = {
        "a": "../.git/hooks",
        "b": "../.git/modules",
        "c": "../.git/modules/sub",  # no HEAD: not a git dir
        "d": "../.git/modules/sub/hooks",
        "e": "../.git/modules/sub/modules",
        "f": "../kept/repo/.git",  # inside a policy's protected folder
        "g": "../.git/info",
    }
    for name, target in targets.items():
        (ws / name).mkdir()
        (ws / name / ".git").write_text(f"gitdir: {target}\n")
    facts = survey(edit(ws, protected=("kept",)))
    opened = set(facts.ancestors)
    for target in targets.values():
        path = os.path.normpath(str(ws / "a" / target))
        assert path not in opened, target
        assert not any(p.startswith(path + "/") for p in (*facts.pins, *facts.ancestors)), target
    # neighbour: a git dir under modules/ with a HEAD is opened, even below another's modules/
    deep = ws / ".git" / "modules" / "sub" / "modules" / "deep"
    (ws / "h").mkdir()
    (ws / "h" / ".git").write_text(f"gitdir: {deep}\n")
    assert str(deep) in survey(edit(ws, protected=("kept",))).ancestors


def test_a_symlinked_protected_path_is_refused_by_name(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    (ws / ".vscode").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ProfileError, match=r"\.vscode is a symlink"):
        survey(edit(ws))
    assert survey(Profile(capability=Capability.READ_ONLY, workspace=ws, home=tmp_path / "home"))


def test_env_files_are_masked_at_any_capability_but_an_env_directory_is_not(ws: Path, tmp_path: Path) -> None:
    (ws / ".env").write_text("TOKEN=1")
    (ws / "svc").mkdir()
    (ws / "svc" / ".env.production").write_text("TOKEN=2")
    (ws / "venv-like").mkdir()
    (ws / "venv-like" / ".env").mkdir()
    (ws / "env.example").write_text("TOKEN=")
    for capability in (Capability.READ_ONLY, Capability.EDIT_WORKSPACE):
        facts = survey(Profile(capability=capability, workspace=ws, home=tmp_path / "home"))
        assert set(facts.hidden) == {str(ws / ".env"), str(ws / "svc" / ".env.production")}


def test_a_symlinked_env_file_is_masked_at_its_target(ws: Path, tmp_path: Path) -> None:
    (ws / "config").mkdir()
    (ws / "config" / "prod.secrets").write_text("TOKEN=3")
    (ws / ".env").symlink_to(ws / "config" / "prod.secrets")
    facts = survey(edit(ws))
    assert str(ws / "config" / "prod.secrets") in facts.hidden


def test_an_env_target_already_under_a_private_tmpfs_needs_no_mask(ws: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside.env"  # under /tmp: the sandbox's /tmp is empty
    outside.write_text("TOKEN=4")
    (ws / ".env").symlink_to(outside)
    assert str(outside).startswith("/tmp/")
    assert survey(edit(ws)).hidden == ()


def test_read_only_surveys_pin_nothing(ws: Path, tmp_path: Path) -> None:
    facts = survey(Profile(capability=Capability.READ_ONLY, workspace=ws, home=tmp_path / "home"))
    assert facts.pins == () and facts.stubs == () and facts.ancestors == ()


def test_home_folders_are_mounted_only_when_they_exist(tmp_path: Path, ws: Path) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir()
    profile = edit(ws, home_folders=(HomeFolder(".claude", True), HomeFolder(".codex", True)))
    facts = survey(profile)
    assert [m.dest for m in facts.home_mounts] == [str(home / ".claude")]
    assert facts.home == str(home)


def test_a_missing_root_or_cwd_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="nope"):
        survey(Profile(capability=Capability.READ_ONLY, workspace=tmp_path / "nope"))
    with pytest.raises(ProfileError, match="gone"):
        survey(
            Profile(capability=Capability.READ_ONLY, workspace=tmp_path, cwd=tmp_path / "gone")
        )


def test_the_caller_home_comes_from_the_password_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import pwd

    monkeypatch.setenv("HOME", str(tmp_path))
    facts = survey(Profile(capability=Capability.READ_ONLY, workspace=tmp_path))
    assert facts.home_env == pwd.getpwuid(os.getuid()).pw_dir


def test_the_scans_hidden_name_pattern_agrees_with_is_hidden_name() -> None:
    from governor.sandbox.host.survey import _HIDDEN_NAME
    from governor.sandbox.plan.protected import is_hidden_name

    names = [".env", ".env.local", ".env.", ".envrc", "env", "x.env", ".Env", ".env\n", "a", ""]
    for name in names:
        assert bool(_HIDDEN_NAME.match(name)) == is_hidden_name(name), name


def test_the_passwd_home_is_hidden_when_home_is_elsewhere_and_the_workspace_inside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The two-homes case: ``HOME=/github/home`` while the workspace lies under
    the password database's home (``~/src/proj``): that home gets its tmpfs all
    the same, the workspace bound back on top. A home inside a root is left to
    the root's rules."""
    passwd_home, ci_home = tmp_path / "passwd-home", tmp_path / "ci-home"
    root = passwd_home / "src" / "proj"
    (root / "home").mkdir(parents=True)
    ci_home.mkdir()
    # the module, not the function `governor.sandbox.host.survey` that the package exports
    monkeypatch.setattr(sys.modules["governor.sandbox.host.survey"], "caller_home", lambda uid: str(passwd_home))
    monkeypatch.setenv("HOME", str(ci_home))
    # (`survey` leaves out homes under its private /tmp, as tmp_path is: asked directly)
    assert other_homes(str(ci_home), os.getuid(), (str(root),)) == (str(passwd_home),)
    monkeypatch.setenv("HOME", str(root / "home"))
    assert other_homes(str(ci_home), os.getuid(), (str(root),)) == (str(passwd_home),)


def test_a_parent_of_homes_keeps_its_neighbours_and_links_but_no_home(tmp_path: Path) -> None:
    """One listing decides: a folder called a home is never bound back; the
    person's own home is left to its own tmpfs; a link is made again as it
    reads; a parent inside a foreign or own home, or a root, is no parent."""
    parent = tmp_path / "home"
    parent.mkdir()
    (parent / "v").symlink_to("/data/v")
    listing = (
        (f"{parent}/bob", "dir"),
        (f"{parent}/me", "dir"),
        (f"{parent}/linuxbrew", "dir"),
        (f"{parent}/README", "other"),
        (f"{parent}/v", "link"),
        (f"{parent}/gone", "link"),
    )
    listings = {
        str(parent): listing,
        f"{parent}/bob": ((f"{parent}/bob/x", "dir"),),
        f"{parent}/me": ((f"{parent}/me/x", "dir"),),
        "/": (("/root", "dir"),),
        "/ws": (("/ws/y", "dir"),),
    }
    foreign = (f"{parent}/bob", f"{parent}/bob/x", f"{parent}/me/x", "/root", "/ws/y")
    found = home_parents(listings, foreign, (f"{parent}/me",), ("/ws",))
    assert found == (
        HomesParent(
            str(parent),
            kept=(f"{parent}/linuxbrew", f"{parent}/README"),
            links=((f"{parent}/v", "/data/v"),),
        ),
    )


def test_the_survey_hides_home_by_one_tmpfs_and_binds_back_a_root_inside_it(
    tmp_path: Path,
) -> None:
    """On this host: ``/home`` is a parent whose homes are all hidden, and a
    workspace inside another's home stays a root."""
    if not os.access("/home", os.W_OK):
        pytest.skip("making a home under /home needs root")
    home = Path("/home") / f"govsurvey-{os.getpid()}"
    (home / "proj").mkdir(parents=True)
    try:
        facts = survey(Profile(capability=Capability.EDIT_WORKSPACE, workspace=home / "proj"))
        parent = next(p for p in facts.home_parents if p.path == os.path.realpath("/home"))
        assert str(home) in facts.foreign_homes and str(home) not in parent.kept
        assert not set(parent.kept) & set(facts.foreign_homes)
        assert str(home / "proj") in facts.roots
    finally:
        shutil.rmtree(home)


def test_a_masked_folder_is_concealed_and_a_masked_file_covered(ws: Path, tmp_path: Path) -> None:
    if not os.access("/srv", os.W_OK):  # a folder beside the homes: root's to make
        pytest.skip("making a folder under /srv needs root")
    source = Path("/srv") / f"survey-source-{os.getpid()}"
    source.mkdir()
    try:
        (source / "fix.txt").write_text("the answer\n")
        key = source / "key"
        key.write_text("a key\n")
        facts = survey(edit(ws, masked=(str(source), str(key))))
        assert str(source) in facts.concealed  # an empty folder inside
        assert str(key) in facts.host_secrets  # a file: /dev/null over it, as before
    finally:
        shutil.rmtree(source)


def test_the_state_folder_is_concealed_outside_the_home_and_the_attempts_own_folder_kept(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not os.access("/srv", os.W_OK):  # a folder beside the homes: root's to make
        pytest.skip("making a folder under /srv needs root")
    state = Path("/srv") / f"survey-state-{os.getpid()}"
    own = state / "acp-governor" / "attempts" / "mcp-1"
    own.mkdir(parents=True)
    try:
        monkeypatch.setenv("XDG_STATE_HOME", str(state))
        with socket.socket(socket.AF_UNIX) as listening:
            listening.bind(str(own / "governor.sock"))  # the relay's, found by no socket scan
            facts = survey(edit(ws, own=(own,)))
        assert str(state / "acp-governor") in facts.concealed
        assert facts.own == (str(own),)
        assert str(own / "governor.sock") not in facts.sockets  # not covered: the agent's own
    finally:
        shutil.rmtree(state)


def test_what_runs_code_in_a_writable_home_folder_is_pinned_and_a_missing_name_stubbed(
    tmp_path: Path, ws: Path
) -> None:
    home = tmp_path / "home"
    (home / ".claude" / "plugins" / "cache").mkdir(parents=True)
    (home / ".claude" / "settings.json").write_text("{}")
    (home / ".claude.json").write_text("{}")
    profile = edit(
        ws,
        home_folders=(HomeFolder(".claude", True), HomeFolder(".claude.json", True)),
        home_runs_code=(".claude.json", ".claude/settings.json", ".claude/hooks", ".claude/plugins/cache/x"),
    )
    facts = survey(profile)
    c = str(home / ".claude")
    assert facts.home_pins == (
        (f"{c}/settings.json", f"{c}/settings.json"),
        (f"{c}/hooks", f"{c}/hooks"),
        (f"{c}/plugins/cache/x", f"{c}/plugins/cache/x"),
    )
    assert facts.home_stubs == (f"{c}/hooks", f"{c}/plugins/cache/x")
    # the folders on the way to a deeper pin are bound over themselves: not movable
    assert facts.home_opened == ((f"{c}/plugins", f"{c}/plugins"), (f"{c}/plugins/cache", f"{c}/plugins/cache"))
    mounts = {m.dest: (m.writable, m.throwaway) for m in facts.home_mounts}
    assert mounts == {c: (True, False), str(home / ".claude.json"): (True, True)}


def test_a_link_where_a_home_file_runs_code_is_refused_by_name(tmp_path: Path, ws: Path) -> None:
    home = tmp_path / "home"
    (home / ".claude").mkdir()
    (tmp_path / "dotfiles.json").write_text("{}")
    (home / ".claude" / "settings.json").symlink_to(tmp_path / "dotfiles.json")
    profile = edit(
        ws, home_folders=(HomeFolder(".claude", True),), home_runs_code=(".claude/settings.json",)
    )
    with pytest.raises(ProfileError, match=r"settings\.json is a symbolic link.*cannot be held read-only"):
        survey(profile)
    # read-only home folders hold nothing: nothing there can change
    survey(replace(profile, home_folders=(HomeFolder(".claude", False),)))
