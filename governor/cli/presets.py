"""`governor presets`: every preset, whether it is installed, how to sign in,
and the folders of `$HOME` its sandbox keeps."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import Any

from governor.agents.npm_installs import data_home, installed
from governor.agents.presets import NotInstalled, Preset, login_as_found, presets, resolve


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `presets` subcommand."""
    p = sub.add_parser(
        "presets",
        help="list the agent presets: installed or not, login, folders kept",
        description="List every agent preset: whether its program is installed (and how it "
        "was found), its login command, and the folders of $HOME its sandbox keeps.",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=main)


def describe(preset: Preset) -> dict[str, Any]:
    """One preset's row: found how, login, install, folders kept, and what in
    them its sandbox holds read-only (its ``runs_code``)."""
    root = data_home(os.environ)
    found = resolve(preset, installs=root)
    home = Path.home()
    row: dict[str, Any] = {
        "id": preset.id,
        "name": preset.name,
        "installed": not isinstance(found, NotInstalled) and not found.via_npx,
        "available": not isinstance(found, NotInstalled),
        "login": preset.login,
        "install": preset.install,
        "pinned": preset.version,
        "version": installed(preset, root).version if preset.package or preset.pypi else None,
        "keeps": [str(p) for p in preset.home_paths(os.environ, home)],
        # what in those folders runs code on the host later: read-only to the agent
        "holds": [str(p) for p in preset.runs_code_paths(os.environ, home)],
    }
    if isinstance(found, NotInstalled):
        row["found"] = None
    else:
        row["found"] = found.via
        row["argv"] = list(found.argv)
        row["login"] = login_as_found(preset, found.argv[0])  # an install of ours is not on PATH
        if found.via_npx:
            row["keeps"].append(str(home / ".npm"))
    return row


def main(args: argparse.Namespace) -> int:
    """Print the table (or JSON); always exit 0."""
    from governor.boundary.display import terminal

    rows = [describe(p) for p in presets().values()]
    if args.json:
        print(json.dumps({"status": "ok", "presets": rows}, indent=2))
        return 0
    width = max(len(r["id"]) for r in rows)
    for r in rows:
        if r["found"] == "PATH":
            state = f"installed: {r['argv'][0]}"
        elif r["found"] == "installed":
            state = f"installed by the governor: {r['argv'][0]} (version {r['version']})"
        elif r["available"]:
            state = (
                f"not installed; runs through npx ({r['pinned']}, fetched into npm's cache "
                f"before it starts): {' '.join(r['argv'])}; or `governor agents install {r['id']}`"
            )
        else:
            state = f"not installed: {r['install']}"
        # a preset's words are an operator's file's (hand-written, or an imported
        # registry entry's): shown on the terminal as text, never acted on
        print(terminal(f"{r['id']:<{width}}  {r['name']}"))
        print(terminal(f"{'':<{width}}  {state}"))
        print(terminal(f"{'':<{width}}  login: {r['login']}"))
        if r["keeps"]:
            print(terminal(f"{'':<{width}}  keeps: {', '.join(r['keeps'])}"))
        if r["holds"]:
            print(terminal(f"{'':<{width}}  held there (runs code later: read-only, or a throwaway copy): {', '.join(r['holds'])}"))
    return 0
