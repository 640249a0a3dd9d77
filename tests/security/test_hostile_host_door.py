"""Nothing on the host resolves through a place an agent could write.

Before an npx-preset agent starts, the governor fetches its package outside
the sandbox, as the operator. These attacks plant a ``sh`` where that fetch
(or npx, or the person's own next ``npx``) would look it up: in npx's cache
from inside the agent's sandbox, in npx's cache as an earlier attack left it,
in the ``node_modules/.bin`` of the folder the governor is started from. The
planted program writes a marker file on the host if it ever runs.

Real attempts: ``governor run --agent codex`` through the CLI as root and as
govtest, npm and npx against a local registry (`npm_registry`) that serves the
preset's pinned package with a scripted ACP agent as its program, the real
sandbox. The allowed neighbour each time: the npx agent runs, and its cache
serves the next run (offline inside its sandbox).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
import sysconfig
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import pytest
from escape_harness import REPO, USERS, Account, Box

sys.path.append(str(REPO / "tests"))
from checkout import needs_a_visible_checkout
from npm_registry import Registry, serving

from governor.agents.presets import presets

pytestmark = needs_a_visible_checkout()

GOVERNOR = Path(sys.executable).with_name("governor")
"""The console script, as a person runs it (``python -m`` would put the cwd on
``sys.path``: the governor refuses to run from inside a root)."""
SCRIPTED = REPO / "tests" / "audit" / "scripted_agent.py"
PRESET = presets()["codex"]
PACKAGE = f"{PRESET.package}@{PRESET.version}"

needs_npm = pytest.mark.skipif(
    not os.path.exists("/usr/bin/npx") and not os.environ.get("CI"), reason="npm is not installed"
)


def npx_folder(cache: str, package: str) -> Path:
    """Where npx keeps ``package``: libnpmexec's ``_npx/<sha512 hex[:16]>``."""
    return Path(cache) / "_npx" / hashlib.sha512(package.encode()).hexdigest()[:16]


def planted_sh(marker: Path) -> str:
    """A ``sh`` that leaves ``marker`` when it runs, then does what sh does
    (every run it is slipped into stays `completed`)."""
    return f'#!/bin/sh\necho ran > {shlex.quote(str(marker))}\nexec /bin/sh "$@"\n'


def publish_agent(registry: Registry, script: list[dict[str, Any]]) -> None:
    """The codex preset's pinned package, whose program is the scripted agent
    playing ``script`` (kept beside it in the package)."""
    launcher = (
        "#!/bin/sh\n"
        'here=$(dirname "$(readlink -f "$0")")\n'
        f'exec python3 {shlex.quote(str(SCRIPTED))} --script "$here/script.json"\n'
    )
    registry.publish(
        PRESET.package or "",
        PRESET.version or "",
        {"agent.sh": launcher, "script.json": json.dumps(script)},
        {PRESET.argv[0]: "agent.sh"},
    )


@pytest.fixture
def registry() -> Iterator[Registry]:
    with serving() as served:
        yield served


def box_for(accounts: dict[str, Account | str], user: str, name: str) -> Box:
    account = accounts[user]
    if isinstance(account, str):
        pytest.skip(f"{user}: {account}")
    assert account.base is not None
    return Box(user, account, account.base / f"{name}-{os.urandom(3).hex()}")


