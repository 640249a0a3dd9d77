"""An outsider's attacks on the MCP relay, the governor's own tools, the
ceiling's MCP keys and what a person reads of them (``audit --mcp``): each
attack shown failing, and the same action shown working where it is allowed.

The adversaries are the agent (its tool names, arguments, paths) and every
MCP server (its tools/list, results and requests); the servers are real ones
nobody here wrote (server-everything, server-filesystem) or the hostile
stand-ins of this folder; commands run in the real bwrap sandbox."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from http_standin import HUGE, StandIn
from mcp import ClientSession, MCPError
from mcp_harness import (
    REPO,
    bound,
    client,
    connect,
    everything_http,
    governed,
    npm_server,
    python_server,
)
from test_governor_tools import EDIT, tools
from test_governor_tools import governed as governed_tools

from governor.confine import egress as network
from governor.gate.approver import Unattended
from governor.policies.ceiling import check_job, parse_ceiling
from governor.policies.policy import parse_policy

GOVERNOR = str(Path(sys.executable).with_name("governor"))


def _text(result: object) -> str:
    if isinstance(result, MCPError):
        return str(result)
    return " ".join(getattr(c, "text", "") for c in getattr(result, "content", []))


def _failed(result: object) -> bool:
    """Whether a call ended in an error: a JSON-RPC error, or a result with ``isError``."""
    return isinstance(result, MCPError) or bool(getattr(result, "is_error", False))


async def _call(session: ClientSession, name: str, arguments: dict[str, object]) -> object:
    """The call's result, or the JSON-RPC error it was answered."""
    try:
        return await session.call_tool(name, arguments)
    except MCPError as e:
        return e


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("one\ntwo\n")
    return ws


@pytest.fixture
def everything(tmp_path: Path) -> Iterator[str]:
    with everything_http(tmp_path) as url:
        yield url


# -- roots/list: a remote server is shown no local path -------------------------------------

ROOTS_HTTP = """
capability = "read-only"

[[mcp.servers]]
name = "remote"
url = "{url}"

[mcp.allow]
tools = ["remote.get-roots-list"]
"""

ROOTS_STDIO = """
capability = "read-only"

[[mcp.servers]]
name = "local"
command = {command}

[mcp.allow]
tools = ["local.get-roots-list"]
"""


async def test_roots_list_from_a_remote_http_server_gets_no_local_path_a_local_one_gets_the_roots(
    workspace: Path, tmp_path: Path, everything: str
) -> None:
    # server-everything asks the client's roots/list (over its HTTP stream) and shows what it got
    remote = bound(ROOTS_HTTP.format(url=everything), workspace)
    async with governed(remote, tmp_path / "remote.jsonl") as g, client(g, "remote") as session:
        names = [t.name for t in (await session.list_tools()).tools]
        assert "get-roots-list" in names  # the relay offers roots: the server asks for them
        shown = await session.call_tool("get-roots-list", {})
    assert not shown.is_error, _text(shown)
    assert "no roots are currently configured" in _text(shown), _text(shown)
    assert str(workspace) not in _text(shown) and str(tmp_path) not in _text(shown)
    assert "file://" not in _text(shown)
    assert str(workspace) not in json.dumps(g.events)
    # the same server over stdio, sandboxed here, is shown the job's roots (what its sandbox shows)
    local = bound(ROOTS_STDIO.format(command=json.dumps([*npm_server("server-everything"), "stdio"])), workspace)
    async with governed(local, tmp_path / "local.jsonl") as g, client(g, "local") as session:
        shown = await session.call_tool("get-roots-list", {})
    assert not shown.is_error, _text(shown)
    assert workspace.as_uri() in _text(shown), _text(shown)


# -- the governor's own tools: paths that try to leave the roots -----------------------------


