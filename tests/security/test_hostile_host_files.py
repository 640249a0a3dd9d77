"""The host's secret files and other people's homes are out of every sandbox's
sight (issue 24), as root and as an unprivileged user, in a bwrap of its own
and in a session's sandbox.

A root caller stays uid 0 inside, the owner of ``/etc/shadow`` (mode 0640),
so without a mask the sandbox reads every password hash with no capability at
all; anyone reads another person's world-readable ``~/.npmrc``. The
masked file is the host's ``/dev/null`` on a ``nodev`` mount: opening it
fails. The neighbours: the rest of ``/etc`` (``/etc/passwd``) reads as on the host, and a
root inside another person's home is still there and writable.
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from escape_harness import Box, Outcome

CANARY = "CANARY-" + secrets.token_hex(6)


@pytest.fixture
def host_key() -> Iterator[Path | None]:
    """An SSH host key as sshd keeps one (root's, 0600), made when we are root."""
    if os.getuid() != 0:
        yield None
        return
    key = Path("/etc/ssh") / f"ssh_host_govsec{secrets.token_hex(3)}_key"
    key.parent.mkdir(exist_ok=True)
    key.write_text(f"{CANARY}-hostkey\n")
    key.chmod(0o600)
    try:
        yield key
    finally:
        key.unlink()


def test_the_hosts_secret_files_read_empty_and_the_rest_of_etc_stays(box: Box, host_key: Path | None) -> None:
    shadow = Path("/etc/shadow").read_text() if os.access("/etc/shadow", os.R_OK) else ""
    key = f" {host_key}" if host_key is not None else ""
    outcome = box.run(f"cat /etc/shadow /etc/gshadow{key}; cat /etc/passwd")
    assert outcome.error is None, outcome.error
    assert CANARY not in outcome.text
    hashes = [line for line in shadow.splitlines() if line.split(":")[1:2] not in ([""], ["*"], ["!"])]
    assert not any(line in outcome.text for line in hashes)
    assert not any(line in outcome.text for line in shadow.splitlines() if line.startswith("root:"))
    assert "root:x:0:0" in outcome.text  # the neighbour: /etc/passwd as on the host


@pytest.fixture
def someone(box: Box) -> Iterator[Path]:
    """Another person's home under ``/home``: a world-readable token, and a
    project folder the user under test may work in."""
    if not os.access("/home", os.W_OK):  # a folder beside the homes: root's to make
        pytest.skip("making a folder under /home needs root")
    home = Path("/home") / f"govsec-{secrets.token_hex(4)}"
    home.mkdir(mode=0o755)
    try:
        (home / ".npmrc").write_text(f"//registry.npmjs.org/:_authToken={CANARY}-npm\n")
        (home / ".config" / "gh").mkdir(parents=True)
        (home / ".config" / "gh" / "hosts.yml").write_text(f"oauth_token: {CANARY}-gh\n")
        for path in (home / ".npmrc", home / ".config", home / ".config" / "gh", home / ".config" / "gh" / "hosts.yml"):
            path.chmod(0o755 if path.is_dir() else 0o644)
        box.write(home / "proj" / "README.md", "shared project\n")
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


def test_other_peoples_homes_are_empty_and_a_root_inside_one_stays(box: Box, someone: Path) -> None:
    outcome = box.run(f"cat {someone}/.npmrc {someone}/.config/gh/hosts.yml; ls -a {someone}")
    assert outcome.error is None, outcome.error
    assert CANARY not in outcome.text
    assert ".npmrc" not in outcome.text.splitlines()  # not listed: empty inside
    project = someone / "proj"
    shared = box.run(f"cat {project}/README.md; echo made > {project}/made.txt; cat {someone}/.npmrc", extra_roots=[project])
    assert shared.error is None, shared.error
    assert "shared project" in shared.text  # the neighbour: a root in it is bound back
    assert (project / "made.txt").read_text() == "made\n"
    assert CANARY not in shared.text


def test_a_folder_of_home_that_the_hosts_path_names_stays(box: Box, someone: Path) -> None:
    """Homebrew on Linux lives in ``/home/linuxbrew/.linuxbrew``: not a person's
    home, named by the host's own ``PATH``, so it stays."""
    tool = box.write(someone / "bin" / "brewed", "#!/bin/sh\necho brewed ran\n", mode=0o755)
    outcome = box.run("brewed", path=f"{tool.parent}:/usr/bin:/bin")
    assert outcome.error is None, outcome.error
    assert "brewed ran" in outcome.text


WAIT_FOR_SURVEY = 60.0


def run_while_removing(box: Box, command: str, gone: Path) -> Outcome:
    """Run ``command`` in the box with ``gone`` (a home) removed between the
    survey and bwrap's start: the survey has listed it, bwrap never sees it."""
    marker = box.dir / "surveyed"
    results: list[Outcome | BaseException] = []

    def run() -> None:
        try:
            results.append(box.run(command, pause=(marker, gone)))
        except BaseException as exc:  # reported below, in the test's thread
            results.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + WAIT_FOR_SURVEY
    while not marker.exists() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    surveyed = marker.exists()
    shutil.rmtree(gone)
    thread.join()
    result = results[0]
    if isinstance(result, BaseException):
        raise result
    assert surveyed, "the survey never ran"
    return result


def test_a_home_removed_between_the_survey_and_the_start_does_not_fail_the_sandbox(
    box: Box, someone: Path
) -> None:
    """The start-up race: a home made by someone else (a concurrent test, a
    ``userdel -r``) that the survey found and bwrap's start did not. With a
    tmpfs over each home, bwrap made that one's mount point on the read-only
    ``/`` and failed ("Can't mkdir /home/...: Read-only file system"); under
    one tmpfs over ``/home`` it is simply not there. The home that stays is
    still empty inside, and the listing of ``/home`` names no one else."""
    if not os.access("/home", os.W_OK):  # a folder beside the homes: root's to make
        pytest.skip("making a folder under /home needs root")
    vanishing = Path("/home") / f"govsec-{secrets.token_hex(4)}"
    vanishing.mkdir(mode=0o755)
    (vanishing / ".npmrc").write_text(f"{CANARY}-vanishing\n")
    outcome = run_while_removing(
        box, f"echo started; ls -a /home; cat {someone}/.npmrc; ls -a {someone}", vanishing
    )
    assert outcome.error is None, outcome.error
    assert outcome.exit_code != 0  # cat: the other home's file is not there
    assert "started" in outcome.text
    assert CANARY not in outcome.text
    assert vanishing.name not in outcome.text and someone.name not in outcome.text.split()
    assert ".npmrc" not in outcome.text.splitlines()
