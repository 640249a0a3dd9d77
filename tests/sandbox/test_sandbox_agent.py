"""The agent process itself under the sandbox: install visible, state kept, pipes intact."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
import trio

from governor.policies.capability import Capability
from governor.sandbox.plan.profile import Profile, ProfileError
from governor.sandbox.run.agent import agent_process, resolve_install, resolve_links

AGENT = """#!/usr/bin/env python3
# A stand-in agent: answers each stdin line with what it can see and do.
import json, os, socket, sys
home = os.environ["HOME"]
for line in sys.stdin:
    ws = line.strip()
    report = {"home": sorted(os.listdir(home))}
    with open(os.path.join(home, ".fakeagent", "state"), "w") as f:
        f.write("logged-in")
    for name, path in (("ws", os.path.join(ws, "edited")), ("git", os.path.join(ws, ".git", "config"))):
        try:
            with open(path, "a") as f:
                f.write("x")
            report[name] = "written"
        except OSError as e:
            report[name] = e.strerror
    try:  # opened for appending, closed without a byte: a host-wide sysctl
        open("/proc/sys/fs/lease-break-time", "a").close()
        report["sysctl"] = "opened"
    except OSError as e:
        report["sysctl"] = e.strerror
    report["interfaces"] = len(socket.if_nameindex())
    print(json.dumps(report), flush=True)
