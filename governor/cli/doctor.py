"""`governor doctor`: can the default run work on this machine, and if not, what to do.

trio, the sandbox and the host's probes are imported when the checks run, not
with this module: ``governor --help`` registers this one.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path

from governor.agents.npm_installs import data_home, installed
from governor.agents.presets import NotInstalled, presets, resolve
from governor.policies.capability import Capability
from governor.policies.limits import DEFAULTS, render


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `doctor` subcommand."""
    p = sub.add_parser(
        "doctor",
        help="check that the sandbox, the agents and the audit log directory work here",
        description="Check bwrap (found, version, user namespaces, a test run of the full "
        "profile), a command in a session's sandbox, each preset's availability and where "
        "audit logs go. Exit 1 if something the default run needs is broken, with what to do.",
    )
    p.add_argument(
        "--json", action="store_true",
        help="print one JSON object: status (ok or broken), exit_code, and each check "
        "with its result (ok, FAIL, --), what it said and its details",
    )  # fmt: skip
    p.set_defaults(func=main)


@dataclass(slots=True)
class Item:
    """One check's result (``ok``, ``FAIL`` or ``--``: works, broken, not used
    here), its name, what it found and its detail lines: a printed line and
    a `--json` object of the same words."""

    result: str
    check: str
    said: str
    details: list[str] = field(default_factory=list)

    def lines(self) -> list[str]:
        return [f"{self.result:<5} {self.check}: {self.said}", *(f"        {d}" for d in self.details)]

    def to_json(self) -> dict[str, object]:
        return {"result": self.result, "check": self.check, "said": self.said, "details": self.details}


def _writable(directory: Path) -> str | None:
    """None when a file can be created in the directory (made if missing), else why not."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".doctor-"):
            pass
    except OSError as e:
        return e.strerror or str(e)
    return None


async def _session_check() -> Item:
    """One command through a session's sandbox (`governor.sandbox.run.session`), as ACP
    terminals run them; the line says how long the sandbox took to build."""
    from governor.confine.sandboxes import configured_bwrap
    from governor.sandbox.plan.profile import Profile
    from governor.sandbox.run.session import SandboxSession, SessionError

    with tempfile.TemporaryDirectory(prefix="governor-doctor-") as scratch:
        profile = Profile(capability=Capability.EDIT_WORKSPACE, workspace=Path(scratch))
        started = time.perf_counter()
        try:
            async with SandboxSession(profile, bwrap=configured_bwrap()) as session:
                opened = time.perf_counter() - started
                async with session.start(
                    ("/bin/sh", "-c", "echo ok"), profile, output_limit=1024
                ) as execution:
                    status = await execution.finish()
                output = execution.ring.snapshot()[0]
        except SessionError as e:
            return Item(
                "--", "session sandbox", f"cannot start ({e}); each command will run in a "
                "bwrap of its own instead (as strong, slower)",
            )
    if status.exit_code != 0 or output != b"ok\n":
        return Item(
            "--", "session sandbox", f"a test command gave {status} and {output[-200:]!r}; "
            "each command will run in a bwrap of its own instead",
        )
    return Item(
        "ok", "session sandbox", f"built in {opened * 1000:.0f} ms; a command ran in it "
        "(its own pid and mount namespaces, no capabilities, the filter)",
    )


def _toolchains(overlays: bool) -> list[Item]:
    """What a command's sandbox keeps of the homes here, and why (`governor.sandbox.host.toolchains`):
    the folders ``PATH`` and the toolchain variables lead to, the package caches."""
    from governor.sandbox.host.survey import survey
    from governor.sandbox.host.toolchains import describe
    from governor.sandbox.plan.profile import Profile

    with tempfile.TemporaryDirectory(prefix="governor-doctor-") as scratch:
        profile = Profile(
            capability=Capability.EDIT_WORKSPACE,
            workspace=Path(scratch),
            path=os.environ.get("PATH"),
        )
        facts = survey(profile)
    if not facts.kept and not facts.caches:
        return [Item("ok", "toolchains", "nothing under $HOME to keep (PATH names none of it)")]
    caches = facts.caches if overlays else ()
    kept = Item(
        "ok", "toolchains", f"{len(facts.kept)} folders kept read-only, {len(caches)} caches "
        "overlaid (a policy's [sandbox] keep adds folders, toolchains = false turns this off)",
    )
    items = [kept]
    if facts.caches and not overlays:
        items.append(Item("--", "caches", "this bwrap has no --tmp-overlay; package caches stay hidden"))
    items[-1].details += describe(facts.kept, caches, ())
    return items


def _limits(tmpfs_size: bool) -> Item:
    """How a policy's ``[limits]`` are enforced here, for this user (`governor.sandbox.host.limits`)."""
    from governor.sandbox.host.budget import memory_root
    from governor.sandbox.host.limits import enforcement

    found = enforcement()
    defaults = ", ".join(
        f"{name} {render(name, getattr(DEFAULTS, name))}"
        for name in ("memory", "processes", "tmp", "cpu_seconds", "wall")
    )
    ok = found.prlimit is not None and found.processes != "none" and tmpfs_size
    item = Item("ok" if ok else "--", "limits", f"enforced with rlimits and tmpfs sizes (defaults: {defaults})")
    item.details += found.lines()
    group = memory_root()
    item.details.append(
        "attempt_memory: "
        + (
            f"an attempt's memory group under {group} (its charge counted), and "
            if group is not None
            else "no memory cgroup for this user; "
        )
        + "each sandbox's System V segments and Unix sockets' buffers read in its namespaces"
    )
    if not tmpfs_size:
        item.details.append("tmp: this bwrap has no --size: a tmp limit is refused")
    return item


