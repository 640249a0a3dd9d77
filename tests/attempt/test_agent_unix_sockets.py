"""The sandboxed agent's own tools may use Unix sockets (its network namespace
is its own), and still reach no socket of the host's.

Test suites start servers on Unix sockets (Node's ``listen(path)``, uvicorn
``--uds``, PostgreSQL and Redis in ``/tmp``, tmux): an agent that runs them
with its own Bash needs ``socket(AF_UNIX)``. Its sandbox has a network
namespace of its own below full-access, so the host's abstract sockets (X11,
D-Bus) are out of reach whatever the filter says, and the survey hides the
host's socket files (``/run`` a tmpfs, a bounded scan elsewhere:
`governor.sandbox.host.sockets`), as it does for commands. Shown with a real attempt: the
scripted agent's own shell makes a server and a client in its workspace and in
``/tmp``, and tries the host's file socket (a server under ``/srv``) and
abstract socket (each counting who reached it): nothing reaches them. The
same for commands, as root and the unprivileged account, is in
tests/security/test_escapes.py.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "audit"))
from audit_helpers import scripted_spec

from governor import run_attempt

PROBE = r"""
import os, socket
def pair(path):
    try:
        server = socket.socket(socket.AF_UNIX); server.bind(path); server.listen()
        client = socket.socket(socket.AF_UNIX); client.connect(path)
        peer, _ = server.accept(); client.sendall(b"hi"); return peer.recv(2).decode()
    except OSError as e:
        return "failed:" + os.strerror(e.errno)
def reach(address):
    try:
        s = socket.socket(socket.AF_UNIX); s.settimeout(2); s.connect(address); return "REACHED"
    except OSError as e:
        return "refused:" + (os.strerror(e.errno) if e.errno else str(e))
print("workspace=" + pair("t.sock"))
print("tmp=" + pair("/tmp/t.sock"))
print("host_file=" + reach(os.environ["HOST_FILE"]))
print("host_abstract=" + reach("\0" + os.environ["HOST_ABSTRACT"]))
"""


class Listener:
    """A host Unix socket server counting the connections it accepts."""

    def __init__(self, address: str) -> None:
        self.hits = 0
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.bind(address)
        self.sock.listen()
        self.sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.hits += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def host_sockets() -> Iterator[tuple[str, str, list[Listener]]]:
    if not os.access("/srv", os.W_OK):  # a folder beside the homes: root's to make
        pytest.skip("making a folder under /srv needs root")
    folder = Path("/srv") / f"acp-agent-sockets-{secrets.token_hex(4)}"
    folder.mkdir(parents=True)
    name = f"acp-agent-abstract-{secrets.token_hex(4)}"
    listeners = [Listener(str(folder / "s.sock")), Listener("\0" + name)]
    try:
        yield str(folder / "s.sock"), name, listeners
    finally:
        for listener in listeners:
            listener.close()
        shutil.rmtree(folder, ignore_errors=True)


async def test_the_agents_own_tools_use_unix_sockets_but_reach_none_of_the_hosts(
    tmp_path: Path, host_sockets: tuple[str, str, list[Listener]]
) -> None:
    path, name, listeners = host_sockets
    # the neighbour first: the host's sockets answer on the host
    for address in (path, "\0" + name):
        with socket.socket(socket.AF_UNIX) as s:
            s.connect(address)
    for _ in range(100):
        if [x.hits for x in listeners] == [1, 1]:
            break
        time.sleep(0.02)
    assert [x.hits for x in listeners] == [1, 1]
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "probe.py").write_text(PROBE)  # in the workspace: /tmp is private inside
    steps = [{"shell": f"cd {{cwd}} && {sys.executable} probe.py > probe.txt 2>&1"}]
    environ = {"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/root"),
               "HOST_FILE": path, "HOST_ABSTRACT": name}  # fmt: skip
    spec = scripted_spec(tmp_path, steps, sandbox_agent=True, environ=environ,
                         env=["HOST_FILE", "HOST_ABSTRACT"])  # fmt: skip
    outcome = await run_attempt(spec)
    assert outcome.status == "completed", outcome.reason
    got = dict(
        line.split("=", 1) for line in (tmp_path / "ws" / "probe.txt").read_text().splitlines() if "=" in line
    )
    assert got["workspace"] == "hi" and got["tmp"] == "hi", got
    assert got["host_file"].startswith("refused:") and got["host_abstract"].startswith("refused:"), got
    assert [x.hits for x in listeners] == [1, 1]  # nothing more reached them
