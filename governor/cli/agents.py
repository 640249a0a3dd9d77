"""`governor agents install|update|list`: the agents the governor installs itself,
each preset's npm package (or a Python agent's PyPI release, in a venv of its
own) at its pinned version, in the governor's data directory
(`governor.agents.npm_installs`), outside any sandbox."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from governor.agents.npm_installs import InstallError, data_home, install, installed
from governor.agents.presets import NotInstalled, Preset, PresetError, find, presets, resolve


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `agents` subcommand and its three actions."""
    p = sub.add_parser(
        "agents",
        help="install the agents' npm or PyPI packages at their pinned versions, or list them",
        description="Install each preset's npm package, at the version presets.toml pins, "
        "into the governor's data directory ($XDG_DATA_HOME/acp-governor/agents), with npm "
        "checking every tarball's integrity; a Python agent's PyPI release goes into a venv "
        "of its own there, wheels only, its resolved dependencies written to "
        "requirements.lock beside it (the interpreter: $ACP_GOVERNOR_PYTHON, else the newest "
        "python3.N on PATH). A preset's program is looked for on PATH, then there, then run "
        "through npx.",
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    for name, text in (
        ("install", "install these agents (their pinned versions)"),
        ("update", "bring installed agents (or these) to the versions pinned now"),
    ):
        a = actions.add_parser(name, help=text, description=text)
        a.add_argument("ids", nargs="*", metavar="ID", help="agent ids (see `governor presets`)")
        a.set_defaults(func=main)
    listing = actions.add_parser("list", help="each agent: pinned, installed, how it runs")
    listing.add_argument("--json", action="store_true", help="print JSON")
    listing.set_defaults(func=main)


def npm_presets() -> list[Preset]:
    """The presets the governor can install: those with an npm or a PyPI package."""
    return [p for p in presets().values() if p.package or p.pypi]


def row(preset: Preset) -> dict[str, Any]:
    """One agent: its package, the pinned and the installed version, how it runs."""
    root = data_home(os.environ)
    mine = installed(preset, root)
    found = resolve(preset, installs=root)
    return {
        "id": preset.id,
        "package": preset.package or preset.pypi,
        "registry": "pypi" if preset.pypi else "npm",
        "pinned": preset.version,
        "installed": mine.version,
        "folder": str(mine.folder),
        "runs": None if isinstance(found, NotInstalled) else found.via,
        "argv": None if isinstance(found, NotInstalled) else list(found.argv),
    }


def main(args: argparse.Namespace) -> int:
    """0 when every agent asked for is installed at its pin; 1 when one failed;
    2 for an id that names no installable agent."""
    if args.action == "list":
        return _list(args.json)
    ids: list[str] = args.ids
    if not ids and args.action == "install":
        known = ", ".join(p.id for p in npm_presets())
        print(f"governor agents install: name the agents to install ({known})", file=sys.stderr)
        return 2
    try:
        chosen = [find(i) for i in ids]
    except PresetError as e:
        print(f"governor agents {args.action}: {e}", file=sys.stderr)
        return 2
    for preset in chosen:
        if not (preset.package or preset.pypi):
            print(
                f"governor agents {args.action}: {preset.id} is not an npm or a PyPI package: "
                f"{preset.install}",
                file=sys.stderr,
            )
            return 2
    root = data_home(os.environ)
    if not chosen:  # update with no ids: what is installed
        chosen = [p for p in npm_presets() if installed(p, root).version is not None]
        if not chosen:
            print(f"no agent is installed in {root}")
    failed = 0
    for preset in chosen:
        try:
            install(preset, root, say=lambda line: print(line, flush=True))
        except InstallError as e:
            print(f"FAIL  {e}", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


def _list(as_json: bool) -> int:
    rows = [row(p) for p in npm_presets()]
    if as_json:
        print(json.dumps({"status": "ok", "agents": rows}, indent=2))
        return 0
    width = max(len(r["id"]) for r in rows)
    for r in rows:
        have = r["installed"] or "not installed"
        if r["installed"] and r["installed"] != r["pinned"]:
            have += f" (pinned: {r['pinned']}; `governor agents update {r['id']}`)"
        runs = {"PATH": "from PATH", "installed": "from its install", "npx": "through npx"}
        how = runs.get(r["runs"], "cannot run") if r["runs"] else "cannot run: no program, no npx"
        pin = (
            f"{r['package']}=={r['pinned']} (PyPI)"
            if r["registry"] == "pypi"
            else (f"{r['package']}@{r['pinned']}")
        )
        print(f"{r['id']:<{width}}  {pin}: {have}; {how}")
    return 0
