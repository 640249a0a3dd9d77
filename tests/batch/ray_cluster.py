"""A real local Ray cluster of its own, for the Ray tests and `bench/batch.py`.

`ray stop` stops every Ray on the machine, so a cluster started here is
stopped by its own processes only: the ones whose command line names its
temporary directory, and everything they started (the raylet's workers show
only ``ray::...`` as their command line). Every port is a free one picked here,
so two clusters (a test's and a bench's) do not meet on Ray's fixed defaults,
and everything listens on loopback.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

RAY = Path(sys.executable).parent / "ray"


def free_port() -> int:
    """A TCP port nothing listens on now (on loopback)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        tree.setdefault(ppid, []).append(int(entry))
    return tree


def _cmdline(pid: int) -> str:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return ""


class LocalRay:
    """``ray start --head`` in a temporary directory of its own; `stop` ends only it."""

    def __init__(self, num_cpus: int = 2, env: dict[str, str] | None = None) -> None:
        self.num_cpus = num_cpus
        self.env = env
        # Short: Ray's unix sockets live under it (108 bytes at most).
        self.root = Path(tempfile.mkdtemp(prefix="govray-", dir="/tmp"))
        self.address = ""

    def start(self) -> str:
        """Start the head node and return its address (``127.0.0.1:PORT``)."""
        port = free_port()
        argv = [
            str(RAY),
            "start",
            "--head",
            f"--port={port}",
            f"--num-cpus={self.num_cpus}",
            "--disable-usage-stats",
            "--include-dashboard=false",
            f"--temp-dir={self.root / 't'}",
            "--node-ip-address=127.0.0.1",
            f"--ray-client-server-port={free_port()}",
            f"--dashboard-port={free_port()}",
            f"--dashboard-agent-listen-port={free_port()}",
            f"--dashboard-agent-grpc-port={free_port()}",
            f"--runtime-env-agent-port={free_port()}",
            f"--metrics-export-port={free_port()}",
            f"--node-manager-port={free_port()}",
            f"--object-manager-port={free_port()}",
        ]
        env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", **(self.env or {})}
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            self.stop()
            raise RuntimeError(
                f"ray start failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
            )
        self.address = f"127.0.0.1:{port}"
        return self.address

    def pids(self) -> list[int]:
        """Every process of this cluster: its daemons and what they started."""
        tree = _children()
        marker = str(self.root)
        found = [int(p) for p in os.listdir("/proc") if p.isdigit() and marker in _cmdline(int(p))]
        seen: set[int] = set()
        stack = list(found)
        while stack:
            pid = stack.pop()
            if pid in seen or pid == os.getpid():
                continue
            seen.add(pid)
            stack.extend(tree.get(pid, []))
        return sorted(seen)

    def worker_running(self, name: str) -> int | None:
        """The pid of the worker whose process title is ``ray::NAME`` (the task it runs)."""
        for pid in self.pids():
            if _cmdline(pid).strip() == f"ray::{name}":
                return pid
        return None

    def stop(self) -> None:
        """SIGTERM to this cluster's processes, SIGKILL to what is left after 3 s."""
        for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
            pids = self.pids()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and self.pids():
                time.sleep(0.1)
            if not self.pids():
                break
        shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> LocalRay:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