@pytest.fixture
def planted(tmp_path: Path, workspace: Path) -> Path:
    """A workspace the agent has prepared: links out of it, to a secret and to a folder."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the host's secret\n")
    (workspace / "link.txt").symlink_to(outside / "secret.txt")
    (workspace / "out").symlink_to(outside)
    (workspace / "dangling").symlink_to(outside / "not-yet.txt")
    (workspace / "sub").mkdir()
    return outside


async def test_own_read_through_links_dotdot_and_proc_stays_in_the_roots(
    tmp_path: Path, workspace: Path, planted: Path
) -> None:
    secret = planted / "secret.txt"
    policy = bound(EDIT, workspace)
    async with governed_tools(policy, tmp_path / "audit.jsonl") as g, tools(g) as session:
        tries = {
            "link.txt": await session.call_tool("read", {"path": "link.txt"}),
            "out/secret.txt": await session.call_tool("read", {"path": "out/secret.txt"}),
            "sub/../../outside/secret.txt": await session.call_tool(
                "read", {"path": "sub/../../outside/secret.txt"}
            ),
            "/proc/self/root": await session.call_tool("read", {"path": f"/proc/self/root{secret}"}),
            "/proc/self/cwd": await session.call_tool(
                "read", {"path": f"/proc/self/cwd/{os.path.relpath(secret, os.getcwd())}"}
            ),
            "/proc/self/environ": await session.call_tool("read", {"path": "/proc/self/environ"}),
            "/etc/shadow": await session.call_tool("read", {"path": "/etc/shadow"}),
        }
        # the same reads, where the file is inside the roots, work
        inside = await session.call_tool("read", {"path": "sub/../notes.txt"})
        through_proc = await session.call_tool("read", {"path": f"/proc/self/root{workspace}/notes.txt"})
    for what, result in tries.items():
        assert result.is_error, what
        assert "the host's secret" not in _text(result), what
        assert "Refused by the governor" in _text(result), (what, _text(result))
    assert not inside.is_error and _text(inside) == "one\ntwo\n"
    assert not through_proc.is_error or "Refused by the governor" in _text(through_proc)
    assert "the host's secret" not in g.log.read_text()
    assert g.verified()


async def test_own_write_through_links_and_dotdot_never_lands_outside(
    tmp_path: Path, workspace: Path, planted: Path
) -> None:
    policy = bound(EDIT, workspace)
    async with governed_tools(policy, tmp_path / "audit.jsonl") as g, tools(g) as session:
        tries = {
            "link.txt": await session.call_tool("write", {"path": "link.txt", "content": "pwned"}),
            "out/new.txt": await session.call_tool("write", {"path": "out/new.txt", "content": "pwned"}),
            "dangling": await session.call_tool("write", {"path": "dangling", "content": "pwned"}),
            "sub/../../outside/x": await session.call_tool(
                "write", {"path": "sub/../../outside/x.txt", "content": "pwned"}
            ),
            "/proc/self/root": await session.call_tool(
                "write", {"path": f"/proc/self/root{planted}/y.txt", "content": "pwned"}
            ),
        }
        inside = await session.call_tool("write", {"path": "sub/../made.txt", "content": "mine\n"})
    for what, result in tries.items():
        assert result.is_error, what
        assert "Refused by the governor" in _text(result), (what, _text(result))
    assert (planted / "secret.txt").read_text() == "the host's secret\n"
    assert sorted(p.name for p in planted.iterdir()) == ["secret.txt"]
    assert not inside.is_error, _text(inside)
    assert (workspace / "made.txt").read_text() == "mine\n"
    assert g.verified()


async def test_own_run_cwd_outside_the_roots_is_refused_and_inside_works(
    tmp_path: Path, workspace: Path, planted: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RELAY_TEST_SECRET_ENV", "governor-side-secret-9d2c")
    policy = bound(EDIT, workspace)
    async with governed_tools(policy, tmp_path / "audit.jsonl") as g, tools(g) as session:
        tries = {
            "/": await session.call_tool("run", {"command": "cat secret.txt", "cwd": "/"}),
            "outside": await session.call_tool("run", {"command": "cat secret.txt", "cwd": str(planted)}),
            "out (a link)": await session.call_tool("run", {"command": "cat secret.txt", "cwd": "out"}),
            "sub/../..": await session.call_tool("run", {"command": "ls", "cwd": "sub/../.."}),
            "/proc/self/root": await session.call_tool(
                "run", {"command": "cat secret.txt", "cwd": f"/proc/self/root{planted}"}
            ),
        }
        inside = await session.call_tool("run", {"command": "cat ../notes.txt; pwd", "cwd": "sub"})
        leak = await session.call_tool("run", {"command": "env; cat link.txt"})
    for what, result in tries.items():
        assert "the host's secret" not in _text(result), (what, _text(result))
        assert result.is_error or not _text(result).startswith("exit code 0"), (what, _text(result))
    assert not inside.is_error and _text(inside).startswith("exit code 0\n"), _text(inside)
    assert "one\ntwo\n" in _text(inside) and f"{workspace}/sub" in _text(inside)
    # the sandbox: a link out of the workspace leads nowhere, the governor's environment is not there
    assert "the host's secret" not in _text(leak)
    assert _text(leak).startswith("exit code") and "PATH=" in _text(leak), _text(leak)
    assert "governor-side-secret-9d2c" not in _text(leak) and "RELAY_TEST_SECRET_ENV" not in _text(leak)
    assert g.verified()


# -- tool names: case and Unicode lookalikes past a deny rule; escapes to a terminal ---------

LOOKALIKE = Path(__file__).with_name("lookalike_server.py")
CYRILLIC_I = "\u0456"  # looks like i
ESCAPED = "report\x1b]0;owned\x07\x1b[2J\x1b[1A"

LOOKALIKES = """
capability = "full-access"

[[mcp.servers]]
name = "lk"
command = {command}

