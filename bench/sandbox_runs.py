"""Sandbox overhead: bare process vs minimal bwrap vs our runner (vs srt).

Median wall time of three commands (``true``, ``sh -c 'echo hi'``, a 10 MB
output) run

  (a) bare, with ``subprocess.run`` reading all output;
  (b) under a minimal bwrap line (``--ro-bind / / --dev /dev --proc /proc
      --unshare-all --die-with-parent --new-session``);
  (c) through our code with the full edit-workspace profile on a git workspace
      (survey, 31 placeholders for the missing protected names and the git
      dir's, the pins of .git's parts and its self-bind, seccomp, trio):
      c1 in a session's sandbox (`governor.sandbox.run.session`): one bwrap per session, the
      command forked inside it by the fork server; what ACP terminals do, with
      this shell's ``PATH`` and the toolchains under ``$HOME`` it leads to kept
      (`governor.sandbox.host.toolchains`). The session is opened once, before the clock;
      its opening is timed apart;
      c0 the same with toolchain detection off (``toolchains = false``: no
      folders kept, no caches overlaid): c1/c0 is what detection costs;
      c2 one-shot through `governor.sandbox.run.runner.run` (a bwrap of its own, stubs made
      and removed every time, its own workspace): what ``governor sandbox`` does;
      c3 read-only one-shot (no pins at all);
      c4 a bwrap per command with the stubs kept between commands (what
      terminals did before the session sandbox); c4 seals the stubs when it can
      (root: CAP_LINUX_IMMUTABLE, see `governor.sandbox.run.stubs`; the header says whether);
      c5 like c4 with stubs that are never sealed (its own workspace): each one
      pinned by a bwrap mount, what a governor that is not root pays per bwrap;
  (b2) our full argv (same survey, fds and mounts as c4) started by plain
      ``subprocess.run``: what c4 costs in bwrap itself, without the trio runner;
  (d) Anthropic's ``srt -c`` (sandbox-runtime) when installed, e.g.
      ``npm install --prefix /tmp/srt @anthropic-ai/sandbox-runtime``; srt also
      needs ``rg`` and ``socat`` (with libwrap0) on PATH: ``SRT_EXTRA_PATH`` and
      ``SRT_EXTRA_LD_LIBRARY_PATH`` default to a ``dpkg -x`` of those packages
      under ``/tmp/srt/root``. Skipped with a note when absent or failing.

Rounds are interleaved (each round runs every variant once) so that load from
other processes hits all variants alike. Ratios c/a and c/b are printed; the
targets are c/b <= 1.5 and a few milliseconds over bare.

Run: ``python bench/sandbox.py [--rounds N]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

# This file is bench/sandbox.py: run as a script, its directory comes first on
# sys.path and "import sandbox" would import this file instead of the package.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import trio  # noqa: E402

from governor.policies.capability import Capability  # noqa: E402
from governor.sandbox.host.survey import survey  # noqa: E402
from governor.sandbox.plan.profile import Profile  # noqa: E402
from governor.sandbox.run.launch import prepare  # noqa: E402
from governor.sandbox.run.preflight import preflight  # noqa: E402
from governor.sandbox.run.runner import Command, run  # noqa: E402
from governor.sandbox.run.session import SandboxSession  # noqa: E402
from governor.sandbox.run.stubs import LEDGER, StubLedger  # noqa: E402
from governor.sandbox.standalone.sweeper import FS_IMMUTABLE_FL, get_flags  # noqa: E402

COMMANDS: dict[str, list[str]] = {
    "true": ["true"],
    "echo hi": ["sh", "-c", "echo hi"],
    "10 MB out": ["sh", "-c", "head -c 10000000 /dev/zero"],
}
MINIMAL = [
    "--ro-bind",
    "/",
    "/",
    "--dev",
    "/dev",
    "--proc",
    "/proc",
    "--unshare-all",
    "--die-with-parent",
    "--new-session",
]
SRT_DEFAULT = "/tmp/srt/node_modules/.bin/srt"
OPENINGS = 5


def bare(argv: Sequence[str]) -> None:
    subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=True)


def srt_command() -> tuple[list[str], dict[str, str]] | None:
    srt = os.environ.get("SRT", SRT_DEFAULT)
    if not os.access(srt, os.X_OK):
        return None
    env = dict(os.environ)
    extra = os.environ.get("SRT_EXTRA_PATH", "/tmp/srt/root/usr/bin")
    env["PATH"] = f"{extra}:{env['PATH']}:{os.path.dirname(os.environ.get('BWRAP_FOR_SRT', ''))}"
    libs = os.environ.get("SRT_EXTRA_LD_LIBRARY_PATH", "/tmp/srt/root/usr/lib/x86_64-linux-gnu")
    env["LD_LIBRARY_PATH"] = ":".join(p for p in (libs, env.get("LD_LIBRARY_PATH", "")) if p)
    return [srt, "-c"], env


async def main(rounds: int, srt_rounds: int) -> None:
    bwrap = await preflight()
    if shutil.which("bwrap") is None:  # srt looks for bwrap on PATH
        os.environ["BWRAP_FOR_SRT"] = bwrap.path
    scratch = Path(tempfile.mkdtemp(prefix="bench-sandbox-"))
    workspace, ws_one_shot, ws_unsealed, ws_session, ws_plain = (
        scratch / n for n in ("ws", "ws-one-shot", "ws-unsealed", "ws-session", "ws-plain")
    )
    for ws in (workspace, ws_one_shot, ws_unsealed, ws_session, ws_plain):
        ws.mkdir()
        subprocess.run(["git", "init", "-q", str(ws)], check=True)
    edit = Profile(capability=Capability.EDIT_WORKSPACE, workspace=workspace)
    edit_session = Profile(
        capability=Capability.EDIT_WORKSPACE, workspace=ws_session, path=os.environ.get("PATH")
    )
    edit_plain = Profile(capability=Capability.EDIT_WORKSPACE, workspace=ws_plain, toolchains=False)
    edit_one_shot = Profile(capability=Capability.EDIT_WORKSPACE, workspace=ws_one_shot)
    edit_unsealed = Profile(capability=Capability.EDIT_WORKSPACE, workspace=ws_unsealed)
    read_only = Profile(capability=Capability.READ_ONLY, workspace=workspace)
    srt = srt_command()
    if srt is not None:
        probe = subprocess.run([*srt[0], "true"], env=srt[1], capture_output=True, cwd=workspace)
        if probe.returncode != 0:
            print(f"(d) srt skipped: {probe.stderr.decode(errors='replace').strip()[-200:]}")
            srt = None

    def our_argv(profile: Profile, argv: list[str]) -> None:
        with prepare(profile, argv, bwrap) as launch:
            subprocess.run(
                launch.argv, pass_fds=launch.pass_fds, env={}, stdout=subprocess.PIPE, check=True
            )

    one_shot = StubLedger()  # never held: stubs made and removed around every run
    unsealed = StubLedger(seal=False)  # held like LEDGER, but every stub needs its mount

    async def runner(profile: Profile, argv: list[str], ledger: StubLedger = LEDGER) -> None:
        result = await run(Command.of(argv), profile, ledger=ledger)
        assert result.status.exit_code == 0, result.text[-500:]

    session_ledger = StubLedger()
    opened: dict[str, list[float]] = {"c1": [], "c0": []}
    for _ in range(OPENINGS):
        for name, profile in (("c1", edit_session), ("c0", edit_plain)):
            start = time.perf_counter()
            async with SandboxSession(profile, ledger=session_ledger):
                opened[name].append(time.perf_counter() - start)
    session = SandboxSession(edit_session, ledger=session_ledger)
    plain = SandboxSession(edit_plain, ledger=session_ledger)
    kept = len(survey(edit_session).kept)

    def in_session(
        chosen: SandboxSession, profile: Profile
    ) -> Callable[[list[str]], Awaitable[None]]:
        async def call(argv: list[str]) -> None:
            async with chosen.start(tuple(argv), profile, output_limit=1 << 20) as execution:
                status = await execution.finish()
            assert status.exit_code == 0, execution.ring.snapshot()[0][-500:]

        return call

    variants: dict[str, Callable[[list[str]], Awaitable[None] | None]] = {
        "a bare": bare,
        "b bwrap minimal": lambda argv: bare([bwrap.path, *MINIMAL, *argv]),
        "b2 our argv, no runner": lambda argv: our_argv(edit, argv),
        "c0 session, no toolchains": in_session(plain, edit_plain),
        "c1 session sandbox": in_session(session, edit_session),
        "c2 runner, one-shot": lambda argv: runner(edit_one_shot, argv, one_shot),
        "c3 runner, read-only": lambda argv: runner(read_only, argv),
        "c4 bwrap per command": lambda argv: runner(edit, argv),
        "c5 per command, unsealed": lambda argv: runner(edit_unsealed, argv, unsealed),
    }
    if srt is not None:
        srt_argv, srt_env = srt
        variants["d srt -c"] = lambda argv: bare_env(
            [*srt_argv, subprocess.list2cmdline(argv)], srt_env, workspace
        )

    times: dict[tuple[str, str], list[float]] = {}
    try:
        with LEDGER.hold(), unsealed.hold(), session_ledger.hold():
            await session.open()
            await plain.open()
            for label, argv in COMMANDS.items():
                for round_ in range(rounds):
                    for name, call in variants.items():
                        if name.startswith("d") and round_ >= srt_rounds:
                            continue
                        start = time.perf_counter()
                        pending = call(argv)
                        if pending is not None:
                            await pending
                        times.setdefault((label, name), []).append(time.perf_counter() - start)
            sealed = _is_sealed(workspace / ".claude")
            await session.aclose()
            await plain.aclose()
    finally:  # after the holds: a sealed stub cannot be removed before its ledger unseals it
        shutil.rmtree(scratch, ignore_errors=True)

    names = list(variants)
    print(
        f"\nmedian wall time in ms ({rounds} rounds, srt {srt_rounds}; bwrap {bwrap.version}, "
        f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; uid {os.getuid()}, "
        f"c4's stubs {'sealed, no mounts' if sealed else 'not sealed: one mount each'})"
    )
    print(
        f"opening a session's sandbox (once per session), median of {OPENINGS}: "
        f"c1 {statistics.median(opened['c1']) * 1000:.1f} ms with "
        f"{kept} toolchain folders kept, "
        f"c0 {statistics.median(opened['c0']) * 1000:.1f} ms without"
    )
    print(f"{'command':<12}" + "".join(f"{n:>26}" for n in names))
    medians: dict[tuple[str, str], float] = {}
    for label in COMMANDS:
        row = f"{label:<12}"
        for name in names:
            samples = times.get((label, name))
            value = statistics.median(samples) * 1000 if samples else float("nan")
            medians[(label, name)] = value
            row += f"{value:>26.2f}"
        print(row)
    c1_name = "c1 session sandbox"
    print("\nratios to bwrap minimal (b) and overhead over bare (a):")
    for label in COMMANDS:
        a, b = medians[(label, "a bare")], medians[(label, "b bwrap minimal")]
        c1, c2 = medians[(label, c1_name)], medians[(label, "c2 runner, one-shot")]
        c4 = medians[(label, "c4 bwrap per command")]
        c5 = medians[(label, "c5 per command, unsealed")]
        c0 = medians[(label, "c0 session, no toolchains")]
        print(
            f"  {label:<12} c1/c0 {c1 / c0:5.2f}  c1/a {c1 / a:5.2f}  c1/b {c1 / b:5.2f}  c1-a {c1 - a:6.2f} ms"
            f"   c2/b {c2 / b:5.2f}  c2-a {c2 - a:6.2f} ms   c4/b {c4 / b:5.2f}  c5/b {c5 / b:5.2f}"
        )
    print("\nthe same from the fastest run of each (less sensitive to other load on the machine):")
    for label in COMMANDS:
        best = {name: min(times[(label, name)]) * 1000 for name in names if (label, name) in times}
        a, b, c1 = best["a bare"], best["b bwrap minimal"], best[c1_name]
        print(
            f"  {label:<12} a {a:6.2f}  b {b:6.2f}  b2 {best['b2 our argv, no runner']:6.2f}"
            f"  c1 {c1:6.2f} ms   c1/b {c1 / b:5.2f}  c1-a {c1 - a:6.2f} ms"
            f"   c4/b {best['c4 bwrap per command'] / b:5.2f}"
        )
    if srt is not None:
        for label in COMMANDS:
            d = medians[(label, "d srt -c")]
            print(f"  {label:<12} srt/c1 {d / medians[(label, c1_name)]:6.1f}x")


def _is_sealed(path: Path) -> bool:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return False
    try:
        return bool(get_flags(fd) & FS_IMMUTABLE_FL)
    finally:
        os.close(fd)


def bare_env(argv: Sequence[str], env: dict[str, str], cwd: Path) -> None:
    subprocess.run(
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd, check=True
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--srt-rounds", type=int, default=8)
    args = parser.parse_args()
    trio.run(main, args.rounds, args.srt_rounds)
