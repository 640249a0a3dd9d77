"""`governor doctor`: can the default run work on this machine, and if not, what to do."""

from __future__ import annotations

import argparse
import tempfile
from dataclasses import fields
from pathlib import Path

import trio

from governor.attempt import default_log_dir
from governor.presets import NotInstalled, presets, resolve
from governor.sandboxing import configured_bwrap
from sandbox import BwrapUnavailable, preflight


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `doctor` subcommand."""
    p = sub.add_parser(
        "doctor",
        help="check that the sandbox, the agents and the audit log directory work here",
        description="Check bwrap (found, version, user namespaces, a test run of the full "
        "profile), each preset's availability and where audit logs go. Exit 1 if something "
        "the default run needs is broken, with what to do.",
    )
    p.set_defaults(func=main)


def _writable(directory: Path) -> str | None:
    """None when a file can be created in the directory (made if missing), else why not."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".doctor-"):
            pass
    except OSError as e:
        return e.strerror or str(e)
    return None


def main(args: argparse.Namespace) -> int:
    """Print one line per check; exit 1 when the default run cannot work."""
    broken = False
    try:
        bwrap = trio.run(preflight, configured_bwrap())
    except BwrapUnavailable as e:
        print(f"FAIL  sandbox: {e}")
        broken = True
    else:
        features = [f.name for f in fields(bwrap.features) if getattr(bwrap.features, f.name)]
        print(
            f"ok    sandbox: bwrap {bwrap.version} at {bwrap.path}; user namespaces work; "
            f"a test run of the full profile passed (features: {', '.join(features)})"
        )
    logs = default_log_dir()
    why = _writable(logs)
    if why is None:
        print(f"ok    audit logs: {logs} is writable")
    else:
        print(
            f"FAIL  audit logs: {logs} is not writable ({why}); set XDG_STATE_HOME or pass --log FILE"
        )
        broken = True
    for preset in presets().values():
        found = resolve(preset)
        if isinstance(found, NotInstalled):
            print(
                f"--    agent {preset.id}: not installed: {preset.install}; then sign in: {preset.login}"
            )
        elif found.via_npx:
            print(
                f"ok    agent {preset.id}: through npx ({' '.join(found.argv[:3])}); sign in: {preset.login}"
            )
        else:
            print(f"ok    agent {preset.id}: {found.argv[0]}")
    if broken:
        print("the default run cannot work here: fix the FAIL lines above")
    return 1 if broken else 0