def governor_run(
    box: Box,
    registry: Registry,
    *,
    cwd: Path | None = None,
    extra: Sequence[str] = (),
    agent: Sequence[str] = ("--agent", "codex"),
    environ: Mapping[str, str] | None = None,
    workspace: Path | None = None,
    wrap: Sequence[str] = (),
) -> dict[str, Any]:
    """``governor run --json --agent codex`` (or ``agent``) as the box's user,
    ``$HOME`` the box's (its ``.npmrc`` names the local registry, which the
    agent is passed too: inside its sandbox npx finds its cache by the
    registry's address), a data folder of its own (nothing installed: the
    preset resolves to npx), ``environ`` added (a ``PYTHONPATH`` goes first)."""
    registry.npmrc(box.home)
    box.own(box.home / ".npmrc")
    data = box.dir / "data"
    if not data.exists():
        box.mkdir(data)
    env = {
        "HOME": str(box.home),
        "XDG_DATA_HOME": str(data),
        "XDG_STATE_HOME": str(data / "state"),
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "npm_config_registry": registry.url,
    }
    prefix: list[str] = []
    cli = [str(GOVERNOR)]
    driver = box.account.driver
    if driver is not None:  # the venv's interpreter may lie in root's home: the harness's
        args = [str(a) for a in driver.proc.args]  # runuser ... env -i K=V ... PYTHON DRIVER
        prefix = ["runuser", "-u", box.account.name, "--"]
        env["PYTHONPATH"] = f"{REPO}:{sysconfig.get_paths()['purelib']}"
        cli = [args[-2], "-P", "-m", "governor.cli"]  # -P: not the cwd on sys.path
    for name, value in (environ or {}).items():
        env[name] = f"{value}:{env[name]}" if name == "PYTHONPATH" and name in env else value
    log = box.dir / f"audit-{os.urandom(2).hex()}.jsonl"
    flags = ["--log", str(log), *extra] if "--log" not in extra else list(extra)
    # a preset (``--agent ID``) before the prompt; a command (``-- ARGV``) after it
    tail = ("do the task", *agent) if agent[0] == "--" else (*agent, "do the task")
    argv = [
        *wrap, *prefix, "env", "-i", *(f"{k}={v}" for k, v in env.items()),
        *cli, "run", "--json", "--capability", "edit-workspace",
        "--env", "npm_config_registry", "--workspace", str(workspace or box.ws), *flags,
        *tail,
    ]  # fmt: skip
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=600, cwd=cwd or box.dir, check=False
    )
    assert done.stdout, done.stderr[-3000:]
    outcome: dict[str, Any] = json.loads(done.stdout)
    return outcome


def plant_in_npx_cache(marker: Path) -> dict[str, Any]:
    """The agent's own tool writes ``sh`` into every npx folder it can see."""
    sh = planted_sh(marker)
    return {
        "shell": "for d in $HOME/.npm/_npx/*/node_modules; do mkdir -p $d/.bin && "
        f"printf %s {shlex.quote(sh)} > $d/.bin/sh && chmod 755 $d/.bin/sh; done; "
        "ls $HOME/.npm/_npx/*/node_modules/.bin/sh"
    }


@needs_npm
@pytest.mark.parametrize("user", USERS)
def test_what_an_npx_agent_writes_in_its_cache_never_runs_on_the_host(
    accounts: dict[str, Account | str], registry: Registry, user: str
) -> None:
    box = box_for(accounts, user, "npxcache")
    marker = box.dir / "planted-sh-ran"
    publish_agent(registry, [plant_in_npx_cache(marker), {"say": "planted"}])
    first = governor_run(box, registry)
    assert first["status"] == "completed", first
    assert "node_modules/.bin/sh" in json.dumps(first)  # the agent did write it, inside
    folder = npx_folder(str(box.home / ".npm"), PACKAGE)
    assert not (folder / "node_modules" / ".bin" / "sh").exists()  # never on the host
    # the next run's fetch, and the agent run offline from the cache (the neighbour)
    second = governor_run(box, registry)
    assert second["status"] == "completed", second
    assert not marker.exists()
    fetched = [r for r in registry.requests if r.startswith("tarballs/")]
    assert len(fetched) == 1, fetched  # the cache served the second run


@needs_npm
@pytest.mark.parametrize("user", USERS)
def test_a_sh_already_planted_in_npx_s_cache_is_not_run_by_the_fetch(
    accounts: dict[str, Account | str], registry: Registry, user: str
) -> None:
    box = box_for(accounts, user, "npxplanted")
    marker = box.dir / "planted-sh-ran"
    publish_agent(registry, [{"say": "hello"}])
    first = governor_run(box, registry)
    assert first["status"] == "completed", first
    # as an attack on an earlier governor left it
    bin_dir = npx_folder(str(box.home / ".npm"), PACKAGE) / "node_modules" / ".bin"
    assert bin_dir.is_dir(), list(bin_dir.parent.iterdir())
    box.write(bin_dir / "sh", planted_sh(marker), mode=0o755)
    second = governor_run(box, registry)
    assert second["status"] == "completed", second
    assert not marker.exists()


