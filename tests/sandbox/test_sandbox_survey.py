"""The survey on real directories: what gets pinned, stubbed, followed and masked."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from policies.capability import Capability
from sandbox.profile import HomeFolder, Profile, ProfileError
from sandbox.protected import PROTECTED_NAMES, SCAN_MAX_DEPTH
from sandbox.survey import other_homes, survey


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


def test_an_existing_git_dir_is_pinned_whole_and_missing_names_get_stubs(ws: Path) -> None:
    facts = survey(edit(ws))
    assert str(ws / ".git") in facts.pins
    assert str(ws / ".git") not in facts.stubs
    for name in PROTECTED_NAMES:
        if name != ".git":
            assert str(ws / name) in facts.stubs
            assert str(ws / name) in facts.pins
    assert not any(p.startswith(str(ws / ".git") + "/") for p in facts.pins)


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


def test_nested_repositories_are_pinned_with_their_ancestors(ws: Path) -> None:
    nested = ws / "vendor" / "lib"
    nested.mkdir(parents=True)
    git("init", "-q", cwd=nested)
    facts = survey(edit(ws))
    assert str(nested / ".git") in facts.pins
    assert str(ws / "vendor") in facts.ancestors
    assert str(nested) in facts.ancestors


def test_a_pin_inside_another_pin_is_left_out_and_so_are_ancestors_inside_a_pin(ws: Path) -> None:
    inner = ws / "ci" / "deploy" / "sub"
    inner.mkdir(parents=True)
    git("init", "-q", cwd=inner)
    facts = survey(edit(ws, protected=("ci/deploy",)))
    assert str(ws / "ci" / "deploy") in facts.pins
    assert not any(p.startswith(str(ws / "ci" / "deploy") + "/") for p in facts.pins)
    assert facts.ancestors == (str(ws / "ci"),)  # not ci/deploy/sub: inside the pin


def test_the_nested_scan_is_bounded_and_skips_node_modules(ws: Path) -> None:
    shallow = ws / "a" / "b" / "c"
    deep = ws / "a" / "b" / "c" / "d" / "e"
    skipped = ws / "node_modules" / "pkg"
    for path in (shallow, deep, skipped):
        path.mkdir(parents=True, exist_ok=True)
        (path / ".git").mkdir()
    facts = survey(edit(ws))
    assert str(shallow / ".git") in facts.pins  # depth 4
    assert SCAN_MAX_DEPTH == 4
    assert str(deep / ".git") not in facts.pins  # documented limit
    assert str(skipped / ".git") not in facts.pins


def test_a_worktree_pins_its_real_gitdir_and_commondir_inside_a_writable_root(tmp_path: Path) -> None:
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
    assert str(worktree / ".git") in facts.pins  # the pointer file itself
    assert str(main / ".git") in facts.pins  # commondir (contains worktrees/wt)
    assert str(main / ".git" / "worktrees" / "wt") not in facts.pins  # inside the pin above
    alone = survey(
        Profile(capability=Capability.EDIT_WORKSPACE, workspace=worktree, home=tmp_path / "home")
    )
    assert str(main / ".git" / "worktrees" / "wt") in alone.git_dirs  # outside: kept visible
    assert str(main / ".git") in alone.git_dirs


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
    from sandbox.protected import is_hidden_name
    from sandbox.survey import _HIDDEN_NAME

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
    # the module, not the function `sandbox.survey` that the package exports
    monkeypatch.setattr(sys.modules["sandbox.survey"], "caller_home", lambda uid: str(passwd_home))
    monkeypatch.setenv("HOME", str(ci_home))
    # (`survey` leaves out homes under its private /tmp, as tmp_path is: asked directly)
    assert other_homes(str(ci_home), os.getuid(), (str(root),)) == (str(passwd_home),)
    monkeypatch.setenv("HOME", str(root / "home"))
    assert other_homes(str(ci_home), os.getuid(), (str(root),)) == (str(passwd_home),)