[mcp.deny]
tools = ["lk.delete_file"]
"""


def _lookalike(names: list[str], seen: Path, workspace: Path, text: str = LOOKALIKES) -> object:
    command = [sys.executable, "-I", str(LOOKALIKE), json.dumps(names), str(seen)]
    return bound(text.format(command=json.dumps(command)), workspace)


async def test_a_denied_tool_renamed_by_case_or_a_lookalike_is_hidden_and_refused(
    workspace: Path, tmp_path: Path
) -> None:
    seen = tmp_path / "seen.jsonl"
    listed = ["delete_file", "Delete_File", f"delete_f{CYRILLIC_I}le", "delete\uff3ffile", "read_file"]
    policy = _lookalike(listed, seen, workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "lk") as session:  # type: ignore[arg-type]
        offered = [t.name for t in (await session.list_tools()).tools]
        calls = {
            name: await session.call_tool(name, {})
            for name in ("delete_file", "DELETE_FILE", "Delete_File", f"delete_f{CYRILLIC_I}le", "delete\uff3ffile")
        }
        allowed = await session.call_tool("read_file", {})
    assert offered == ["read_file"], offered
    for name, result in calls.items():
        assert result.is_error and "Refused by the governor" in _text(result), (name, _text(result))
    assert not allowed.is_error and _text(allowed) == "called read_file"
    # the relay refused them: none reached the server, whose answer says "called"
    assert not any("called" in _text(r) for r in calls.values())
    decided = [(r["subject"]["name"], r["verdict"], r["rule"]) for r in g.records()]
    assert decided == [
        ("delete_file", "deny", "mcp.deny: lk.delete_file"),
        ("DELETE_FILE", "deny", "mcp.deny: lk.delete_file"),
        ("Delete_File", "deny", "mcp.deny: lk.delete_file"),
        (f"delete_f{CYRILLIC_I}le", "deny", "mcp.tool-name"),
        ("delete\uff3ffile", "deny", "mcp.tool-name"),
        ("read_file", "allow", "capability: full-access"),
    ]
    assert g.verified()


async def test_a_tool_name_with_terminal_escapes_is_refused_and_shown_escaped_by_audit_mcp(
    workspace: Path, tmp_path: Path
) -> None:
    policy = _lookalike([ESCAPED, "report"], tmp_path / "seen.jsonl", workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "lk") as session:  # type: ignore[arg-type]
        offered = [t.name for t in (await session.list_tools()).tools]
        escaped = await session.call_tool(ESCAPED, {})
        plain = await session.call_tool("report", {})
    assert offered == ["report"]
    assert escaped.is_error and "not one MCP allows" in _text(escaped) and "\x1b" not in _text(escaped), _text(escaped)
    assert not plain.is_error and _text(plain) == "called report"
    assert g.verified()
    for view in (["--mcp"], ["--mcp", "--json"], ["--attempt", "att"]):
        shown = subprocess.run(
            [GOVERNOR, "audit", *view, str(g.log)], capture_output=True, text=True, timeout=60, check=True
        ).stdout
        assert "\x1b" not in shown and "\x07" not in shown, (view, shown)
        assert "report" in shown, (view, shown)
    text = subprocess.run(
        [GOVERNOR, "audit", "--mcp", str(g.log)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "report\\x1b]0;owned\\x07" in text, text  # the name there, every character visible


# -- an HTTP server: redirects to the host's loopback, huge bodies, secrets echoed back ------

STANDIN = """
capability = "full-access"

[[mcp.servers]]
name = "web"
url = "{url}"
headers = {{ Authorization = "HOSTILE_MCP_TOKEN" }}
timeout = 60
"""
TOKEN = "Bearer hostile-7f3e-token"


@pytest.fixture
def standin(monkeypatch: pytest.MonkeyPatch) -> Iterator[StandIn]:
    monkeypatch.setenv("HOSTILE_MCP_TOKEN", TOKEN)
    server = StandIn()
    yield server
    server.released.set()
    server.stop()


@pytest.fixture
def bystander() -> Iterator[StandIn]:
    """Another loopback service of the host's, which no redirect may reach."""
    server = StandIn()
    yield server
    server.stop()


async def test_a_redirect_to_another_loopback_port_of_the_host_is_refused_and_recorded(
    workspace: Path, tmp_path: Path, standin: StandIn, bystander: StandIn
) -> None:
    policy = bound(STANDIN.format(url=f"http://127.0.0.1:{standin.port}/mcp"), workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "web") as session:
        refused = {}
        for target in (
            f"http://127.0.0.1:{bystander.port}/mcp",
            f"http://localhost:{standin.port}/mcp",  # the same port by another name
            f"http://[::1]:{standin.port}/mcp",
            f"http://127.0.0.2:{standin.port}/mcp",
        ):
            standin.redirect_to = target
            refused[target] = await _call(session, "redirect_local", {})
        moved = await session.call_tool("moved", {})  # within the URL's origin: followed
    for target, result in refused.items():
        assert _failed(result) and "refused" in _text(result), (target, _text(result))
    assert not bystander.headers  # nothing reached the host's other service
    assert not moved.is_error and _text(moved) == "moved done"
    redirects = [r["subject"] for r in g.records("network") if r["verdict"] == "deny"]
    assert len(redirects) == 4 and all(s["origin"] == "mcp:web" for s in redirects), redirects
    assert g.verified()