@needs_npm
@pytest.mark.parametrize("user", USERS)
def test_a_sh_in_the_workspace_s_node_modules_is_not_run_by_an_npx_run_started_there(
    accounts: dict[str, Account | str], registry: Registry, user: str
) -> None:
    box = box_for(accounts, user, "wsbin")
    marker = box.dir / "planted-sh-ran"
    publish_agent(registry, [{"say": "hello"}])
    box.mkdir(box.ws / "node_modules")
    box.mkdir(box.ws / "node_modules" / ".bin")
    box.write(box.ws / "node_modules" / ".bin" / "sh", planted_sh(marker), mode=0o755)
    outcome = governor_run(box, registry, cwd=box.ws)
    assert outcome.get("status") == "completed", outcome
    assert not marker.exists()


MCP_SERVER = """\
import json, sys
name = sys.argv[1]
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    result = {}
    if message.get("method") == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"], "capabilities": {},
                  "serverInfo": {"name": name, "version": "1"}}
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"""


def mcp_launcher(who: str) -> str:
    """A server's program: it leaves ``<its first argument>/<who>-ran`` (the
    workspace, for a writable server), then answers MCP as ``who``."""
    return (
        "#!/bin/sh\n"
        f'echo ran > "$1/{who}-ran"\n'
        f'exec python3 "$(dirname "$(readlink -f "$0")")/server.py" {who}\n'
    )


INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "scripted", "version": "1"}},
}  # fmt: skip


@needs_npm
@pytest.mark.parametrize("user", USERS)
def test_an_npx_server_runs_its_package_fetched_outside_never_a_bin_planted_in_the_workspace(
    accounts: dict[str, Account | str], registry: Registry, user: str
) -> None:
    box = box_for(accounts, user, "mcpnpx")
    registry.publish(
        "mcp-probe-server", "1.0.0",
        {"server.sh": mcp_launcher("genuine"), "server.py": MCP_SERVER}, {"mcp-probe": "server.sh"},
    )  # fmt: skip
    # what npx in the workspace would run: the same name and version, planted
    planted = box.ws / "node_modules" / "mcp-probe-server"
    for folder in (box.ws / "node_modules", box.ws / "node_modules" / ".bin", planted):
        box.mkdir(folder)
    manifest = {"name": "mcp-probe-server", "version": "1.0.0", "bin": {"mcp-probe": "server.sh"}}
    box.write(planted / "package.json", json.dumps(manifest))
    box.write(planted / "server.sh", mcp_launcher("planted"), mode=0o755)
    box.write(planted / "server.py", MCP_SERVER)
    (box.ws / "node_modules" / ".bin" / "mcp-probe").symlink_to("../mcp-probe-server/server.sh")
    policy = box.write(
        box.dir / "policy.toml",
        'capability = "edit-workspace"\n[[mcp.servers]]\nname = "probe"\n'
        f'command = ["npx", "-y", "mcp-probe-server@1.0.0", "{box.ws}"]\nwritable = true\n',
    )
    # in the workspace: the agent reads it inside its sandbox, which hides the home
    script = box.write(box.ws / "script.json", json.dumps([{"mcp": "probe", "send": [INITIALIZE]}]))
    log = box.dir / "audit.jsonl"
    outcome = governor_run(
        box, registry, extra=["--policy", str(policy), "--log", str(log)],
        agent=["--", "/usr/bin/python3", str(SCRIPTED), "--script", str(script)],
    )  # fmt: skip
    assert outcome.get("status") == "completed", outcome
    assert not (box.ws / "planted-ran").exists()
    assert (box.ws / "genuine-ran").exists()  # the neighbour: a writable server still writes
    assert '"serverInfo":{"name":"genuine"' in (outcome.get("summary") or ""), outcome
    (record,) = [
        r for r in map(json.loads, log.read_text().splitlines()) if r.get("kind") == "mcp-server"
    ]
    program = record["subject"]["program"]
    assert record["subject"]["command"][0] == "npx"
    assert program[0].startswith(str(box.dir / "data" / "acp-governor" / "mcp-servers")), program
    assert program[0].endswith("/node_modules/.bin/mcp-probe") and program[1:] == [str(box.ws)]


