"""A host socket removed between the survey and bwrap's start fails no
sandbox, and one that is there at the start stays out of reach: as root and
as the unprivileged user, in a bwrap of its own and in a session's sandbox
(the agent's sandbox: tests/attempt/test_agent_socket_race.py).

The race is made real: a host process listens on a socket under ``/srv``
(scanned, and not private inside as ``/tmp`` is), the survey finds it, the
sandbox's bwrap arguments are built with its cover, and only then, at
bwrap's spawn (`sandbox_driver.paused_after_survey`, ``at="spawn"``), it is
removed. bwrap could not make the cover's mount point on the read-only ``/``
("Can't create file at /srv/...: Read-only file system") and the start
failed; now the launch is made again from a fresh scan.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import threading
import time
from pathlib import Path

import pytest
from escape_harness import Box, Outcome
from test_escapes import CANARY, connect_unix, marker, unix_server

WAIT_FOR_SURVEY = 60.0


def run_while_removing(
    box: Box, command: str, gone: str, server: contextlib.ExitStack, at: str = "spawn"
) -> Outcome:
    """Run ``command`` in the box; at its bwrap's spawn, its arguments built
    with a cover for ``gone`` (or, ``at="survey"``, right after its survey),
    stop ``server`` (the listener on ``gone``: it unlinks its socket)."""
    surveyed = box.dir / "surveyed"
    results: list[Outcome | BaseException] = []

    def run() -> None:
        try:
            results.append(box.run(command, pause=(surveyed, Path(gone)), pause_at=at))
        except BaseException as exc:  # reported below, in the test's thread
            results.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + WAIT_FOR_SURVEY
    while not surveyed.exists() and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.01)
    reached = surveyed.exists()
    server.close()
    thread.join()
    result = results[0]
    if isinstance(result, BaseException):
        raise result
    assert reached, "the sandbox's spawn was never reached"
    assert not os.path.lexists(gone)
    return result


@pytest.mark.parametrize("at", ["spawn", "survey"])
def test_a_host_socket_removed_before_bwraps_mount_fails_no_start_and_one_that_stays_is_covered(
    box: Box, at: str
) -> None:
    """At the spawn: bwrap failed on it, and the launch is made again. Right
    after the survey: the check just before bwrap's arguments leaves it out."""
    if os.getuid() != 0:
        pytest.skip("making a socket under /srv needs root")
    name = marker()
    gone, stays = f"/srv/{name}-gone.sock", f"/srv/{name}-stays.sock"
    vanishing = contextlib.ExitStack()
    vanishing.enter_context(unix_server(gone, box))
    with vanishing, unix_server(stays, box), unix_server(str(box.ws / "own.sock"), box) as own:
        # the neighbour outside: a plain process of the user reaches the host's socket
        outside = box.host("/bin/sh", "-c", connect_unix(stays))
        assert outside.stdout.strip() == f"BANNER-{CANARY}", outside
        outcome = run_while_removing(
            box,
            f"echo started; {connect_unix(stays)}; {connect_unix(own)}; ls {gone} 2>&1",
            gone,
            vanishing,
            at,
        )
    assert outcome.error is None, outcome.error
    lines = outcome.text.strip().splitlines()
    assert lines[0] == "started", outcome.text
    assert lines[1] == "ERR ECONNREFUSED", outcome.text  # /dev/null over it: no one listens
    assert lines[2] == f"BANNER-{CANARY}", outcome.text  # the sandbox's own socket answers
    assert "No such file" in lines[3], outcome.text  # the gone one is not there: nothing to cover



def test_a_command_that_prints_bwraps_line_itself_is_not_run_again(box: Box) -> None:
    """The retry follows bwrap's own failure before the command ran, not words
    in the output: a command that prints what bwrap would and fails runs once,
    its status and output its own."""
    if os.getuid() != 0:
        pytest.skip("making a socket under /srv needs root")
    path = f"/srv/{marker()}.sock"
    line = f"bwrap: Can't create file at {path}: Read-only file system"
    with unix_server(path, box):
        outcome = box.run(f"echo ran >> ran.txt; echo {shlex.quote(line)}; exit 1")
    assert outcome.error is None, outcome.error
    assert (outcome.exit_code, outcome.text) == (1, line + "\n")
    assert (box.ws / "ran.txt").read_text() == "ran\n"