"""


@pytest.fixture
def install(tmp_path: Path) -> Path:
    """An npm-style install under /tmp: prefix/bin/fakeagent -> node_modules/.../agent.py."""
    package = tmp_path / "prefix" / "node_modules" / "@acme" / "fakeagent"
    package.mkdir(parents=True)
    script = package / "agent.py"
    script.write_text(AGENT)
    script.chmod(0o755)
    bin_dir = tmp_path / "prefix" / "bin"
    bin_dir.mkdir()
    (bin_dir / "fakeagent").symlink_to(script)
    return bin_dir


def test_resolve_install_finds_the_script_its_package_root_and_its_interpreter(install: Path) -> None:
    found = resolve_install(["fakeagent"], search_path=f"{install}:/usr/bin:/bin")
    script = (install / "fakeagent").resolve()
    assert script in found
    assert install.parent in found  # the directory holding node_modules
    assert Path(os.path.realpath("/usr/bin/python3")) in found


def test_resolve_install_counts_absolute_script_arguments(install: Path) -> None:
    script = (install / "fakeagent").resolve()
    found = resolve_install([sys.executable, str(script)])
    assert script in found and install.parent in found


def test_an_unknown_agent_program_is_refused_by_name() -> None:
    with pytest.raises(ProfileError, match="no-such-agent"):
        resolve_install(["no-such-agent"], search_path="/nonexistent")


async def test_a_sandboxed_agent_keeps_its_state_sees_its_install_and_talks_over_stdio(
    install: Path, ws: Path, home: Path
) -> None:
    argv = [str(install / "fakeagent")]
    profile = Profile.for_agent(
        Capability.EDIT_WORKSPACE,
        ws,
        home=home,
        home_folders=(".fakeagent",),
        install=resolve_install(argv, search_path=f"{install}:/usr/bin:/bin"),
    )
    async with agent_process(profile, argv, stderr=None) as agent:
        assert agent.stdin is not None and agent.stdout is not None
        await agent.stdin.send_all(f"{ws}\n".encode())
        with trio.fail_after(20):
            line = b""
            while not line.endswith(b"\n"):
                line += await agent.stdout.receive_some(4096)
    report = json.loads(line)
    assert report["home"] == [".fakeagent"]  # ~/.ssh is not there
    assert report["ws"] == "written"
    assert report["git"] == "Read-only file system"
    # even a root caller's agent (uid 0 inside) cannot write host-wide sysctls
    assert report["sysctl"] in ("Read-only file system", "Permission denied")
    assert report["interfaces"] > 1  # the agent's network is on
    assert (home / ".fakeagent" / "state").read_text() == "logged-in"  # persisted on the host
    assert (ws / "edited").read_text() == "x"


async def test_without_the_install_kept_visible_an_agent_under_tmp_cannot_start(
    install: Path, ws: Path, home: Path
) -> None:
    argv = [str(install / "fakeagent")]
    profile = Profile.for_agent(Capability.READ_ONLY, ws, home=home, home_folders=(".fakeagent",))
    async with agent_process(profile, argv, stderr=None) as agent:
        assert await agent.wait() != 0  # /tmp is a private tmpfs: the script is gone


@pytest.mark.parametrize("recreated", [True, False], ids=["links-kept", "links-hidden"])
async def test_an_agent_found_through_a_link_in_a_hidden_folder_starts_by_that_path(
    install: Path, ws: Path, home: Path, tmp_path: Path, recreated: bool
) -> None:
    links = tmp_path / "links"  # under /tmp, which the sandbox hides
    links.mkdir()
    (links / "agent").symlink_to(install / "fakeagent")  # a link to a link to the script
    argv = [str(links / "agent")]
    profile = Profile.for_agent(
        Capability.READ_ONLY,
        ws,
        home=home,
        home_folders=(".fakeagent",),
        install=resolve_install(argv),
        links=resolve_links(argv) if recreated else (),
    )
    assert resolve_links(argv) == (
        (str(links / "agent"), str(install / "fakeagent")),
        (str(install / "fakeagent"), str(install.parent / "node_modules/@acme/fakeagent/agent.py")),
    )
    async with agent_process(profile, argv, stderr=None) as agent:
        assert agent.stdin is not None and agent.stdout is not None
        await agent.stdin.send_all(f"{ws}\n".encode())
        await agent.stdin.aclose()
        with trio.fail_after(20):
            out = b""
            while chunk := await agent.stdout.receive_some(4096):
                out += chunk
        code = await agent.wait()
    if recreated:
        assert json.loads(out)["home"] == [".fakeagent"]
    else:
        assert code != 0 and out == b""  # bwrap cannot exec a path the sandbox hides


def test_an_agent_in_home_bin_does_not_make_the_whole_home_visible(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / "bin").mkdir(parents=True)
    agent = home / "bin" / "agent"
    agent.write_text("#!/bin/sh\n")
    agent.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    found = resolve_install([str(agent)])
    assert agent in found
    assert home not in found  # the bin/.. prefix rule stops at $HOME


def test_missing_home_folders_are_created_but_file_entries_never_are(tmp_path: Path, ws: Path) -> None:
    from governor.sandbox.run.agent import ensure_home_folders

    home = tmp_path / "fresh-home"
    home.mkdir()
    profile = Profile.for_agent(
        Capability.READ_ONLY, ws, home=home, home_folders=(".claude", ".claude.json", ".local/share/x")
    )
    ensure_home_folders(profile)
    assert (home / ".claude").is_dir()
    assert (home / ".local" / "share" / "x").is_dir()
    assert not (home / ".claude.json").exists()


def test_a_missing_folder_that_runs_code_is_made_empty_and_a_missing_file_is_not(
    tmp_path: Path, ws: Path
) -> None:
    from governor.sandbox.host.survey import survey
    from governor.sandbox.run.agent import ensure_home_folders

    home = tmp_path / "fresh-home"
    home.mkdir()
    profile = Profile.for_agent(
        Capability.EDIT_WORKSPACE, ws, home=home, home_folders=(".qwen",),
        home_runs_code=(".qwen/extensions/", ".qwen/settings.json"),
    )  # fmt: skip
    ensure_home_folders(profile)
    assert (home / ".qwen" / "extensions").is_dir() and not any((home / ".qwen" / "extensions").iterdir())
    assert not (home / ".qwen" / "settings.json").exists()
    # the folder is held read-only as it is; the file by a placeholder the launcher makes
    facts = survey(profile)
    q = str(home / ".qwen")
    assert facts.home_pins == ((f"{q}/extensions", f"{q}/extensions"), (f"{q}/settings.json", f"{q}/settings.json"))
    assert facts.home_stubs == (f"{q}/settings.json",)


@pytest.mark.parametrize("capability", [Capability.READ_ONLY, Capability.FULL_ACCESS],
                         ids=["sandboxed", "unsandboxed"])  # fmt: skip
async def test_an_agent_runs_in_a_session_of_its_own_out_of_reach_of_the_terminals_ctrl_c(
    ws: Path, capability: Capability
) -> None:
    # A terminal's Ctrl-C signals its foreground process group: an agent (or the
    # bwrap holding it) left in the governor's would die before the governor could
    # cancel the turn and end the attempt as interrupted.
    profile = Profile.for_agent(capability, ws)
    async with agent_process(profile, ["/bin/sleep", "30"], stderr=None) as agent:
        assert os.getsid(agent.pid) != os.getsid(0)
        assert os.getpgid(agent.pid) != os.getpgid(0)
