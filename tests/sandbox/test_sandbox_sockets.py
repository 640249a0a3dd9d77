"""The host's Unix sockets on real directories: what the scan finds, how /run looks."""

from __future__ import annotations

import os
import socket
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from governor.policies.capability import Capability
from governor.sandbox.host import sockets
from governor.sandbox.host.sockets import find_sockets, run_view
from governor.sandbox.host.survey import survey
from governor.sandbox.plan.profile import Profile
from governor.sandbox.plan.protected import HOST_DAEMON_SOCKETS


@pytest.fixture
def listening() -> Iterator[list[socket.socket]]:
    made: list[socket.socket] = []
    yield made
    for sock in made:
        sock.close()


def bind(directory: Path, name: str, made: list[socket.socket]) -> str:
    """A real socket file ``directory/name`` (bound relative to it: a temporary
    directory's path can be longer than a socket address allows)."""
    directory.mkdir(parents=True, exist_ok=True)
    sock = socket.socket(socket.AF_UNIX)
    here = os.getcwd()
    os.chdir(directory)
    try:
        sock.bind(name)
    finally:
        os.chdir(here)
    made.append(sock)
    return str(directory / name)


def test_the_scan_finds_a_socket_file_and_not_a_regular_file_or_a_fifo(
    tmp_path: Path, listening: list[socket.socket]
) -> None:
    found = bind(tmp_path / "srv", "x.sock", listening)
    (tmp_path / "srv" / "x.txt").write_text("not a socket")
    os.mkfifo(tmp_path / "srv" / "fifo")
    (tmp_path / "link.sock").symlink_to(found)
    assert find_sockets([str(tmp_path)]) == (found,)


def test_the_scan_is_bounded_by_depth_skips_and_its_budget_of_directories(
    tmp_path: Path, listening: list[socket.socket]
) -> None:
    shallow = bind(tmp_path / "a", "s", listening)
    deep = bind(tmp_path / "a" / "b" / "c", "s", listening)
    skipped = bind(tmp_path / "skipped", "s", listening)
    in_modules = bind(tmp_path / "node_modules", "s", listening)
    start = str(tmp_path)
    assert set(find_sockets([start])) == {shallow, deep, skipped}
    assert in_modules not in find_sockets([start])
    assert set(find_sockets([start], depth=2)) == {shallow, skipped}
    assert set(find_sockets([start], skip={str(tmp_path / "skipped")})) == {shallow, deep}
    # breadth-first: what a small budget leaves out is the deepest
    assert deep not in find_sockets([start], max_dirs=4)
    assert shallow in find_sockets([start], max_dirs=4)


def test_run_becomes_a_tmpfs_with_its_links_and_kept_directories_brought_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run = tmp_path / "run"
    (run / "postgresql").mkdir(parents=True)
    (run / "wrappers" / "bin").mkdir(parents=True)
    (run / "current-system").symlink_to("/nix/store/abc-system")
    (run / "resolve").mkdir()
    (run / "resolve" / "stub-resolv.conf").write_text("nameserver 127.0.0.53\n")
    (tmp_path / "varrun").symlink_to(run)
    resolv = tmp_path / "resolv.conf"
    resolv.symlink_to(run / "resolve" / "stub-resolv.conf")
    monkeypatch.setattr(sockets, "RUN_DIRS", (str(run), str(tmp_path / "varrun")))
    monkeypatch.setattr(sockets, "RUN_LINKED_FROM", (str(resolv), "/nonexistent/resolv.conf"))
    view = run_view()
    assert view.tmpfs == (str(run),)  # a link to it is the same tmpfs
    assert view.links == ((str(run / "current-system"), "/nix/store/abc-system"),)
    assert set(view.kept) == {str(run / "wrappers"), str(run / "resolve" / "stub-resolv.conf")}


def test_where_unix_sockets_are_allowed_run_is_hidden_and_the_scan_masks_the_rest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, home = tmp_path / "ws", tmp_path / "home"
    ws.mkdir()
    home.mkdir()
    # the module, not the function `governor.sandbox.host.survey` that the package exports
    monkeypatch.setattr(
        sys.modules["governor.sandbox.host.survey"], "host_sockets", lambda hidden: ("/srv/x.sock",)
    )
    own = survey(Profile(capability=Capability.EDIT_WORKSPACE, workspace=ws, home=home))
    assert "/run" in own.private_dirs and own.run_user_dir is None
    assert own.sockets == ("/srv/x.sock",)
    given = survey(
        Profile(capability=Capability.EDIT_WORKSPACE, workspace=ws, home=home), sockets=()
    )
    assert given.sockets == ()  # a session's commands reuse its scan
    shared = survey(
        Profile(capability=Capability.EDIT_WORKSPACE, workspace=ws, home=home, network=True)
    )
    assert "/run" not in shared.private_dirs
    assert set(shared.sockets) <= {os.path.realpath(s) for s in HOST_DAEMON_SOCKETS}


def test_a_scan_holds_while_no_directory_it_listed_has_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a" / "b").mkdir(parents=True)
    fresh = sockets.scan([str(tmp_path)])
    assert {path for path, _ in fresh.listed} == {str(tmp_path), str(tmp_path / "a"), str(tmp_path / "a" / "b")}
    # just made: the next change could carry the same coarse timestamp
    assert not fresh.holds()
    monkeypatch.setattr(sockets, "RACY_NS", 0)
    assert fresh.holds()
    changed = replace(fresh, listed=(*fresh.listed[:-1], (fresh.listed[-1][0], 1)))
    assert not changed.holds()
    gone = replace(fresh, listed=(*fresh.listed, (str(tmp_path / "gone"), 1)))
    assert not gone.holds()


def test_host_sockets_reuse_the_last_scan_while_it_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    scans: list[frozenset[str]] = []

    def fake_scan(starts: list[str], *, skip: set[str], depth: int) -> sockets.Scan:
        scans.append(frozenset(skip))
        return sockets.Scan(("/srv/x.sock",), (), 0)  # lists nothing: holds forever

    monkeypatch.setattr(sockets, "scan", fake_scan)
    monkeypatch.setattr(sockets, "_scans", {})
    assert sockets.host_sockets(hidden=("/home/u",)) == ("/srv/x.sock",)
    assert sockets.host_sockets(hidden=("/home/u",)) == ("/srv/x.sock",)
    assert len(scans) == 1
    sockets.host_sockets(hidden=("/home/v",))  # other paths left out: scanned again
    assert len(scans) == 2 and "/home/v" in scans[1] and "/usr" in scans[1]
    sockets.host_sockets(hidden=("/home/u",))  # and the first is still at hand
    assert len(scans) == 2


def test_hidden_paths_inside_another_hidden_path_share_one_scan(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    scans: list[frozenset[str]] = []

    def fake_scan(starts: list[str], *, skip: set[str], depth: int) -> sockets.Scan:
        scans.append(frozenset(skip))
        return sockets.Scan(("/srv/x.sock",), (), 0)

    monkeypatch.setattr(sockets, "scan", fake_scan)
    monkeypatch.setattr(sockets, "_scans", {})
    # the preflight's scratch workspace, then the agent's: both in a hidden /tmp
    sockets.host_sockets(hidden=("/tmp", "/home/u", "/tmp/governor-preflight-x"))
    sockets.host_sockets(hidden=("/tmp", "/home/u", "/tmp/ws"))
    assert len(scans) == 1
    sockets.host_sockets(hidden=("/tmp", "/home/u", "/srv/ws"))  # /srv/ws is scanned around
    assert len(scans) == 2 and "/srv/ws" in scans[1]
