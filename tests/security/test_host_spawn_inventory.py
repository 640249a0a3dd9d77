"""Every process the governor starts on the host, recorded, and held to the rules.

A whole attempt through the real CLI, started from inside its own workspace
(the worst cwd a person can give it): an npx-preset agent (fetched outside by
the governor) that opens a session of an npx-launched MCP server (fetched
outside too), as root and as govtest. An audit hook in the governor process
(``sitecustomize`` on its ``PYTHONPATH``: `sys.addaudithook` for
``subprocess.Popen``, ``os.posix_spawn``, ``os.exec`` and ``os.system``)
writes down each spawn: its program, its cwd and its ``PATH``. The test fails
on a cwd or ``PATH`` entry inside a root, a home folder the agent may write
or npm's cache, and on a program `docs/security.md`'s inventory does not list.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Final

import pytest
from escape_harness import REPO, USERS, Account
from npm_registry import Registry
from test_hostile_host_door import (
    INITIALIZE,
    MCP_SERVER,
    PRESET,
    box_for,
    governor_run,
    mcp_launcher,
    needs_npm,
    publish_agent,
    registry,
)

__all__ = ["registry"]  # the fixture

from checkout import needs_a_visible_checkout

pytestmark = needs_a_visible_checkout()

HOOK = """\
import json, os, sys

_OUT = os.environ.get("HOSTDOOR_SPAWNS")


def _record(event, args):
    if event == "subprocess.Popen":
        executable, argv, cwd, env = args
    elif event == "os.posix_spawn":
        executable, argv, env = args
        cwd = None
    elif event == "os.exec":
        executable, argv, env = args
        cwd = None
    elif event == "os.system":
        executable, argv, cwd, env = "/bin/sh", ["/bin/sh", "-c", args[0]], None, None
    else:
        return
    path = (env or {}).get("PATH") if env is not None else os.environ.get("PATH")
    if isinstance(path, bytes):
        path = path.decode()
    line = {"event": event, "argv": [os.fsdecode(a) for a in argv],
            "cwd": os.fsdecode(cwd) if cwd is not None else os.getcwd(), "PATH": path}
    with open(_OUT, "a") as out:
        out.write(json.dumps(line) + "\\n")


if _OUT:
    sys.addaudithook(_record)
"""

NOT_OURS: Final = {("/sbin/ldconfig", "-p")}
"""Spawns a library makes as it is imported, whose cwd is the governor's own:
trio's ``ctypes.util.find_library("pthread")``, an absolute program that reads
only ``/etc/ld.so.cache`` (the inventory lists it as such)."""

INVENTORY = REPO / "docs" / "security.md"


def inventory() -> list[str]:
    """The programs `docs/security.md`'s inventory lists (its table's first column)."""
    text = INVENTORY.read_text(encoding="utf-8")
    section = text.split("## Processes the governor starts on the host", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \|", section, flags=re.M)


def listed(argv: list[str], programs: list[str]) -> bool:
    """Whether a spawn's program is one the inventory names (the governor's own
    interpreter is listed as ``python``: it runs the standalone scripts)."""
    name = os.path.basename(argv[0])
    if re.fullmatch(r"python3?(\.\d+)?", name):
        name = "python"
    return name in programs


def inside(path: str, places: list[Path]) -> Path | None:
    real = os.path.realpath(path)
    for place in places:
        for p in (path, real):
            if p == str(place) or p.startswith(f"{place}/"):
                return place
    return None


@needs_npm
@pytest.mark.parametrize("user", USERS)
def test_every_host_process_of_a_whole_run_starts_outside_every_place_an_agent_writes(
    accounts: dict[str, Account | str], registry: Registry, user: str
) -> None:
    box = box_for(accounts, user, "inventory")
    hook = box.mkdir(box.dir / "hook")
    box.write(hook / "sitecustomize.py", HOOK)
    spawns = box.write(box.dir / "spawns.jsonl", "", mode=0o666)
    registry.publish(
        "mcp-probe-server", "1.0.0",
        {"server.sh": mcp_launcher("genuine"), "server.py": MCP_SERVER}, {"mcp-probe": "server.sh"},
    )  # fmt: skip
    publish_agent(registry, [{"mcp": "probe", "send": [INITIALIZE]}, {"say": "done"}])
    policy = box.write(
        box.dir / "policy.toml",
        'capability = "edit-workspace"\n[[mcp.servers]]\nname = "probe"\n'
        f'command = ["npx", "-y", "mcp-probe-server@1.0.0", "{box.ws}"]\nwritable = true\n',
    )
    outcome = governor_run(
        box, registry, cwd=box.ws, extra=["--policy", str(policy)],
        environ={"PYTHONPATH": str(hook), "HOSTDOOR_SPAWNS": str(spawns)},
    )  # fmt: skip
    writable = [
        box.ws,
        *(box.home / h.removeprefix("~/") for h in PRESET.home),
        box.home / ".npm",
    ]
    programs = held(spawns, writable)
    assert {"npm", "bwrap"} <= programs, programs  # the fetches and the sandboxes were seen
    assert outcome.get("status") == "completed", outcome
    assert (box.ws / "genuine-ran").exists()  # the server did start


@needs_npm
@pytest.mark.parametrize("user", USERS)
def test_a_clone_and_its_checks_run_git_and_bwrap_outside_the_clone(
    accounts: dict[str, Account | str], registry: Registry, user: str
) -> None:
    box = box_for(accounts, user, "inventoryclone")
    hook = box.mkdir(box.dir / "hook")
    box.write(hook / "sitecustomize.py", HOOK)
    spawns = box.write(box.dir / "spawns.jsonl", "", mode=0o666)
    clone = box.dir / "clone"
    outcome = governor_run(
        box, registry, cwd=box.ws,
        extra=["--clone", f"{box.ws}@HEAD", "--check", "git status --short"],
        agent=["--agent", "demo"],
        environ={"PYTHONPATH": str(hook), "HOSTDOOR_SPAWNS": str(spawns)},
        workspace=clone,
    )  # fmt: skip
    programs = held(spawns, [box.ws, clone])
    assert {"git", "bwrap"} <= programs, programs
    assert outcome.get("status") == "completed", outcome
    assert outcome.get("verdict") == "passed", outcome  # the check ran, sandboxed


def held(spawns: Path, writable: list[Path]) -> set[str]:
    """The programs spawned, once every spawn is checked: its cwd and ``PATH``
    outside ``writable``, its program in the inventory."""
    recorded = [json.loads(line) for line in spawns.read_text().splitlines()]
    known = inventory()
    wrong = []
    for spawn in recorded:
        ours = tuple(spawn["argv"]) not in NOT_OURS
        if ours and (place := inside(spawn["cwd"], writable)) is not None:
            wrong.append(f"{spawn['argv'][:3]}: cwd {spawn['cwd']} in {place}")
        for entry in (spawn["PATH"] or "").split(":"):
            if entry and (place := inside(entry, writable)) is not None:
                wrong.append(f"{spawn['argv'][:3]}: PATH entry {entry} in {place}")
        if not listed(spawn["argv"], known):
            wrong.append(f"{spawn['argv'][:3]}: not in docs/security.md's inventory ({known})")
    assert wrong == [], "\n".join(wrong)
    return {os.path.basename(s["argv"][0]) for s in recorded}