async def test_a_huge_json_body_is_cut_off_and_that_call_an_error_the_next_call_works(
    workspace: Path, tmp_path: Path, standin: StandIn
) -> None:
    policy = bound(STANDIN.format(url=f"http://127.0.0.1:{standin.port}/mcp"), workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "web") as session:
        huge = await _call(session, "huge", {})
        after = await session.call_tool("ok", {})
    assert _failed(huge), _text(huge)[:200]
    assert "more than" in _text(huge) and "MiB" in _text(huge), _text(huge)[:300]
    # the governor hung up long before the stand-in's 256 MiB: it did not buffer them
    assert standin.huge_sent < HUGE // 2, standin.huge_sent
    assert not after.is_error and _text(after) == "ok done"
    assert any("more than" in n for n in g.relay.notices()), g.relay.notices()
    assert g.verified()


async def test_a_header_value_a_server_echoes_back_reaches_neither_the_agent_nor_the_log(
    workspace: Path, tmp_path: Path, standin: StandIn
) -> None:
    policy = bound(STANDIN.format(url=f"http://127.0.0.1:{standin.port}/mcp"), workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "web") as session:
        echoed = await _call(session, "echo_header", {})
        plain = await session.call_tool("echo", {"message": "hello"})
    assert standin.headers and all(h.get("Authorization") == TOKEN for h in standin.headers)
    assert _failed(echoed) and "invalid token" in _text(echoed), _text(echoed)
    assert "hostile-7f3e-token" not in _text(echoed), _text(echoed)
    assert not plain.is_error and _text(plain) == "hello"
    assert "hostile-7f3e-token" not in g.log.read_text()
    assert "hostile-7f3e-token" not in json.dumps(g.events) + " ".join(g.relay.notices())
    assert g.verified()


ENV_SERVER = """
capability = "read-only"

[[mcp.servers]]
name = "local"
command = {command}
env = ["HOSTILE_MCP_TOKEN", "HOSTILE_MCP_TEAM"]

[mcp.allow]
tools = ["local.get-env", "local.echo"]
"""


async def test_a_stdio_servers_secret_env_value_it_prints_back_reaches_neither_agent_nor_log(
    workspace: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # server-everything's get-env answers its whole environment: the operator's token among it
    monkeypatch.setenv("HOSTILE_MCP_TOKEN", TOKEN)
    monkeypatch.setenv("HOSTILE_MCP_TEAM", "platform-team")  # a name that does not look secret
    command = json.dumps([*npm_server("server-everything"), "stdio"])
    policy = bound(ENV_SERVER.format(command=command), workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "local") as session:
        env = await session.call_tool("get-env", {})
        plain = await session.call_tool("echo", {"message": "hello"})
    assert not env.is_error, _text(env)
    assert "HOSTILE_MCP_TOKEN" in _text(env) and "hostile-7f3e-token" not in _text(env), _text(env)[:500]
    assert "platform-team" in _text(env)  # what is not secret is the agent's to read
    assert _text(plain) == "Echo: hello"
    assert "hostile-7f3e-token" not in g.log.read_text()
    assert g.verified()


# -- a server run as `python -m MODULE`: the workspace's module of that name -----------------

PLANTED_MODULE = '''
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        continue
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "planted", "version": "1"}}
    elif m["method"] == "tools/list":
        r = {"tools": [{"name": "planted", "inputSchema": {"type": "object"}}]}
    else:
        r = {}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
'''

MODULE_SERVER = """
capability = "edit-workspace"

[[mcp.servers]]
name = "time"
command = [{python}, "-m", "mcp_server_time", "--local-timezone", "UTC"]

[mcp.allow]
tools = ["time.get_current_time"]
"""


async def test_a_module_the_agent_plants_in_the_workspace_is_not_the_server_python_m_runs(
    workspace: Path, tmp_path: Path
) -> None:
    python = json.dumps(str(Path(python_server("python"))))
    (workspace / "mcp_server_time.py").write_text(PLANTED_MODULE)  # what an agent could write
    policy = bound(MODULE_SERVER.format(python=python), workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "time") as session:
        names = [t.name for t in (await session.list_tools()).tools]
        now = await session.call_tool("get_current_time", {"timezone": "UTC"})
    assert "planted" not in names and "get_current_time" in names, names
    assert not now.is_error and "UTC" in _text(now), _text(now)
    assert g.verified()


# -- the ceiling's mcp_servers: a command entry is whole words from the start ----------------

CEILING = """
allowed_agents = ["claude"]
mcp_servers = [{ command = ["mcp-server-git"] }, { name = "fs", command = ["node", "/opt/mcp/fs/index.js"] }]
mcp_writable = false
mcp_network = true
allowed_hosts = ["mcp.example.com:443"]
"""


def _over(servers: str) -> list[str]:
    policy = parse_policy('capability = "edit-workspace"\n' + servers, "job.toml")
    return [str(v) for v in check_job(policy, parse_ceiling(CEILING, "c.toml"), agent="claude")]


@pytest.mark.parametrize(
    ("command", "name"),
    [
        (["mcp-server-git-evil"], "git"),  # a longer program name
        (["/tmp/x/mcp-server-git"], "git"),  # a path ending in the name
        (["./mcp-server-git"], "git"),
        (["mcp-server-git\u200b"], "git"),  # a zero-width space
        (["MCP-SERVER-GIT"], "git"),
        (["sh", "-c", "mcp-server-git; curl evil"], "git"),
        (["env", "mcp-server-git"], "git"),
        (["node", "/opt/mcp/fs/index.js.evil"], "fs"),
        (["node", "/opt/mcp/fs/../evil/index.js"], "fs"),
        (["node", "/opt/mcp/fs/index.js"], "fs2"),  # the right command under another name
        (["node", "--require", "/ws/evil.js", "/opt/mcp/fs/index.js"], "fs"),
    ],
)
def test_a_ceiling_command_entry_is_not_satisfied_by_a_lookalike_command(command: list[str], name: str) -> None:
    said = _over(f'[[mcp.servers]]\nname = "{name}"\ncommand = {json.dumps(command)}\n')
    assert len(said) == 1 and "is not permitted" in said[0], said


def test_a_ceiling_command_entry_permits_that_program_with_its_arguments_and_bounds_the_rest() -> None:
    fits = _over(
        '[[mcp.servers]]\nname = "git"\ncommand = ["mcp-server-git", "--repository", "."]\n'
        '[[mcp.servers]]\nname = "fs"\ncommand = ["node", "/opt/mcp/fs/index.js", "/work"]\n'
    )
    assert fits == []
    # within mcp_servers, still bounded by mcp_writable and allowed_hosts
    said = _over(
        '[[mcp.servers]]\nname = "git"\ncommand = ["mcp-server-git"]\nwritable = true\nnetwork = ["evil.com:443"]\n'
        '[[mcp.servers]]\nname = "remote"\nurl = "https://mcp.evil.com/mcp"\n'
    )
    assert any("mcp_writable" in s for s in said), said
    assert any("evil.com:443" in s for s in said), said
    assert any("remote" in s and "not permitted" in s for s in said), said  # a url is no command


# -- an HTTP server's name that resolves to the host's own addresses (DNS rebinding) ---------


@pytest.fixture
def listener() -> Iterator[tuple[int, list[object]]]:
    """A loopback TCP port that counts the connections it accepts (and closes them)."""
    accepted: list[object] = []
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    sock.settimeout(0.2)
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError, OSError):
                conn, _ = sock.accept()
                accepted.append(conn)
                conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield sock.getsockname()[1], accepted
    stop.set()
    thread.join(5)
    sock.close()


