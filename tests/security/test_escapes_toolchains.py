"""A person's toolchain under ``$HOME`` works in the sandbox, and their secrets
beside it stay hidden (`governor.sandbox.host.toolchains`), as root and as an unprivileged
user, in a bwrap of its own and in a session's sandbox.

The box's home gets a developer's toolchain and secrets (`toolchain_home`).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from escape_harness import Box
from toolchain_home import AVAILABLE, PROBE, WHY_NOT, make_toolchain

from governor.sandbox.host.bwrap import locate

CANARY = "CANARY-" + secrets.token_hex(6)

pytestmark = pytest.mark.skipif(not AVAILABLE, reason=WHY_NOT)


def toolchain(box: Box) -> tuple[str, Path]:
    """Make the home's toolchain and the workspace's venv, owned by the box's
    user; the PATH a person has."""
    made = make_toolchain(box.home, box.ws, CANARY)
    for top in (box.home, box.ws / ".venv"):
        subprocess.run(["chown", "-R", "-h", f"{box.uid}:{box.gid}", str(top)], check=True)
    return made.path, made.prefix


def test_the_toolchain_in_home_runs_and_its_secrets_stay_hidden(box: Box) -> None:
    path, prefix = toolchain(box)
    outcome = box.run(PROBE, path=path, environ={"HOME": str(box.home)})
    assert outcome.error is None, outcome.error
    text = outcome.text
    assert "mytool ran" in text
    assert "pyuser ran" in text  # its interpreter under ~/.pyenv, its module in ~/.local/lib
    assert "cargo ran" in text
    assert f"venv {prefix}" in text  # the workspace venv runs on its pyenv base
    assert CANARY not in text
    assert f"PATH={path}" in text


@pytest.fixture
def neighbour() -> Iterator[Path]:
    """Another person's home under ``/home`` with a world-readable token and a
    tool of the same name as the box's."""
    if not os.access("/home", os.W_OK):  # a folder beside the homes: root's to make
        pytest.skip("making a folder under /home needs root")
    home = Path("/home") / f"govsec-{secrets.token_hex(4)}"
    home.mkdir(mode=0o755)
    try:
        (home / ".npmrc").write_text(f"//registry.npmjs.org/:_authToken={CANARY}-neighbour\n")
        (home / ".npmrc").chmod(0o644)
        tool = home / ".local" / "bin" / "mytool"
        tool.parent.mkdir(parents=True, mode=0o755)
        tool.write_text(f"#!/bin/sh\necho {CANARY}-neighbour-tool\n")
        tool.chmod(0o755)
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_another_persons_world_readable_file_stays_unreadable_while_the_kept_toolchain_runs(
    box: Box, neighbour: Path
) -> None:
    """``/home`` is one tmpfs inside, the person's own toolchain bound back on
    it (for the unprivileged user, their fake ``$HOME`` lies under
    ``/home/govtest``); the neighbour's file reads on the host, not inside,
    and their tool does not run. (A home the host's ``PATH`` names stays:
    ``test_a_folder_of_home_that_the_hosts_path_names_stays``.)"""
    path, prefix = toolchain(box)
    assert CANARY in (neighbour / ".npmrc").read_text()  # readable to anyone on the host
    outcome = box.run(
        f"{PROBE}; cat {neighbour}/.npmrc; {neighbour}/.local/bin/mytool",
        path=path,
        environ={"HOME": str(box.home)},
    )
    assert outcome.error is None, outcome.error
    assert "mytool ran" in outcome.text and "cargo ran" in outcome.text
    assert f"venv {prefix}" in outcome.text
    assert CANARY not in outcome.text


def test_without_detection_the_toolchain_is_gone_and_so_are_the_secrets(box: Box) -> None:
    path, prefix = toolchain(box)
    outcome = box.run(PROBE, path=path, toolchains=False, environ={"HOME": str(box.home)})
    assert outcome.error is None, outcome.error
    assert "mytool ran" not in outcome.text and "cargo ran" not in outcome.text
    assert f"venv {prefix}" not in outcome.text  # its interpreter is out of sight
    assert CANARY not in outcome.text
    assert "PATH=/usr/bin:/bin" in outcome.text  # the hidden entries are dropped


def test_a_kept_toolchain_is_read_only(box: Box) -> None:
    path, prefix = toolchain(box)
    cargo = box.home / ".cargo" / "bin" / "cargo"
    before = cargo.read_bytes()
    outcome = box.run(
        f"echo 'echo pwned' >> {cargo}; touch {prefix}/bin/planted; mytool",
        path=path,
        environ={"HOME": str(box.home)},
    )
    assert "mytool ran" in outcome.text  # the neighbour: the kept tool still runs
    assert cargo.read_bytes() == before
    assert not (prefix / "bin" / "planted").exists()


def test_a_package_cache_is_writable_inside_and_unchanged_on_the_host(box: Box) -> None:
    if "--tmp-overlay" not in subprocess.run([locate(), "--help"], capture_output=True, text=True).stdout:
        pytest.skip("this bwrap has no --tmp-overlay: caches are not kept")
    path, _ = toolchain(box)
    cache = box.mkdir(box.home / ".cache" / "pip")
    box.write(cache / "wheel.txt", "from the host\n")
    outcome = box.run(
        "cat ~/.cache/pip/wheel.txt; echo new > ~/.cache/pip/new.txt && cat ~/.cache/pip/new.txt; "
        "echo changed > ~/.cache/pip/wheel.txt; cat ~/.cache/pip/wheel.txt",
        path=path,
        environ={"HOME": str(box.home)},
    )
    assert outcome.error is None, outcome.error
    assert outcome.text.splitlines()[:3] == ["from the host", "new", "changed"]
    assert (cache / "wheel.txt").read_text() == "from the host\n"
    assert not (cache / "new.txt").exists()


def test_an_operator_folder_is_kept_and_one_holding_credentials_is_refused(box: Box) -> None:
    tools = box.mkdir(box.home / "tools")
    box.write(tools / "t.txt", "operator's tool")
    kept = box.run("cat ~/tools/t.txt", keep=[tools], environ={"HOME": str(box.home)})
    assert "operator's tool" in kept.text
    unkept = box.run("cat ~/tools/t.txt", environ={"HOME": str(box.home)})
    assert "operator's tool" not in unkept.text
    box.write(box.home / ".config" / "gh" / "hosts.yml", f"oauth_token: {CANARY}\n")
    refused = box.run("cat ~/.config/gh/hosts.yml", keep=[box.home / ".config"])
    assert refused.error is not None and "credentials" in refused.error
    assert CANARY not in refused.text