NPM_HOME: Final = "/usr/lib/node_modules/npm"
"""The system's npm package: its ``bin/npm-cli.js`` and ``bin/npx-cli.js`` are
what ``/usr/bin/npm`` and ``/usr/bin/npx`` link to."""


def nvm_only(nvm: Path) -> list[str]:
    """A mount namespace of its own (root's ``unshare``) where npm and npx are
    where nvm puts them, not in the system folders: ``nvm/lib/node_modules/npm``
    the system's package (bound before it is hidden), and the system's
    ``npm-cli.js`` and ``npx-cli.js`` covered by ``/dev/null``, so that
    ``/usr/bin/npm`` and ``/usr/bin/npx`` are no programs."""
    script = (
        f'mount --bind {NPM_HOME} "$0/lib/node_modules/npm" && '
        f"mount --bind /dev/null {NPM_HOME}/bin/npm-cli.js && "
        f'mount --bind /dev/null {NPM_HOME}/bin/npx-cli.js && exec "$@"'
    )
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, str(nvm)]


@needs_npm
@pytest.mark.skipif(os.getuid() != 0, reason="a mount namespace of its own needs root")
@pytest.mark.parametrize("planted", [True, False], ids=["npm-in-the-cwd", "none"])
@pytest.mark.parametrize("user", USERS)
def test_the_npm_beside_a_bare_npx_is_the_one_beside_npx_never_one_of_the_cwd(
    accounts: dict[str, Account | str], registry: Registry, user: str, planted: bool
) -> None:
    """Class: a file the agent leaves runs on the host (a program looked up
    where the governor stands). A server configured ``["npx", "-y", PKG]``
    is fetched by the npm beside that npx: it was looked up as
    ``find_program("npm", near=dirname(realpath("npx")))``, and a bare
    ``npx`` made ``near`` the governor's own cwd. With npm outside the system
    folders (nvm's), the person who starts the governor from a project an
    earlier attempt worked in ran the ``npm`` it left there, on the host, as
    themselves. Now ``npx`` is found by the door's lookup on the person's
    ``PATH``, and ``near`` is its folder: the planted ``npm`` never runs, and
    the server is fetched by nvm's npm and runs (the neighbour, with or
    without the planted file)."""
    box = box_for(accounts, user, "nearnpm")
    nvm = box.mkdir(box.dir / "nvm")
    for folder in (
        nvm / "bin",
        nvm / "lib",
        nvm / "lib" / "node_modules",
        nvm / "lib" / "node_modules" / "npm",
    ):
        box.mkdir(folder)
    for name in ("npm", "npx"):
        (nvm / "bin" / name).symlink_to(f"../lib/node_modules/npm/bin/{name}-cli.js")
        box.own(nvm / "bin" / name)
    project = box.mkdir(box.dir / "project")
    marker = box.dir / "planted-npm-ran"
    if planted:
        box.write(
            project / "npm",
            f"#!/bin/sh\necho ran > {shlex.quote(str(marker))}\nexit 1\n",
            mode=0o755,
        )
    registry.publish(
        "mcp-probe-server", "1.0.0",
        {"server.sh": mcp_launcher("genuine"), "server.py": MCP_SERVER}, {"mcp-probe": "server.sh"},
    )  # fmt: skip
    policy = box.write(
        box.dir / "policy.toml",
        'capability = "edit-workspace"\n[[mcp.servers]]\nname = "probe"\n'
        f'command = ["npx", "-y", "mcp-probe-server@1.0.0", "{box.ws}"]\nwritable = true\n',
    )
    script = box.write(box.ws / "script.json", json.dumps([{"mcp": "probe", "send": [INITIALIZE]}]))
    outcome = governor_run(
        box, registry, cwd=project, extra=["--policy", str(policy)],
        agent=["--", "/usr/bin/python3", str(SCRIPTED), "--script", str(script)],
        environ={"PATH": f"{nvm / 'bin'}:/usr/bin:/bin"}, wrap=nvm_only(nvm),
    )  # fmt: skip
    assert not marker.exists(), outcome
    assert outcome.get("status") == "completed", outcome
    assert (box.ws / "genuine-ran").exists(), outcome.get("summary")


