"""`governor agents install|update|list`: the agents the governor installs itself,
each preset's npm package (or a Python agent's PyPI release, in a venv of its
own) at its pinned version, in the governor's data directory
(`governor.agents.npm_installs`), outside any sandbox."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
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
    imported = actions.add_parser(
        "import",
        help="add an agent from its ACP registry entry (agent.json) to your own presets",
        description="Read an ACP registry entry (agent.json: id, name, version, distribution as "
        "npx, uvx or binary) and add it as a preset to your own presets file "
        "($XDG_CONFIG_HOME/acp-governor/presets.toml), pinned at the entry's version. What the "
        "registry does not say (the model API hosts its sandbox may reach, the home folders that "
        "keep its sign-in, its credential variables) comes from these options; left out, it "
        "is said in the preset's notes. Then: governor agents install ID (npx, uvx), governor "
        "run --agent ID.",
    )
    imported.add_argument("file", metavar="AGENT.json", help="the registry entry")
    imported.add_argument("--id", dest="pid", metavar="ID", help="the preset's id (default: the entry's)")
    imported.add_argument(
        "--program", metavar="NAME",
        help="the program the package installs, when it is not named as the package",
    )  # fmt: skip
    imported.add_argument(
        "--api-host", action="append", default=[], dest="api_hosts", metavar="HOST[:PORT]",
        help="a model API host its sandbox may reach (repeatable)",
    )  # fmt: skip
    imported.add_argument(
        "--home", action="append", default=[], metavar="~/DIR",
        help="a folder of its own under $HOME its sandbox keeps writable (repeatable)",
    )  # fmt: skip
    imported.add_argument(
        "--runs-code", action="append", default=[], dest="runs_code", metavar="~/PATH",
        help="a file or folder in --home that runs code later: read-only to it (repeatable)",
    )  # fmt: skip
    imported.add_argument(
        "--env", action="append", default=[], metavar="NAME",
        help="a credential or provider variable passed to it when set (repeatable)",
    )  # fmt: skip
    imported.add_argument("--login", metavar="TEXT", help="how a person signs it in, one line")
    imported.add_argument(
        "--replace", action="store_true", help="replace a preset of yours with the same id"
    )
    imported.set_defaults(func=main)


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
    if args.action == "import":
        return _import(args)
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


def _import(args: argparse.Namespace) -> int:
    """Add the registry entry to the operator's presets file: 0, or 2 naming
    what is wrong (nothing written then)."""
    from governor.agents import presets as table
    from governor.agents.registry import Extra, convert, toml_table

    where = "governor agents import"
    try:
        raw = json.loads(Path(args.file).read_bytes())
        extra = Extra(
            api_hosts=args.api_hosts, home=args.home, env=args.env, program=args.program,
            login=args.login, runs_code=args.runs_code,
        )  # fmt: skip
        ((pid, made),) = convert(raw, extra, source=args.file, pid=args.pid).items()
        text = toml_table(pid, made)
        table.load_presets(text, source=f"{args.file} (as a preset)")  # the reader's every check
        path = table.operator_presets_path()
        shipped = table.load_presets()
        if pid in shipped:
            raise table.PresetError(
                f"{pid} is a shipped preset's id: import it under another one (--id NAME)"
            )
        mine = table.load_operator_presets(path, shipped)
        before = path.read_text(encoding="utf-8") if mine else ""
        if pid in mine and not args.replace:
            raise table.PresetError(f"{path} has a preset {pid} already: --replace replaces it")
        combined = _without(before, pid) + ("\n" if before.strip() else "") + text
        _write_private(path, combined, shipped)
    except OSError as e:
        print(f"{where}: {getattr(e, 'filename', None) or args.file}: {e.strerror or e}", file=sys.stderr)
        return 2
    except ValueError as e:  # RegistryError, PresetError, a JSON error
        print(f"{where}: {args.file}: {e}" if isinstance(e, json.JSONDecodeError) else f"{where}: {e}", file=sys.stderr)
        return 2
    print(f"added {pid} to {path}: {made['notes']}")
    if made.get("package") or made.get("pypi"):
        print(f"install it: governor agents install {pid}")
    print(f"run it: governor run --agent {pid} PROMPT")
    return 0


def _without(text: str, pid: str) -> str:
    """``text`` without the table ``[pid]`` (its header to the next table's)."""
    out, skipping = [], False
    for line in text.splitlines(keepends=True):
        if line.startswith("["):
            skipping = line.strip() == f"[{pid}]"
        if not skipping:
            out.append(line)
    return "".join(out).rstrip("\n") + ("\n" if out else "")


def _write_private(path: Path, text: str, shipped: Any) -> None:
    """``path`` replaced by ``text`` once it reads back as valid presets (0600,
    in a folder made 0700: it names the programs the governor starts)."""
    from governor.agents import presets as table

    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        table.load_operator_presets(tmp, shipped)  # raises before anything is replaced
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()
