"""`governor.sandbox.host.processes` (the one door for host processes) and
`governor.mcp.launchers` (what an MCP server really runs): the rules as plain
calls, real folders, no process started but the ones named."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from governor.mcp.launchers import LauncherError, NpxLaunch, npx_launch, placed, refused
from governor.sandbox.host import processes
from governor.sandbox.host.processes import HostProcessRefused, Places


@pytest.fixture
def environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A child's environment, and the governor's own home set to the same: the
    empty folder is the governor's, found from its own environment."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    return {"HOME": str(home), "PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path / "t")}


def test_the_empty_folder_is_the_governors_whatever_home_the_child_is_given(
    environ: dict[str, str],
) -> None:
    """git runs with HOME=/nonexistent: its cwd is still the governor's folder
    (a child's HOME made root create /nonexistent/.local/share/... on the host,
    and an unprivileged governor could start no git at all)."""
    host = processes.command(["/usr/bin/git", "--version"], env={**environ, "HOME": "/nonexistent"})
    assert host.cwd == str(Path(environ["HOME"]) / ".local/share/acp-governor/empty")
    assert not host.cwd.startswith("/nonexistent")


def test_a_host_process_starts_from_the_empty_folder_with_the_system_path_and_its_own_folder(
    environ: dict[str, str],
) -> None:
    host = processes.command(["/usr/bin/git", "--version"], env=environ)
    assert host.cwd == str(Path(environ["HOME"]) / ".local/share/acp-governor/empty")
    assert os.listdir(host.cwd) == [] and stat.S_IMODE(os.stat(host.cwd).st_mode) == 0o555
    system = [d for d in processes.SYSTEM_PATH if os.path.isdir(d)]
    assert host.env["PATH"] == ":".join(system)  # git's own folder is one of them
    nvm = processes.command(["/opt/node/bin/npm", "-v"], env=environ)
    assert nvm.env["PATH"] == ":".join([*system, "/opt/node/bin"])  # node beside npm
    assert host.env["HOME"] == environ["HOME"]  # the rest of the environment is kept
    done = processes.run(host)
    assert done.returncode == 0 and done.stdout.startswith("git version")


def test_a_program_in_a_root_a_writable_home_folder_or_npm_s_cache_is_refused_naming_both(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    root, claude = tmp_path / "ws", Path(environ["HOME"]) / ".claude"
    places = Places.of(roots=[root], homes=[claude], environ=environ)
    cache = Path(environ["HOME"]) / ".npm" / "_npx" / "abc" / "node_modules" / ".bin"
    for program, place in (
        (root / "node_modules/.bin/npm", f"a root of the attempt ({root})"),
        (claude / "bin/git", f"a home folder an agent may write ({claude})"),
        (cache / "sh", f"npm's cache ({Path(environ['HOME']) / '.npm'})"),
        (tmp_path / "t" / "npm", "a temporary folder anyone may write ("),
    ):
        with pytest.raises(HostProcessRefused) as refusal:
            processes.command([str(program), "install"], places=places, env=environ)
        said = str(refusal.value)
        assert f"program {program} lies in {place}" in said, said
        assert said.endswith(", where an agent may have written"), said
    with pytest.raises(HostProcessRefused, match="absolute path, not 'npm'"):
        processes.command(["npm", "install"], places=places, env=environ)


def test_the_empty_folder_is_refused_once_it_holds_anything(environ: dict[str, str]) -> None:
    folder = processes.empty_folder(environ)
    folder.chmod(0o755)
    (folder / "node_modules").mkdir()
    folder.chmod(0o555)
    with pytest.raises(HostProcessRefused, match="holds files: remove it"):
        processes.command(["/usr/bin/git", "--version"], env=environ)


def test_npm_runs_no_script_and_a_fixed_shell() -> None:
    assert processes.npm_flags() == ("--ignore-scripts", "--script-shell=/bin/sh")


@pytest.mark.parametrize(
    ("command", "launch"),
    [
        (["npx", "-y", "@scope/srv@1.2.0", "a"], NpxLaunch("@scope/srv@1.2.0", None, ("a",))),
        (["/usr/bin/npx", "--yes", "srv"], NpxLaunch("srv", None, ())),
        (["npx", "-p", "srv@^1", "srv-bin", "--x"], NpxLaunch("srv@^1", "srv-bin", ("--x",))),
        (["npm", "exec", "--yes", "--package=srv", "--", "b"], NpxLaunch("srv", "b", ())),
        (["node", "/opt/srv.js"], None),
    ],
)
def test_an_npx_command_is_taken_apart_into_its_package_bin_and_arguments(
    command: list[str], launch: NpxLaunch | None
) -> None:
    assert npx_launch("s", command) == launch


@pytest.mark.parametrize(
    ("command", "said"),
    [
        (["uvx", "mcp-server-time"], "MCP server s: uvx fetches or resolves its program"),
        (["/usr/bin/uv", "tool", "run", "x"], "MCP server s: uv tool run fetches"),
        (["pipx", "run", "x"], "MCP server s: pipx run fetches"),
        (["yarn", "dlx", "x"], "MCP server s: yarn dlx fetches"),
        (["npx", "-c", "evil"], "MCP server s: npx -c cannot be resolved before start"),
        (["npx", "-y", "git+https://x/y.git"], "is not a package of the registry"),
        (["npx", "-p", "a", "-p", "b", "c"], "needs exactly one package"),
    ],
)
def test_a_launcher_that_resolves_code_as_it_starts_is_refused_naming_it(
    command: list[str], said: str
) -> None:
    why = refused("s", command)
    assert why is not None and said in why, why
    if command[0] == "npx":
        with pytest.raises(LauncherError):
            npx_launch("s", command)


def test_an_absolute_program_and_an_npx_package_are_not_refused() -> None:
    assert refused("s", ["/opt/mcp/server", "--flag"]) is None
    assert refused("s", ["npx", "-y", "@modelcontextprotocol/server-github"]) is None


def test_the_workspace_placeholder_is_replaced_in_arguments_only() -> None:
    command = ["{workspace}/bin", "--repository", "{workspace}", "--x={workspace}/a"]
    assert placed(command, "/w") == ("{workspace}/bin", "--repository", "/w", "--x=/w/a")


def test_the_places_of_an_attempt_hold_its_roots_and_its_agent_s_home_folders_where_relocated(
    tmp_path: Path, environ: dict[str, str]
) -> None:
    from governor.agents.presets import presets
    from governor.confine.sandboxes import host_places
    from governor.policies.policy import Policy

    elsewhere = tmp_path / "codex-home"
    env = {**environ, "CODEX_HOME": str(elsewhere)}
    places = host_places(Policy().bind(str(tmp_path / "ws")), presets()["codex"], env)
    assert places.roots == (str(tmp_path / "ws"),)
    assert places.homes == (str(elsewhere),)
    assert places.caches == (str(Path(environ["HOME"]) / ".npm"),)


def _program(folder: Path, name: str = "tool") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / name
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    return program


@pytest.fixture
def scratch(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder outside the temporary ones (where no program may run on the
    host) and outside any git work tree, as a person's own folders are: under
    the home folder's cache. Its ``home`` is the governor's ``$HOME``."""
    cache = Path.home() / ".cache"
    cache.mkdir(exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix="acp-governor-test-", dir=cache))
    (folder / "home").mkdir()
    monkeypatch.setenv("HOME", str(folder / "home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def state(scratch: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The governor's state folder, of this test alone."""
    monkeypatch.setenv("XDG_STATE_HOME", str(scratch / "state"))
    return scratch / "state" / "acp-governor"


@pytest.fixture
def home_env(scratch: Path) -> dict[str, str]:
    """A child's environment whose home is the scratch folder's."""
    return {"HOME": str(scratch / "home"), "PATH": "/usr/bin:/bin"}


def test_no_program_in_a_folder_an_earlier_attempt_could_write_is_found_or_started(
    scratch: Path, home_env: dict[str, str], state: Path
) -> None:
    """An attempt's roots are kept in the state folder before its agent starts;
    from then on a program there is passed over by the door's lookup and
    refused by the door, whatever PATH a later command is given; a folder no
    attempt was given is found (the neighbour: nvm's npm, pyenv's python)."""
    ws, tools = scratch / "ws", scratch / "tools" / "bin"
    planted, trusted = _program(ws / ".venv" / "bin"), _program(tools, "other")
    _program(tools)
    search = f"{ws / '.venv' / 'bin'}:{tools}"
    assert processes.find_program("tool", path=search, environ=home_env) == str(planted)
    processes.remember_written([ws])
    processes.remember_written([ws, state / "attempts" / "x"])  # once each; the state folder never
    assert processes.written_folders() == (str(ws),)
    passed: list[str] = []
    found = processes.find_program("tool", path=search, environ=home_env, passed=passed)
    assert found == str(tools / "tool")
    assert passed == [
        f"{planted} (it lies in a folder an earlier attempt could write (the governor's state "
        f"folder keeps them: {state / 'written-folders'}) ({ws}), where an agent may have written)"
    ]
    with pytest.raises(HostProcessRefused, match="a folder an earlier attempt could write"):
        processes.command([str(planted)], env=home_env)
    with pytest.raises(HostProcessRefused, match="a folder an earlier attempt could write"):
        processes.find_program(str(planted), environ=home_env)
    assert processes.command([str(trusted)], env=home_env).argv == (str(trusted),)


def test_a_project_s_own_folder_on_the_path_is_passed_over_but_not_a_home_kept_in_git(
    scratch: Path, home_env: dict[str, str], state: Path
) -> None:
    """A ``node_modules`` folder, or one inside a git work tree below the home
    folder, is where an attempt the state folder does not know (another state
    folder, an older governor) could have left a program: passed over. A home
    folder kept in git (dotfiles) is not a project: its tools are found."""
    project = scratch / "project"
    (project / ".git").mkdir(parents=True)
    venv = _program(project / ".venv" / "bin")
    bins = _program(scratch / "lib" / "node_modules" / ".bin")
    home = Path(home_env["HOME"])
    (home / ".git").mkdir()
    nvm = _program(home / ".nvm" / "bin")
    for planted in (venv, bins):
        passed: list[str] = []
        found = processes.find_program(
            "tool", path=f"{planted.parent}:/usr/bin", environ=home_env, passed=passed
        )
        assert found is None and len(passed) == 1 and passed[0].startswith(str(planted)), passed
    assert processes.find_program("tool", path=str(nvm.parent), environ=home_env) == str(nvm)


def test_a_program_others_may_replace_is_passed_over_and_refused(
    scratch: Path, home_env: dict[str, str], state: Path
) -> None:
    """A folder writable by its group or by others (one without the sticky bit
    above it, or the program's own) is refused: anyone there may have put it."""
    shared = scratch / "shared" / "bin"
    program = _program(shared)
    shared.chmod(0o777)
    passed: list[str] = []
    assert processes.find_program("tool", path=str(shared), environ=home_env, passed=passed) is None
    assert f"{shared} is writable by others (mode 777)" in passed[0], passed
    with pytest.raises(HostProcessRefused, match="writable by others"):
        processes.command([str(program)], env=home_env)
    shared.chmod(0o755)
    assert processes.find_program("tool", path=str(shared), environ=home_env) == str(program)


def test_a_toolchain_folder_named_near_is_searched_only_when_no_attempt_could_write_it(
    scratch: Path, home_env: dict[str, str], state: Path
) -> None:
    """``near`` (npx's own folder, where npm lies beside it) is trusted as the
    operator's PATH is: a folder an attempt was given is never searched."""
    near = _program(scratch / "node" / "bin", "npm-near-only")
    assert processes.find_program("npm-near-only", near=str(near.parent), environ=home_env) == str(
        near
    )
    processes.remember_written([scratch / "node"])
    assert processes.find_program("npm-near-only", near=str(near.parent), environ=home_env) is None


def test_the_record_of_written_folders_stays_bounded_and_forgets_no_folder_still_known(
    scratch: Path, home_env: dict[str, str], state: Path
) -> None:
    """A test suite's workspaces would grow the record for ever: past its bound
    it is rewritten, keeping every folder still at its path, the new one, and
    a folder gone from its path that has an identity (renamed since: nobody
    can tell it from a deleted one) while the newest such fill half of it; a
    folder never seen to exist is dropped. A temporary folder is kept too (a
    scratch clone under ``/tmp``: a link an attempt left there is no more the
    person's than one in their home)."""
    kept, renamed = scratch / "kept", scratch / "renamed"
    kept.mkdir()
    renamed.mkdir()
    tmp = Path(tempfile.mkdtemp(prefix="acp-governor-test-", dir="/tmp"))
    try:
        gone = [str(scratch / "gone" / f"{n:05d}-{'x' * 80}") for n in range(3000)]
        processes.remember_written([kept, tmp, renamed, *gone[:10]])
        assert processes.written_folders() == (str(kept), str(tmp), str(renamed), *gone[:10])
        identity = (renamed.stat().st_dev, renamed.stat().st_ino)
        assert identity in {i[:2] for i in processes.written_identities()}
        renamed.rename(scratch / "renamed-since")
        processes.remember_written(gone)
        size = processes.written_record().stat().st_size
        assert size > processes.WRITTEN_PRUNE_BYTES - 1000
        new = scratch / "new"
        processes.remember_written([new])
        assert processes.written_folders() == (str(kept), str(tmp), str(renamed), str(new))
        assert identity in {i[:2] for i in processes.written_identities()}
        assert processes.written_record().stat().st_size < 1000
    finally:
        shutil.rmtree(tmp)


def test_the_identities_gone_from_their_paths_are_kept_newest_first_within_half_the_bound(
    scratch: Path, home_env: dict[str, str], state: Path
) -> None:
    """A folder gone from its path may have been renamed or deleted: the record
    keeps its identity, but not for ever: past the bound, the newest such fill
    half of it and the oldest go (a CI's workspace made again at one path
    leaves one identity each time, and those go too), while a folder still at
    its path keeps the identity it has there."""
    ci, many = scratch / "ci", scratch / "many"
    for _ in range(3):  # the same path, made again for each attempt
        ci.mkdir()
        processes.remember_written([ci])
        ci.rmdir()
    ci.mkdir()
    folders = [many / f"{n:05d}-{'y' * 100}" for n in range(1500)]
    for folder in folders:
        folder.mkdir(parents=True)
    processes.remember_written([ci, *folders])
    live = (ci.stat().st_dev, ci.stat().st_ino)
    newest = (folders[-1].stat().st_dev, folders[-1].stat().st_ino)
    oldest = (folders[0].stat().st_dev, folders[0].stat().st_ino)
    shutil.rmtree(many)
    processes.remember_written([scratch / "next"])
    size = processes.written_record().stat().st_size
    assert processes.WRITTEN_PRUNE_BYTES // 3 < size <= processes.WRITTEN_PRUNE_BYTES // 2 + 1000
    kept = {i[:2] for i in processes.written_identities()}
    assert live in kept and newest in kept and oldest not in kept
    lines = processes.written_record().read_text().splitlines()
    assert sum(line.startswith(f'["{ci}"') for line in lines) == 1, lines[:8]


def test_a_folder_kept_before_it_existed_gains_its_identity_at_the_next_attempt(
    scratch: Path, home_env: dict[str, str], state: Path
) -> None:
    """A home folder an agent's sandbox keeps writable may not exist when its
    attempt starts (or an older governor kept a path alone): once it exists,
    the next attempt's start keeps its identity too, so a rename after that
    does not make it the person's."""
    later = scratch / "later"
    processes.remember_written([later])
    assert processes.written_identities() == frozenset()
    later.mkdir()
    processes.remember_written([scratch / "other"])
    assert {i[:2] for i in processes.written_identities()} == {
        (later.stat().st_dev, later.stat().st_ino)
    }
    assert processes.written_folders() == (str(later), str(scratch / "other"))


def test_no_program_an_earlier_attempt_could_write_runs_after_the_person_renames_its_folder(
    scratch: Path, home_env: dict[str, str], state: Path
) -> None:
    """The record keeps each folder by identity as well as by path: a project
    (no git work tree) renamed after the attempt is still the one the attempt
    was given, and a program it left there is passed over by the lookup and
    refused by the door, naming the folder by its new name. The neighbour: a
    folder no attempt was given, of the same shape beside it, is found."""
    ws, moved = scratch / "ws", scratch / "proj-old"
    _program(ws / ".venv" / "bin")
    processes.remember_written([ws])
    ws.rename(moved)
    planted = moved / ".venv" / "bin" / "tool"
    other = _program(scratch / "other" / ".venv" / "bin")
    passed: list[str] = []
    search = f"{planted.parent}:{other.parent}"
    found = processes.find_program("tool", path=search, environ=home_env, passed=passed)
    assert found == str(other)
    assert len(passed) == 1, passed
    assert passed[0].startswith(f"{planted} (it lies in a folder an earlier attempt"), passed
    assert f"keeps it by identity: {state / 'written-folders'}) ({moved})" in passed[0], passed
    with pytest.raises(HostProcessRefused, match="under another name now"):
        processes.command([str(planted)], env=home_env)
    with pytest.raises(HostProcessRefused, match="under another name now"):
        processes.find_program(str(planted), environ=home_env)
    assert processes.command([str(other)], env=home_env).argv == (str(other),)


def test_a_folder_made_where_a_deleted_one_was_is_not_taken_for_it(
    scratch: Path, home_env: dict[str, str], state: Path
) -> None:
    """ext4 gives a deleted folder's inode number to the next folder made near
    it: the record keeps the inode's generation too, so the person's new
    folder is not refused as the attempt's deleted one (where the file system
    gives generations; on one that gives none its inode numbers are not reused
    at once, as tmpfs)."""
    ws = scratch / "ws"
    ws.mkdir()
    processes.remember_written([ws])
    number = ws.stat().st_ino
    ws.rmdir()
    tools = scratch / "tools"
    program = _program(tools / "bin")
    if tools.stat().st_ino != number:
        pytest.skip("the file system did not give the deleted folder's inode number again")
    if None in {i[2] for i in processes.written_identities()}:
        pytest.skip("the file system gives no inode generations")
    assert processes.find_program("tool", path=str(tools / "bin"), environ=home_env) == str(program)
    assert processes.written_places().holding(str(tools / "bin")) == ()


def test_the_written_places_hold_a_folder_renamed_since_and_one_under_tmp(
    scratch: Path, home_env: dict[str, str], state: Path
) -> None:
    """What a file the person names may not be reached through a link out of:
    a folder an attempt was given, under its new name after a rename, and a
    root under ``/tmp``; a folder of the person's beside them is held by none."""
    from governor.boundary.person_files import link_out

    ws, site = scratch / "ws", scratch / "site"
    ws.mkdir()
    site.mkdir()
    tmp = Path(tempfile.mkdtemp(prefix="acp-governor-test-", dir="/tmp"))
    try:
        processes.remember_written([ws, tmp])
        moved = scratch / "proj-old"
        ws.rename(moved)
        for project in (moved, tmp):
            (project / "reports").symlink_to(site)
            (project / "inside").symlink_to(project / "reports")
            written = processes.written_places()
            assert written.holding(str(project / "deep")) == (str(project),)
            why = link_out(project / "reports" / "index.html", written)
            assert why is not None and f"{project / 'reports'} is a link to {site}" in why, why
            assert link_out(project / "inside", written) is not None  # through it, in the end
        (site / "mine").symlink_to(scratch / "kept")  # the person's link, in no attempt's folder
        assert processes.written_places().holding(str(site)) == ()
        assert link_out(site / "mine" / "index.html", processes.written_places()) is None
    finally:
        shutil.rmtree(tmp)
