"""The escape suite's harness (a uniquely named module; conftest.py holds only
the fixtures): every attack runs for real, as root and as an unprivileged user.

* ``root``: the test process itself calls `sandbox_driver.execute` (the runner,
  in-process). Skipped when the suite does not run as root.
* ``unprivileged``: a driver process running as the ``govtest`` user (created
  with ``useradd`` when missing) executes the same function and answers over a
  pipe. When the suite itself runs unprivileged, it executes in-process.

Workspaces, fake homes and sibling directories live under one session directory
in ``/tmp`` (mode 0755), each test's files owned by the user under test. Host
side checks (did the file appear? is the hook there?) are made by the test
process, which can see everything.
"""

from __future__ import annotations

import base64
import json
import os
import pwd
import select
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
from sandbox_driver import execute

REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("sandbox_driver.py")
TEST_USER = "govtest"
USERS = ("root", "unprivileged")
VIAS = ("command", "session")
"""How a command reaches its sandbox: a bwrap of its own, or a session's sandbox
(`governor.sandbox.run.session`). Every attack runs both ways."""
REPLY_TIMEOUT = 120
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
}  # fmt: skip
"""A declared identity for commits inside (the sandbox's $HOME has no .gitconfig)."""


@dataclass(frozen=True)
class Outcome:
    """What one sandboxed command did (the same shape for both users)."""

    exit_code: int | None
    signal: str | None
    text: str
    truncated: bool
    timed_out: bool
    total: int
    peak: int
    maxrss_kib: int
    error: str | None
    limit: str | None = None
    """The limit the command stopped at, as `governor.sandbox.run.execution.ExitStatus` names it."""

    @classmethod
    def from_answer(cls, answer: dict[str, Any]) -> Outcome:
        if answer.get("error"):
            return cls(None, None, "", False, False, 0, 0, 0, answer["error"])
        return cls(
            answer["exit_code"],
            answer["signal"],
            base64.b64decode(answer["output"]).decode("utf-8", "replace"),
            answer["truncated"],
            answer["timed_out"],
            answer["total"],
            answer["peak"],
            answer["maxrss_kib"],
            None,
            answer.get("limit"),
        )