@needs_npm
@pytest.mark.parametrize("user", USERS)
def test_an_npm_found_in_the_workspace_is_refused_naming_it_and_never_run(
    accounts: dict[str, Account | str], registry: Registry, user: str
) -> None:
    box = box_for(accounts, user, "wsnpm")
    marker = box.dir / "planted-npm-ran"
    publish_agent(registry, [{"say": "hello"}])
    bin_dir = box.ws / "node_modules" / ".bin"
    box.mkdir(box.ws / "node_modules")
    box.mkdir(bin_dir)
    for name in ("npm", "npx"):  # a project's own npm, first on the PATH the person gave
        box.write(
            bin_dir / name,
            f'#!/bin/sh\necho ran > {shlex.quote(str(marker))}\nexec /usr/bin/{name} "$@"\n',
            mode=0o755,
        )
    outcome = governor_run(box, registry, environ={"PATH": f"{bin_dir}:/usr/bin:/bin"})
    assert not marker.exists()
    assert outcome.get("status") == "failed", outcome
    reason = outcome.get("reason") or ""
    assert f"its program {bin_dir / 'npm'} lies in a root of the attempt" in reason, reason


def test_a_launcher_that_resolves_its_program_as_it_starts_is_refused_before_start_naming_it(
    accounts: dict[str, Account | str], registry: Registry
) -> None:
    box = box_for(accounts, "root", "launchers")
    servers = "".join(
        f'[[mcp.servers]]\nname = "s{i}"\ncommand = {json.dumps(command)}\n'
        for i, command in enumerate(
            (["uvx", "mcp-server-time"], ["pnpm", "dlx", "x"], ["bunx", "x"], ["npx", "./x"])
        )
    )
    policy = box.write(box.dir / "policy.toml", f'capability = "edit-workspace"\n{servers}')
    outcome = governor_run(
        box, registry, extra=["--policy", str(policy)],
        agent=["--", "/usr/bin/python3", str(SCRIPTED)],
    )  # fmt: skip
    problems = "\n".join(outcome.get("problems") or [])
    assert outcome.get("refused_before_start"), outcome
    for launcher in ("s0: uvx", "s1: pnpm dlx", "s2: bunx"):
        assert f"MCP server {launcher} fetches or resolves its program as it starts" in problems
    assert "MCP server s3: './x' is not a package of the registry" in problems, problems
    # the neighbour: a server given by its absolute program starts the run
    fine = box.write(
        box.dir / "fine.toml",
        'capability = "edit-workspace"\n[[mcp.servers]]\nname = "t"\n'
        f'command = ["/usr/bin/python3", "{box.ws}/server.py"]\n',
    )
    box.write(box.ws / "server.py", MCP_SERVER)
    started = governor_run(
        box,
        registry,
        extra=["--policy", str(fine)],
        agent=["--", "/usr/bin/python3", str(SCRIPTED)],
    )
    assert started.get("status") == "completed", started


@needs_npm
@pytest.mark.parametrize("user", USERS)
def test_an_agent_package_s_install_script_runs_only_in_a_sandbox_and_the_agent_still_works(
    accounts: dict[str, Account | str], registry: Registry, user: str
) -> None:
    box = box_for(accounts, user, "postinstall")
    marker = box.dir / "postinstall-ran-on-the-host"
    launcher = (
        "#!/bin/sh\n"
        'here=$(dirname "$(readlink -f "$0")")\n'
        f'exec python3 {shlex.quote(str(SCRIPTED))} --script "$here/script.json"\n'
    )
    # as opencode's: the bin is a placeholder until the script puts the program in place
    post = f"cat agent.real > agent.sh\necho ran > {shlex.quote(str(marker))}\n"
    registry.publish(
        PRESET.package or "",
        PRESET.version or "",
        {
            "agent.sh": "#!/bin/sh\necho 'the postinstall script was not run' >&2\nexit 1\n",
            "agent.real": launcher,
            "post.sh": post,
            "script.json": json.dumps([{"say": "hello"}]),
        },
        {PRESET.argv[0]: "agent.sh"},
        {"postinstall": "sh ./post.sh"},
    )
    outcome = governor_run(box, registry)
    assert not marker.exists()  # the host ran nothing of the package
    assert outcome.get("status") == "completed", outcome  # its script did run, sandboxed