def main(args: argparse.Namespace) -> int:
    """Print one line per check (or, with ``--json``, one document of them);
    exit 1 when the default run cannot work."""
    items: list[Item] = []
    broken = _checks(items.append)
    if args.json:
        import json

        doc = {"status": "broken" if broken else "ok", "exit_code": int(broken),
               "checks": [i.to_json() for i in items]}  # fmt: skip
        print(json.dumps(doc, indent=2))
    else:
        print("\n".join(line for i in items for line in i.lines()))
        if broken:
            print("the default run cannot work here: fix the FAIL lines above")
    return 1 if broken else 0


def _checks(say: Callable[[Item], object]) -> bool:
    """Run every check, saying each `Item` as it is found; True when something
    the default run needs is broken."""
    import functools

    import trio

    from governor.confine.sandboxes import configured_bwrap
    from governor.job.spec import default_log_dir
    from governor.sandbox.host.bwrap import BwrapUnavailable
    from governor.sandbox.run.preflight import preflight

    broken = False
    try:
        bwrap = trio.run(functools.partial(preflight, configured_bwrap(), recall=False))
    except BwrapUnavailable as e:
        say(Item("FAIL", "sandbox", str(e)))
        broken = True
    else:
        features = [f.name for f in fields(bwrap.features) if getattr(bwrap.features, f.name)]
        say(Item(
            "ok", "sandbox", f"bwrap {bwrap.version} at {bwrap.path}; user namespaces work; "
            f"a test run of the full profile passed (features: {', '.join(features)})",
        ))  # fmt: skip
        say(trio.run(_session_check))
        for item in (*_toolchains(bwrap.features.tmp_overlay), _limits(bwrap.features.tmpfs_size)):
            say(item)
    logs = default_log_dir()
    why = _writable(logs)
    if why is None:
        say(Item("ok", "audit logs", f"{logs} is writable"))
    else:
        say(Item("FAIL", "audit logs", f"{logs} is not writable ({why}); set XDG_STATE_HOME or pass --log FILE"))
        broken = True
    root = data_home(os.environ)

    def shown(item: Item) -> None:
        """A preset's words are an operator's file's (hand-written, or an imported
        registry entry's): shown on the terminal as text, never acted on."""
        from governor.boundary.display import terminal

        say(Item(item.result, terminal(item.check), terminal(item.said), item.details))

    for preset in presets().values():
        found = resolve(preset, installs=root)
        if isinstance(found, NotInstalled):
            shown(Item("--", f"agent {preset.id}", f"not installed: {preset.install}; then sign in: {preset.login}"))
        elif found.via == "npx":
            # `presets` words it the same: not installed, and how it runs anyway
            shown(Item(
                "ok", f"agent {preset.id}", f"not installed; runs through npx ({found.argv[0]} "
                f"{' '.join(found.argv[1:4])}, fetched outside the sandbox before it starts); "
                f"or `governor agents install {preset.id}`; sign in: {preset.login}",
            ))  # fmt: skip
        elif found.via == "installed":
            version = installed(preset, root).version
            shown(Item("ok", f"agent {preset.id}", f"installed by the governor, version {version}: {found.argv[0]}"))
        else:
            shown(Item("ok", f"agent {preset.id}", f"from PATH: {found.argv[0]}"))
    return broken