class Driver:
    """The long-lived unprivileged driver process."""

    def __init__(self, argv: list[str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=None, text=True, cwd=cwd
        )
        ready = self._reply()
        self.uid = int(ready["ready"])

    def _reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        readable, _, _ = select.select([self.proc.stdout], [], [], REPLY_TIMEOUT)
        if not readable:
            raise TimeoutError("the unprivileged driver did not answer")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the unprivileged driver died (status {self.proc.poll()})")
        reply: dict[str, Any] = json.loads(line)
        return reply

    def execute(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._reply()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@dataclass
class Account:
    name: str
    uid: int
    gid: int
    home: str
    driver: Driver | None  # None: this process is that account
    base: Path | None = None  # scratch space for this account's boxes


def _run_as(account_name: str, argv: Sequence[str], env: dict[str, str], **kw: Any) -> subprocess.CompletedProcess[str]:
    env_argv = ["env", "-i", *[f"{k}={v}" for k, v in env.items()]]
    return subprocess.run(
        ["runuser", "-u", account_name, "--", *env_argv, *argv], text=True, capture_output=True, **kw
    )


def unprivileged_account(base: Path) -> Account | str:
    """The account for the unprivileged half, or the reason it cannot run."""
    if os.getuid() != 0:
        entry = pwd.getpwuid(os.getuid())
        return Account(entry.pw_name, entry.pw_uid, entry.pw_gid, entry.pw_dir, None)
    if shutil.which("runuser") is None:
        return "runuser is not installed"
    try:
        entry = pwd.getpwnam(TEST_USER)
    except KeyError:
        made = subprocess.run(
            ["useradd", "--create-home", "--shell", "/bin/sh", TEST_USER],
            capture_output=True, text=True,
        )
        if made.returncode != 0:
            return f"cannot create user {TEST_USER}: {made.stderr.strip()}"
        entry = pwd.getpwnam(TEST_USER)
    site = sysconfig.get_paths()["purelib"]
    pythonpath = f"{REPO}:{site}"
    env = {"PYTHONPATH": pythonpath, "HOME": entry.pw_dir, "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [os.path.realpath(sys.executable), f"/usr/bin/python{version}", "/usr/local/bin/python" + version]
    probe = f"import sys; assert sys.version_info[:2] == ({sys.version_info.major}, {sys.version_info.minor}); import trio, governor.sandbox.run.runner"
    tried = []
    for python in dict.fromkeys(candidates):
        if not os.path.exists(python):
            continue
        check = _run_as(TEST_USER, [python, "-c", probe], env, cwd=base)
        if check.returncode == 0:
            driver = Driver(
                ["runuser", "-u", TEST_USER, "--", "env", "-i",
                 *[f"{k}={v}" for k, v in env.items()], python, str(DRIVER)],
                cwd=base,
            )
            return Account(TEST_USER, entry.pw_uid, entry.pw_gid, entry.pw_dir, driver)
        tried.append(f"{python}: {check.stderr.strip().splitlines()[-1:]}")
    return f"no Python {version} usable by {TEST_USER} with the repo and venv readable ({'; '.join(tried)})"


class Box:
    """One attack's world: a workspace (a git repo), a fake home with secrets,
    a sibling directory, and a way to run commands in the sandbox as the user."""

    def __init__(self, user: str, account: Account, root: Path, via: str = "command") -> None:
        self.user = user
        self.via = via
        self.account = account
        self.uid = account.uid
        self.gid = account.gid
        self.dir = root
        self.mkdir(root)
        self.ws = self.mkdir(root / "ws")
        self.home = self.mkdir(root / "home")
        self.sibling = self.mkdir(root / "sibling")
        self.write(self.sibling / "existing.txt", "sibling content")
        self.git("init", "-q")
        self.write(self.ws / "README.md", "hello")
        self.git("add", "README.md")
        self.git("commit", "-q", "-m", "init")

    # host-side helpers -------------------------------------------------
    def own(self, path: Path) -> None:
        os.chown(path, self.uid, self.gid, follow_symlinks=False)

    def mkdir(self, path: Path) -> Path:
        missing = []
        current = path
        while not current.exists():
            missing.append(current)
            current = current.parent
        for directory in reversed(missing):
            directory.mkdir()
            directory.chmod(0o755)
            self.own(directory)
        return path

    def write(self, path: Path, text: str = "", *, mode: int | None = None) -> Path:
        self.mkdir(path.parent)
        path.write_text(text)
        self.own(path)
        if mode is not None:
            path.chmod(mode)
        return path

    def host(self, *argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        """Run on the host (outside any sandbox) as the user under test."""
        env = {"HOME": str(self.home), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        if self.account.name == pwd.getpwuid(os.getuid()).pw_name:
            return subprocess.run(list(argv), text=True, capture_output=True, cwd=cwd or self.ws, env=env)
        return _run_as(self.account.name, argv, env, cwd=cwd or self.ws)

    def git(self, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        return self.host(
            "git", "-c", "init.defaultBranch=main", "-c", "user.email=t@example.invalid",
            "-c", "user.name=t", *args, cwd=cwd,
        )

    # sandbox -------------------------------------------------------------
    def run(
        self,
        command: str | Sequence[str],
        *,
        capability: str = "edit-workspace",
        network: bool = False,
        env: dict[str, str] | None = None,
        home: Path | str | None = "fake",
        home_folders: Sequence[tuple[str, bool]] = (),
        allow_unix_sockets: bool | None = None,
        extra_roots: Sequence[Path] = (),
        cwd: Path | None = None,
        workspace: Path | None = None,
        timeout: float = 30,
        output_limit: int = 1 << 20,
        environ: dict[str, str] | None = None,
        then: str | None = None,
        path: str | None = None,
        keep: Sequence[Path] = (),
        toolchains: bool = True,
        git_read_only: bool = False,
        limits: dict[str, float] | None = None,
        unprotected: Sequence[str] = (),
        read_only: Sequence[Path] = (),
        pause: tuple[Path, Path] | None = None,
        pause_at: str = "survey",
    ) -> Outcome:
        """Run ``command`` in the sandbox; with ``then``, run that shell line
        next (in the same session's sandbox, or in a bwrap of its own, per
        `via`) and report the second. ``pause`` (marker, gone): between the
        survey and bwrap's start, make the file marker and wait until gone is
        removed (`sandbox_driver.paused_after_survey`); ``pause_at="spawn"``: at
        bwrap's spawn instead, its arguments built."""
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else list(command)
        request = {
            "argv": argv,
            "profile": {
                "capability": capability,
                "workspace": str(workspace or self.ws),
                "extra_roots": [str(p) for p in extra_roots],
                "network": network,
                "env": env or {},
                "home": str(self.home) if home == "fake" else (str(home) if home else None),
                "home_folders": [list(f) for f in home_folders],
                "allow_unix_sockets": allow_unix_sockets,
                "cwd": str(cwd) if cwd else None,
                "path": path,
                "keep": [str(p) for p in keep],
                "toolchains": toolchains,
                "git_read_only": git_read_only,
                "limits": limits,
                "unprotected": list(unprotected),
                "read_only": [str(p) for p in read_only],
            },
            "timeout": timeout,
            "via": self.via,
            "then": ["/bin/sh", "-c", then] if then is not None else None,
            "output_limit": output_limit,
            "environ": environ or {},
            "pause": {"marker": str(pause[0]), "gone": str(pause[1]), "at": pause_at} if pause else None,
        }
        if self.account.driver is not None:
            return Outcome.from_answer(self.account.driver.execute(request))
        return Outcome.from_answer(trio.run(execute, request))


def processes_matching(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline:
            found.append(int(entry))
    return found