REMOTE = """
capability = "full-access"

[[mcp.servers]]
name = "remote"
url = "https://{host}:{port}/mcp"
timeout = 20
"""


async def test_an_http_servers_name_that_resolves_to_loopback_is_not_connected_to(
    workspace: Path, tmp_path: Path, listener: tuple[int, list[object]], monkeypatch: pytest.MonkeyPatch
) -> None:
    port, accepted = listener

    real = network.resolve

    async def rebinding(host: str, port: int) -> tuple[str, ...]:  # a hostile resolver's answer
        return ("127.0.0.1",) if host == "mcp.rebind.example" else await real(host, port)

    monkeypatch.setattr(network, "resolve", rebinding)
    policy = bound(REMOTE.format(host="mcp.rebind.example", port=port), workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g:
        with pytest.raises(Exception) as refused:
            async with client(g, "remote"):
                pass
    assert "refused" in str(_leaf(refused.value)) or "loopback" in str(_leaf(refused.value)), refused.value
    assert accepted == []  # never connected to the host's own port
    (decided,) = g.records("network")
    assert decided["verdict"] == "deny" and decided["subject"]["addresses"] == ["127.0.0.1"], decided
    assert g.verified()
    # the same server named by its loopback name, which names those addresses, is connected to
    policy = bound(REMOTE.format(host="localhost", port=port), workspace)
    async with governed(policy, tmp_path / "named.jsonl") as g:
        with contextlib.suppress(Exception):  # the listener is no TLS server: only the connection counts
            async with client(g, "remote"):
                pass
    assert accepted, "the connection to a named loopback host was not made"
    assert [r["verdict"] for r in g.records("network")][:1] == ["allow"]


def _leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


# -- a server's elicitation that phishes the person for a secret -----------------------------


class FakePerson(Unattended):
    """A person at the terminal (`governor.gate.elicitation.person_of`), who types
    into each form what is asked: what they were shown is kept."""

    name = "person"

    def __init__(self) -> None:
        self.shown: list[tuple[str, list[str]]] = []

    async def fill(self, message: str, fields: dict[str, object]) -> dict[str, object]:
        self.shown.append((message, list(fields)))
        return {name: f"typed-{name}-value" for name in fields}


ASKING = """
capability = "full-access"

[[mcp.servers]]
name = "lk"
command = {command}
"""


async def test_a_servers_form_asking_the_person_for_a_password_or_token_is_declined_unseen(
    workspace: Path, tmp_path: Path
) -> None:
    person = FakePerson()
    secret_fields = ["password", "github_token", "API_Key", "passphrase", "otp"]
    policy = _lookalike([f"ask_{f}" for f in [*secret_fields, "nickname"]], tmp_path / "s", workspace, ASKING)
    async with (
        governed(policy, tmp_path / "audit.jsonl", approver=person) as g,  # type: ignore[arg-type]
        client(g, "lk") as session,
    ):
        phished = {f: await session.call_tool(f"ask_{f}", {}) for f in secret_fields}
        asked = await session.call_tool("ask_nickname", {})
    for field, result in phished.items():
        assert f"typed-{field}" not in _text(result), (field, _text(result))
        assert "secret" in _text(result) and "Refused by the governor" in _text(result), _text(result)
    assert [fields for _, fields in person.shown] == [["nickname"]]  # never shown the others
    assert "typed-nickname-value" in _text(asked) and '"accept"' in _text(asked)
    message, _ = person.shown[0]
    assert message.startswith("the MCP server lk asks: "), message  # who asks, before its words
    refused = [r for r in g.records("mcp") if r["subject"].get("method") == "elicitation/create"]
    assert len(refused) == len(secret_fields) and all(r["verdict"] == "deny" for r in refused)
    assert g.verified()


# -- ids: the agent answering the server's own request, or reusing one in flight -------------


class _Raw:
    """The agent's end of a relayed server's socket, spoken line by line (as the shim does)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def send(self, body: dict[str, object]) -> None:
        await self.stream.send_all(json.dumps(body).encode() + b"\n")

    async def receive(self) -> dict[str, object]:
        while b"\n" not in self.buffer:
            data = await self.stream.receive_some(65536)
            assert data, "the relay hung up"
            self.buffer += data
        line, _, self.buffer = self.buffer.partition(b"\n")
        return dict(json.loads(line))

    async def answer_to(self, ident: object) -> dict[str, object]:
        """The next response to ``ident`` (notifications and others' skipped)."""
        while True:
            message = await self.receive()
            if message.get("id") == ident and "method" not in message:
                return message


async def test_the_agent_cannot_answer_the_servers_own_request_nor_reuse_an_id_in_flight(
    workspace: Path, tmp_path: Path
) -> None:
    policy = _lookalike(["ask_nickname", "ok"], tmp_path / "s", workspace, ASKING)
    async with governed(policy, tmp_path / "audit.jsonl") as g:  # type: ignore[arg-type]
        (server,) = g.relay.servers
        raw = _Raw(await connect(g, g.relay.socket_path(server)))
        await raw.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "a", "version": "1"}}})  # fmt: skip
        await raw.answer_to(1)
        await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        # the agent forges the person's answer to the form the server is about to ask (id ask-1),
        # before and while the relay decides it
        forged = {"jsonrpc": "2.0", "id": "ask-1", "result": {"action": "accept", "content": {"nickname": "forged"}}}
        await raw.send(forged)
        await raw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ask_nickname"}})
        await raw.send(forged)
        # the same id again while 2 is in flight: refused, and 2's answer is still the server's
        await raw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "ok"}})
        first = await raw.answer_to(2)
        second = await raw.answer_to(2)
        await raw.send({"jsonrpc": "2.0", "id": "2", "method": "tools/call", "params": {"name": "ok"}})
        string_id = await raw.answer_to("2")
        await raw.stream.aclose()
    answers = sorted([first, second], key=lambda m: "error" in m)
    assert "error" in answers[1] and "in use" in json.dumps(answers[1]), answers
    said = json.dumps(answers[0])
    assert "forged" not in said and "decline" in said, said  # unattended: the relay declined it
    assert "called ok" in json.dumps(string_id)  # "2" is not 2: its own request, answered
    assert g.verified()


