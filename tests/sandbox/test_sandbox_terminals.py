"""ACP terminals over real sandboxed processes."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
import trio
from sandbox_procs import processes_matching

from governor.sandbox.net.judge import ConnectionAnswer, ConnectionRequest
from governor.sandbox.net.proxy import open_egress
from governor.sandbox.plan.profile import Profile, ProfileError
from governor.sandbox.run.execution import ExitStatus
from governor.sandbox.run.runner import DEFAULT_OUTPUT_LIMIT
from governor.sandbox.run.stubs import LEDGER
from governor.sandbox.run.terminals import Terminals, TerminalsClosed, UnknownTerminal


async def test_a_terminal_runs_a_shell_line_and_reports_output_and_exit(edit: Profile) -> None:
    async with trio.open_nursery() as nursery, Terminals(nursery, edit) as terminals:
        tid = await terminals.create("echo hi; echo there >&2; exit 4")
        status = await terminals.wait_for_exit(tid)
        assert status == ExitStatus(exit_code=4)
        output, truncated, exit_status = terminals.output(tid)
        assert output == "hi\nthere\n"
        assert not truncated
        assert exit_status == status


async def test_output_is_available_while_the_command_still_runs(edit: Profile) -> None:
    async with trio.open_nursery() as nursery, Terminals(nursery, edit) as terminals:
        tid = await terminals.create("echo early; sleep 30")
        with trio.fail_after(10):
            while terminals.output(tid).output != "early\n":
                await trio.sleep(0.01)
        assert terminals.output(tid).exit_status is None
        terminals.kill(tid)
        assert (await terminals.wait_for_exit(tid)).signal == "SIGKILL"
        assert terminals.output(tid).output == "early\n"  # still valid after kill


async def test_args_make_an_argv_and_env_and_cwd_apply_to_one_terminal(edit: Profile, ws: Path) -> None:
    (ws / "sub").mkdir()
    async with trio.open_nursery() as nursery, Terminals(nursery, edit) as terminals:
        tid = await terminals.create(
            "sh", ["-c", 'pwd; echo "$GREETING"'], env={"GREETING": "hello"}, cwd=ws / "sub"
        )
        await terminals.wait_for_exit(tid)
        assert terminals.output(tid).output == f"{ws / 'sub'}\nhello\n"


async def test_the_output_limit_truncates_to_the_newest_bytes(edit: Profile) -> None:
    async with trio.open_nursery() as nursery, Terminals(nursery, edit) as terminals:
        tid = await terminals.create("seq 1 1000", output_byte_limit=10)
        await terminals.wait_for_exit(tid)
        out = terminals.output(tid)
        assert out.truncated
        assert out.output == "\n999\n1000\n"[-10:]


def test_the_default_output_limit_is_one_mebibyte() -> None:
    assert DEFAULT_OUTPUT_LIMIT == 1024 * 1024


async def test_release_kills_a_running_command_and_invalidates_its_id(
    edit: Profile, no_leftovers: list[str]
) -> None:
    no_leftovers.append("sleep 36.6")
    async with trio.open_nursery() as nursery, Terminals(nursery, edit) as terminals:
        tid = await terminals.create("sleep 36.6")
        await terminals.release(tid)
        assert processes_matching("sleep 36.6") == []
        for call in (terminals.output, terminals.kill):
            with pytest.raises(UnknownTerminal) as info:
                call(tid)
            assert info.value.terminal_id == tid
        with pytest.raises(UnknownTerminal):
            await terminals.wait_for_exit(tid)
        with pytest.raises(UnknownTerminal):
            await terminals.release(tid)


async def test_an_unknown_id_raises_unknown_terminal(edit: Profile) -> None:
    async with trio.open_nursery() as nursery, Terminals(nursery, edit) as terminals:
        with pytest.raises(UnknownTerminal, match="term_nope"):
            terminals.output("term_nope")
        assert isinstance(UnknownTerminal("x"), LookupError)


async def test_close_kills_everything_and_refuses_new_terminals(
    edit: Profile, no_leftovers: list[str]
) -> None:
    no_leftovers += ["sleep 37.1", "sleep 37.2"]
    async with trio.open_nursery() as nursery:
        terminals = Terminals(nursery, edit)
        await terminals.create("sleep 37.1")
        await terminals.create("sleep 37.2")
        await terminals.close()
        assert processes_matching("sleep 37.1") == processes_matching("sleep 37.2") == []
        with pytest.raises(TerminalsClosed):
            await terminals.create("true")


async def test_a_refused_profile_starts_no_terminal(edit: Profile, tmp_path: Path) -> None:
    async with trio.open_nursery() as nursery, Terminals(nursery, edit) as terminals:
        with pytest.raises(ProfileError, match="outside the roots"):
            await terminals.create(f"touch {tmp_path}/ran", cwd=tmp_path)
        assert len(terminals) == 0
        assert not (tmp_path / "ran").exists()


async def test_stubs_persist_for_the_session_and_vanish_when_it_closes(edit: Profile, ws: Path) -> None:
    async with trio.open_nursery() as nursery, Terminals(nursery, edit) as terminals:
        for _ in range(2):
            tid = await terminals.create("mkdir .claude 2>&1 || echo refused")
            await terminals.wait_for_exit(tid)
            assert terminals.output(tid).output.endswith("refused\n")
        assert (ws / ".claude").is_file()
        assert str(ws / ".claude") in LEDGER.held()
    assert sorted(p.name for p in ws.iterdir()) == [".git"]


async def test_cancelling_the_owning_nursery_kills_the_commands(
    edit: Profile, no_leftovers: list[str]
) -> None:
    no_leftovers.append("sleep 38.8")
    async with trio.open_nursery() as nursery:
        terminals = Terminals(nursery, edit)
        tid = await terminals.create("sleep 38.8")
        assert terminals.output(tid).exit_status is None
        nursery.cancel_scope.cancel()
    assert processes_matching("sleep 38.8") == []


@pytest.mark.parametrize("network", [False, True])
async def test_governed_terminals_have_a_namespace_of_their_own_with_or_without_network(
    ws: Path, network: bool
) -> None:
    from governor.confine.sandboxes import GovernedTerminals
    from governor.policies.capability import Capability
    from governor.policies.policy import Policy

    policy = Policy(capability=Capability.EDIT_WORKSPACE, network=network).bind(str(ws))
    line = (
        "python3 -c 'import socket; s = socket.socket(socket.AF_UNIX); "
        "s.bind(\"t.sock\"); print(\"bound\")'"
    )
    async with trio.open_nursery() as nursery, open_egress(_refuse_all) as proxy:
        terminals = GovernedTerminals(nursery, policy, proxy=lambda: proxy)
        try:
            tid = await terminals.create(line, [], env={}, cwd=str(ws), output_byte_limit=None)
            code, _signal = await terminals.wait_for_exit(tid)
            output = terminals.output(tid)[0]
        finally:
            await terminals.close()
    # behind the proxy too: its abstract sockets are its own, the host's out of reach
    assert (code, output) == (0, "bound\n")


async def _refuse_all(request: ConnectionRequest) -> ConnectionAnswer:
    return ConnectionAnswer(False, "no")


async def test_governed_commands_with_network_reach_only_the_policys_hosts_through_the_proxy(
    ws: Path,
) -> None:
    from governor.audit.log import AuditLog
    from governor.confine.egress import judge
    from governor.confine.sandboxes import GovernedTerminals
    from governor.gate.approver import Unattended
    from governor.gate.gatekeeper import Gate
    from governor.policies.capability import Capability
    from governor.policies.policy import parse_policy

    servers = [http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Hello) for _ in range(2)]
    for server in servers:
        threading.Thread(target=server.serve_forever, daemon=True).start()
    allowed, unlisted = (server.server_address[1] for server in servers)
    policy = parse_policy(
        f'capability = "edit-workspace"\n[network]\nallow = ["127.0.0.1:{allowed}"]', "job.toml"
    ).bind(str(ws))
    assert policy.capability is Capability.EDIT_WORKSPACE
    audit = AuditLog(ws.parent / "audit.jsonl", "att")
    gate = Gate(policy, audit, Unattended())
    curl = "curl -s -m 10 -o /dev/null -w '%{http_code} '"
    # --noproxy '': through the proxy although NO_PROXY names loopback; '*': past it
    line = (
        f"{curl} --noproxy '' http://127.0.0.1:{allowed}/; {curl} --noproxy '*' http://127.0.0.1:{allowed}/; "
        f"{curl} --noproxy '' http://127.0.0.1:{unlisted}/; {curl} --noproxy '*' http://127.0.0.1:{unlisted}/"
    )
    try:
        async with trio.open_nursery() as nursery, open_egress(judge(gate)) as proxy:
            terminals = GovernedTerminals(nursery, policy, proxy=lambda: proxy)
            try:
                tid = await terminals.create(line, [], env={}, cwd=str(ws), output_byte_limit=None)
                await terminals.wait_for_exit(tid)
                output = terminals.output(tid)[0]
            finally:
                await terminals.close()
    finally:
        for server in servers:
            server.shutdown()
    assert output.split() == ["200", "200", "403", "000"], output
    network = [r for r in audit.records if r["kind"] == "network"]
    assert [(r["subject"]["origin"], r["verdict"]) for r in network] == [
        ("command", "allow"), ("command", "allow"), ("command", "deny")
    ]  # fmt: skip
    assert _Hello.paths.count(f"{unlisted}") == 0
    audit.close()


class _Hello(http.server.BaseHTTPRequestHandler):
    paths: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        _Hello.paths.append(str(self.server.server_address[1]))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def host_socket() -> Iterator[str]:
    """A host daemon's socket under ``/srv`` (the scan covers it: the start of
    each sandbox is then watched, `governor.sandbox.run.launch.open_launch`)."""
    import os
    import secrets
    import socket

    if os.getuid() != 0:
        pytest.skip("making a socket under /srv needs root")
    path = f"/srv/govtest-{secrets.token_hex(4)}.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(path)
    server.listen()
    try:
        yield path
    finally:
        server.close()
        os.unlink(path)


@pytest.mark.parametrize("via", ["session", "command"])
async def test_a_covered_host_socket_asks_no_proxy_of_a_sandbox_with_no_way_out(
    edit: Profile, host_socket: str, via: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The governor hands every sandbox of its commands the proxy's ``attach``;
    only one behind the proxy may call it, covered sockets or not."""
    from governor.sandbox.run import terminals as terminals_module

    asked: list[int] = []

    async def attach(pid: int) -> None:
        asked.append(pid)
        raise ProfileError("the commands' sandbox needs the egress proxy")

    if via == "command":  # no session's sandbox: a bwrap per command
        async def none(self: Terminals) -> None:
            return None

        monkeypatch.setattr(terminals_module.Terminals, "_shared_session", none)
    async with trio.open_nursery() as nursery, Terminals(nursery, edit, attach=attach) as terminals:
        tid = await terminals.create(f"echo hi; test -c {host_socket} && echo covered")
        assert await terminals.wait_for_exit(tid) == ExitStatus(exit_code=0)
        assert terminals.output(tid).output == "hi\ncovered\n"
    assert asked == []
