"""What the sandboxed git takes from the host's git config: the identity (as the
host resolves it in the workspace) and the excludes, once per workspace."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from governor.policies.capability import Capability
from governor.sandbox.host import git as hostgit
from governor.sandbox.host.git import anchored, read_host_git
from governor.sandbox.host.survey import survey
from governor.sandbox.plan.bwrap_argv import environment
from governor.sandbox.plan.profile import EXCLUDES_PATH, HostFacts, Profile

SECRET = "Bearer CANARY-hostgit"


@pytest.fixture(autouse=True)
def fresh_cache() -> Iterator[None]:
    hostgit._read_host_git.cache_clear()
    yield
    hostgit._read_host_git.cache_clear()


@pytest.fixture
def global_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "person"
    home.mkdir()
    config = home / ".gitconfig"
    config.write_text(
        "[user]\n\tname = Person\n\temail = person@example.invalid\n"
        f"[http]\n\textraheader = Authorization: {SECRET}\n"
        "[credential]\n\thelper = store\n"
    )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("GIT_CONFIG_GLOBAL", raising=False)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    return config


def test_the_identity_is_the_hosts_and_nothing_else_of_its_config(global_config: Path, ws: Path) -> None:
    identity = dict(read_host_git(str(ws)).identity)
    assert identity == {
        "GIT_AUTHOR_NAME": "Person", "GIT_AUTHOR_EMAIL": "person@example.invalid",
        "GIT_COMMITTER_NAME": "Person", "GIT_COMMITTER_EMAIL": "person@example.invalid",
    }  # fmt: skip
    assert SECRET not in repr(read_host_git(str(ws)))


def test_the_identity_is_resolved_in_the_workspace_as_the_hosts_git_would(
    global_config: Path, ws: Path, tmp_path: Path
) -> None:
    work = tmp_path / "work.gitconfig"
    work.write_text("[user]\n\temail = person@work.invalid\n[author]\n\tname = Person At Work\n")
    with global_config.open("a") as config:
        config.write(f'[includeIf "gitdir:{ws}/"]\n\tpath = {work}\n')
    identity = dict(read_host_git(str(ws)).identity)
    assert identity["GIT_AUTHOR_EMAIL"] == identity["GIT_COMMITTER_EMAIL"] == "person@work.invalid"
    assert (identity["GIT_AUTHOR_NAME"], identity["GIT_COMMITTER_NAME"]) == ("Person At Work", "Person")
    subprocess.run(["git", "config", "user.name", "Local"], cwd=ws, check=True)
    hostgit._read_host_git.cache_clear()
    assert dict(read_host_git(str(ws)).identity)["GIT_COMMITTER_NAME"] == "Local"


def test_no_identity_configured_gives_no_variables(global_config: Path, ws: Path) -> None:
    global_config.write_text("")
    assert read_host_git(str(ws)).identity == ()


def test_git_config_runs_once_per_workspace_not_per_survey(
    global_config: Path, ws: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[object] = []
    real = subprocess.run

    def counted(*args: object, **kwargs: object) -> object:
        calls.append(args)
        return real(*args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(hostgit.subprocess, "run", counted)
    profile = Profile(capability=Capability.EDIT_WORKSPACE, workspace=ws, home=home)
    for _ in range(3):
        facts = survey(profile)
    assert len(calls) == 1
    assert dict(facts.git_env)["GIT_AUTHOR_NAME"] == "Person"
    read_only = Profile(capability=Capability.EDIT_WORKSPACE, workspace=ws, home=home, git_read_only=True)
    facts = survey(read_only)
    assert facts.git_env == () and facts.git_excludes is None  # no commits: nothing of git


def test_the_excludes_are_the_hosts_file_and_the_sandboxs_own_paths(
    global_config: Path, ws: Path, home: Path
) -> None:
    ignore = global_config.parent / "my-ignore"
    ignore.write_text("*.swp\n.DS_Store\n")
    with global_config.open("a") as config:
        config.write("[core]\n\texcludesFile = ~/my-ignore\n")
    (ws / ".env").write_text("TOKEN=1")
    nested = ws / "svc"
    nested.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=nested, check=True)
    (nested / ".env.local").write_text("TOKEN=2")
    facts = survey(Profile(capability=Capability.EDIT_WORKSPACE, workspace=ws, home=home))
    assert facts.git_excludes is not None
    lines = facts.git_excludes
    assert lines[:2] == ("*.swp", ".DS_Store")
    for expected in ("/.mcp.json", "/.claude", "/.env", "/svc/.env.local", "/.env.local"):
        assert expected in lines, expected
    assert not any(".git/" in line for line in lines)  # the git dir's own placeholders


def test_an_excludes_file_that_is_a_fifo_is_not_waited_for(global_config: Path, ws: Path) -> None:
    fifo = global_config.parent / "fifo"
    os.mkfifo(fifo)
    with global_config.open("a") as config:
        config.write(f"[core]\n\texcludesFile = {fifo}\n")
    started = time.monotonic()
    assert read_host_git(str(ws)).excludes == ()
    assert time.monotonic() - started < hostgit.CONFIG_TIMEOUT


def test_anchored_patterns_are_literal_and_per_repository() -> None:
    paths = [
        "/w/.mcp.json", "/w/a/b[1]*.env", "/w/.git/modules", "/w/sub/.env ", "/elsewhere/x",
        "/w/.env\n*",
    ]  # fmt: skip
    assert anchored(paths, ["/w", "/w/sub"]) == (
        "/.mcp.json", "/a/b\\[1]\\*.env", "/sub/.env\\ ", "/.env\\ ",
    )  # fmt: skip


def test_declared_variables_win_one_by_one_and_the_excludes_file_is_named() -> None:
    facts = HostFacts(
        home=None, home_env="/h", uid=1, roots=("/w",), cwd="/w",
        git_env=(("GIT_AUTHOR_NAME", "Person"), ("GIT_AUTHOR_EMAIL", "p@x")),
        git_excludes=(),
    )  # fmt: skip
    profile = Profile(capability=Capability.EDIT_WORKSPACE, workspace=Path("/w"), env={"GIT_AUTHOR_NAME": "Bot"})
    env = environment(profile, facts)
    assert (env["GIT_AUTHOR_NAME"], env["GIT_AUTHOR_EMAIL"]) == ("Bot", "p@x")
    assert (env["GIT_CONFIG_KEY_0"], env["GIT_CONFIG_VALUE_0"]) == ("core.excludesFile", EXCLUDES_PATH)
    own = Profile(capability=Capability.EDIT_WORKSPACE, workspace=Path("/w"), env={"GIT_CONFIG_COUNT": "0"})
    assert "GIT_CONFIG_KEY_0" not in environment(own, facts)


def test_the_submodule_paths_are_read_as_git_reads_them_and_an_unsafe_one_is_left_out(
    tmp_path: Path,
) -> None:
    from governor.sandbox.host.git import submodule_paths

    assert submodule_paths(str(tmp_path)) == ()  # none
    (tmp_path / ".gitmodules").write_text(
        '[submodule "a"]\n\tpath = vendor/a\n\turl = ../a\n'
        '[submodule "b"]\n\tPath = "with space/b" # a comment\n'
        '[submodule "c"]\n\tpath = ../outside\n[submodule "d"]\n\tpath = /abs\n'
        '[submodule "e"]\n\tpath = vendor/a\n; path = commented\n'
    )
    assert submodule_paths(str(tmp_path)) == ("vendor/a", "with space/b")
    (tmp_path / ".gitmodules").unlink()
    (tmp_path / ".gitmodules").symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").write_text('[submodule "x"]\n\tpath = x\n')
    assert submodule_paths(str(tmp_path)) == ()  # not followed
