"""`governor.sandbox.host.processes` (the one door for host processes) and
`governor.mcp.launchers` (what an MCP server really runs): the rules as plain
calls, real folders, no process started but the ones named."""

from __future__ import annotations

import os
import stat
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