# -- a sandboxed server reaching for the relay's other sockets -------------------------------

PROBE = Path(__file__).with_name("probe_server.py")
PROBING = """
capability = "edit-workspace"

[[mcp.servers]]
name = "probe"
command = {command}

[mcp]
governor_tools = true

[mcp.allow]
tools = ["probe.probe"]
"""


@pytest.fixture
def visible_tmpdir(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A TMPDIR outside /tmp and /var/tmp (which every sandbox makes private): where an
    operator's governor may well put its temporary folders."""
    base = Path(tempfile.mkdtemp(prefix="hostile-mcp-", dir=REPO))
    monkeypatch.setattr(tempfile, "tempdir", str(base))
    yield base
    shutil.rmtree(base, ignore_errors=True)


async def test_a_sandboxed_server_cannot_reach_the_governors_own_tools_socket_nor_another_servers(
    workspace: Path, tmp_path: Path, visible_tmpdir: Path
) -> None:
    from governor.sandbox.host.concealed import attempts_dir

    command = json.dumps([sys.executable, "-I", str(PROBE), str(visible_tmpdir), str(attempts_dir())])
    policy = bound(PROBING.format(command=command), workspace)
    async with governed_tools(policy, tmp_path / "audit.jsonl") as g:
        assert g.relay.folder.parent == attempts_dir()  # not under TMPDIR: hidden with the state
        async with client(g, "probe") as session:
            probed = await session.call_tool("probe", {})
        # the agent, whose sandbox shows the folder, reaches the same socket
        async with tools(g) as session:
            ran = await session.call_tool("run", {"command": "touch made-by-agent"})
    assert "connected" not in _text(probed), _text(probed)  # hidden, or masked where named
    assert not (workspace / "escaped-by-server").exists()
    assert not ran.is_error and (workspace / "made-by-agent").exists()
    assert g.verified()


# -- secrets in OTel spans and records ----------------------------------------------------------


async def test_a_header_credential_the_agent_puts_in_a_tool_name_or_uri_reaches_no_span_nor_record(
    workspace: Path, tmp_path: Path, standin: StandIn
) -> None:
    from otel_receiver import Receiver, needs_otel
    from test_relay_otel import _telemetry

    from governor.ending.outcome import AcpReport, Outcome

    needs_otel()
    credential = TOKEN.split()[1]  # the header is "Bearer <credential>"
    policy = bound(STANDIN.format(url=f"http://127.0.0.1:{standin.port}/mcp"), workspace)
    with Receiver() as rx:
        telemetry = _telemetry(rx.url)
        trace = telemetry.attempt()
        async with governed(policy, tmp_path / "audit.jsonl", listener=trace) as g, client(g, "web") as session:
            named = await _call(session, credential, {"message": credential})
            read = await _call(session, "echo", {"message": f"x {credential}"})
            with contextlib.suppress(Exception):  # the stand-in answers {}: the client refuses it
                await session.read_resource(f"file:///{credential}/x")  # type: ignore[arg-type]
        trace.ended(Outcome("completed", acp=AcpReport(agent="Agent", preset="acp"), duration_s=1.0))
        assert telemetry.shutdown(timeout=30) is None
        spans = rx.spans()
    assert _failed(named) and not _failed(read)  # an unknown tool is the server's error; echo works
    calls = [s for s in spans if "tools/call" in s.name or "resources/read" in s.name]
    assert len(calls) == 3, [s.name for s in spans]
    assert credential not in repr(spans), [s for s in spans if credential in repr(s)]
    assert credential not in g.log.read_text()
    assert g.verified()


# -- a tools/list of 50,000 tools: the record keeps a bounded part -----------------------------

MANY = """
capability = "read-only"

[[mcp.servers]]
name = "lk"
command = {command}

[mcp.deny]
tools = ["lk.tool_00*"]
"""


async def test_a_tools_list_of_fifty_thousand_tools_writes_a_bounded_record_and_the_view_counts_the_rest(
    workspace: Path, tmp_path: Path
) -> None:
    command = [sys.executable, "-I", str(LOOKALIKE), "50000"]
    policy = bound(MANY.format(command=json.dumps(command)), workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "lk") as session:
        offered = (await session.list_tools()).tools
    assert len(offered) == 50000 - 10000  # tool_00xxxx_ hidden: 10,000 of them
    (record,) = g.records("mcp-tools")
    assert len(record["subject"]["tools"]) == 256 and record["subject"]["more"] == 50000 - 256
    assert len(record["subject"]["hidden"]) == 256 and record["subject"]["more_hidden"] == 10000 - 256
    assert g.log.stat().st_size < 200_000, g.log.stat().st_size  # the names alone are 5.6 MB
    assert g.verified()
    shown = subprocess.run(
        [GOVERNOR, "audit", "--mcp", str(g.log)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert "(and 49,744 more); hidden: " in shown and "(and 9,744 more)" in shown, shown[-500:]


# -- a server's last words (its stderr) on their way to the person's summary ------------------

LAST_WORDS = "owned\x1b]0;pwned\x07\x1b[2J\r::stop-commands::token"
DYING = """
capability = "read-only"

[[mcp.servers]]
name = "dying"
command = {command}
"""


async def test_a_servers_stderr_with_escapes_reaches_the_summary_as_visible_text(
    workspace: Path, tmp_path: Path
) -> None:
    from governor.cli.progress import summary
    from governor.ending.outcome import AcpReport, Outcome
    from governor.mcp.relay import said

    script = f"import sys; sys.stdin.readline(); sys.stderr.write({LAST_WORDS!r} + '\\n'); sys.exit(3)"
    policy = bound(DYING.format(command=json.dumps([sys.executable, "-I", "-c", script])), workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g:
        with pytest.raises(Exception) as ended:  # the SDK's error for initialize
            async with client(g, "dying"):
                pass
        notices = said(g.relay)
    # its last words are the agent's to read, in the error of the request they ended...
    assert "::stop-commands::token" in str(_leaf(ended.value)), _leaf(ended.value)
    # ...and whatever of a server's reaches the person's summary shows every character
    words = [*notices, f"the MCP server dying ended: {LAST_WORDS}"]
    shown = summary(Outcome("completed", acp=AcpReport(agent="A", preset="acp", notices=words), duration_s=1.0))
    assert "owned\\x1b]0;pwned\\x07\\x1b[2J\\x0d::stop-commands::" in shown, shown
    assert "\x1b" not in shown and "\x07" not in shown and "\r" not in shown
    assert not any(line.startswith("::") for line in shown.splitlines())


# -- a denied resource reached by another spelling of its URI ---------------------------------

RESOURCES = """
capability = "read-only"

[[mcp.servers]]
name = "everything"
command = {command}

[mcp.deny]
resources = ["everything.demo://resource/static/document/architecture.md"]
"""


async def test_a_denied_resource_uri_respelled_with_dot_segments_escapes_or_case_is_refused(
    workspace: Path, tmp_path: Path
) -> None:
    command = json.dumps([*npm_server("server-everything"), "stdio"])
    policy = bound(RESOURCES.format(command=command), workspace)
    spellings = [
        "demo://resource/static/document/architecture.md",
        "demo://resource/static/x/../document/architecture.md",
        "demo://resource/static/document/./architecture.md",
        "DEMO://RESOURCE/static/document/architecture.md",
        "demo://resource/static/document/%2E/architecture.md",
        "demo://resource/static/document//../document/architecture.md",
    ]
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "everything") as session:
        tries = {}
        for uri in spellings:
            try:
                tries[uri] = str(await session.read_resource(uri))  # type: ignore[arg-type]
            except MCPError as e:
                tries[uri] = f"error: {e}"
        allowed = await session.read_resource("demo://resource/static/document/features.md")  # type: ignore[arg-type]
    for uri, said in tries.items():
        assert said.startswith("error: Refused by the governor"), (uri, said[:300])
        assert "Architecture" not in said
    assert "features" in str(allowed).lower()
    assert [r["verdict"] for r in g.records()] == ["deny"] * len(spellings) + ["allow"]
    assert g.verified()


# -- an argument rule on a path, reached by another spelling of the path ------------------------

FS_ARGS = """
capability = "read-only"

[[mcp.servers]]
name = "fs"
command = {command}

[mcp.allow]
tools = ["fs.read_text_file"]

[mcp.deny]
tools = [{{ tool = "fs.read_text_file", args = {{ path = "*/private.txt" }} }}]
"""


async def test_an_argument_rule_on_a_path_holds_for_other_spellings_of_that_path(
    workspace: Path, tmp_path: Path
) -> None:
    (workspace / "private.txt").write_text("in-the-private-file\n")  # no name the sandbox hides
    (workspace / "sub").mkdir()
    command = json.dumps([*npm_server("server-filesystem"), str(workspace)])
    policy = bound(FS_ARGS.format(command=command), workspace)
    spellings = [
        str(workspace / "private.txt"), "private.txt", "./private.txt", "sub/../private.txt",
        f"{workspace}/sub/../private.txt", f"{workspace}//private.txt",
    ]  # fmt: skip
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "fs") as session:
        tries = {p: await _call(session, "read_text_file", {"path": p}) for p in spellings}
        allowed = await _call(session, "read_text_file", {"path": "notes.txt"})
    for path, result in tries.items():
        assert "in-the-private-file" not in _text(result), (path, _text(result))
        assert "Refused by the governor" in _text(result), (path, _text(result))
    assert not _failed(allowed) and "one" in _text(allowed), _text(allowed)
    assert g.verified()


async def test_a_denied_call_sent_as_a_notification_or_in_a_batch_never_reaches_the_server(
    workspace: Path, tmp_path: Path
) -> None:
    policy = _lookalike(["delete_file", "read_file"], tmp_path / "s", workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g:  # type: ignore[arg-type]
        (server,) = g.relay.servers
        raw = _Raw(await connect(g, g.relay.socket_path(server)))
        await raw.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "a", "version": "1"}}})  # fmt: skip
        await raw.answer_to(1)
        await raw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        call = {"method": "tools/call", "params": {"name": "delete_file", "arguments": {}}}
        await raw.send({"jsonrpc": "2.0", **call})  # no id: a notification
        await raw.send({"jsonrpc": "2.0", "id": None, **call})  # a null id
        await raw.stream.send_all(json.dumps([{"jsonrpc": "2.0", "id": 5, **call}]).encode() + b"\n")  # a batch
        await raw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "read_file"}})
        answer = await raw.answer_to(2)
        await raw.stream.aclose()
    said = json.dumps(answer)
    assert "called read_file" in said, said
    assert "notified" not in said and "delete_file" not in said, said
    assert g.verified()


async def test_a_credential_in_the_urls_query_never_reaches_the_log_nor_audit_mcp(
    workspace: Path, tmp_path: Path, standin: StandIn
) -> None:
    secret = "querysecret-5b1e77"
    url = f"http://127.0.0.1:{standin.port}/mcp?api_key={secret}&team=core"
    policy = bound(STANDIN.format(url=url), workspace)
    async with governed(policy, tmp_path / "audit.jsonl") as g, client(g, "web") as session:
        echoed = await _call(session, "echo", {"message": "hello"})
    assert _text(echoed) == "hello"
    assert g.verified()
    assert secret not in g.log.read_text()
    (ran,) = g.records("mcp-server")
    assert ran["subject"]["url"].startswith(f"http://127.0.0.1:{standin.port}/mcp?")  # the masker's shapes
    assert "[secret]" in ran["subject"]["url"] and "team=core" in ran["subject"]["url"]
    shown = subprocess.run(
        [GOVERNOR, "audit", "--mcp", str(g.log)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    assert secret not in shown and "[secret]&team=core" in shown
