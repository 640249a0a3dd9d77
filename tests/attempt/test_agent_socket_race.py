"""The agent's sandbox starts though a host socket it was to cover vanished
between the survey and bwrap's mount, and a host socket that is there at its
start stays out of the agent's reach.

The race is made real in a real attempt with the scripted agent: a host
process listens on a socket under ``/srv``; at the agent's bwrap spawn, its
arguments built with a cover for that socket, the socket is removed. bwrap
could not make the cover's mount point on the read-only ``/`` and the attempt
ended with "the agent's stdout closed before it answered 'initialize' --
python said: bwrap: Can't create file at ..."; now the launch is made again
from a fresh scan. The same for commands and a session's sandbox, as root
and the unprivileged account: tests/security/test_socket_race.py.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "audit"))
from audit_helpers import SCRIPTED, scripted_spec
from test_agent_unix_sockets import Listener

from governor import run_attempt
from governor.sandbox.run import launch

PROBE = r"""
import os, socket
for name in ("STAYS", "GONE"):
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(os.environ[name])
        print(name + "=REACHED")
    except OSError as e:
        print(name + "=refused:" + os.strerror(e.errno))
"""


@pytest.fixture
def folder() -> Iterator[Path]:
    if os.getuid() != 0:
        pytest.skip("making a socket under /srv needs root")
    made = Path("/srv") / f"acp-socket-race-{secrets.token_hex(4)}"
    made.mkdir()
    try:
        yield made
    finally:
        shutil.rmtree(made, ignore_errors=True)


async def test_a_socket_vanishing_before_the_agents_bwrap_mounts_fails_no_attempt(
    tmp_path: Path, folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stays, gone = Listener(str(folder / "stays.sock")), Listener(str(folder / "gone.sock"))
    try:
        with socket.socket(socket.AF_UNIX) as s:  # the neighbour: it answers on the host
            s.connect(str(folder / "stays.sock"))
        for _ in range(100):
            if stays.hits == 1:
                break
            time.sleep(0.02)
        assert stays.hits == 1
        real = launch.spawn
        removed: list[tuple[str, ...]] = []

        def spawn(argv: Any, **kw: Any) -> Any:
            if not removed and str(SCRIPTED) in argv:
                removed.append(tuple(argv))
                gone.close()
                os.unlink(folder / "gone.sock")  # the cover's mount point, gone
            return real(argv, **kw)

        monkeypatch.setattr(launch, "spawn", spawn)
        (tmp_path / "ws").mkdir()
        (tmp_path / "ws" / "probe.py").write_text(PROBE)
        steps = [{"shell": f"cd {{cwd}} && {sys.executable} probe.py > probe.txt 2>&1"}]
        environ = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"),
                   "STAYS": str(folder / "stays.sock"), "GONE": str(folder / "gone.sock")}  # fmt: skip
        spec = scripted_spec(tmp_path, steps, sandbox_agent=True, environ=environ,
                             env=["STAYS", "GONE"])  # fmt: skip
        outcome = await run_attempt(spec)
    finally:
        stays.close()
        gone.close()
    assert removed, "the agent's bwrap was never spawned"
    assert outcome.status == "completed", outcome.reason
    got = dict(
        line.split("=", 1) for line in (tmp_path / "ws" / "probe.txt").read_text().splitlines() if "=" in line
    )
    assert got["STAYS"].startswith("refused:"), got  # covered: /dev/null, no one listens
    assert got["GONE"] == "refused:No such file or directory", got
    assert stays.hits == 1  # nothing inside reached it
