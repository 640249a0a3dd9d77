"""``governor sandbox``: run one command under the profile a policy would give it.

For operators debugging a policy: the same profile machinery, preflight and
bwrap argv as a governed command, with the terminal passed straight through
(stdin, stdout and stderr are inherited, so ``governor sandbox -- bash`` is an
interactive shell inside the sandbox). Exits with the command's status (128 + N
for a signal). A bwrap that cannot work is one line on stderr and exit 2.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import trio

from governor.network import egress_for
from policies.actions import Connect
from policies.capability import CAPABILITY_NAMES, Capability, CapabilityError
from policies.decide import Decision, decide_network
from policies.network import HostPatternError, NetworkRules
from policies.policy import GIT_ACCESS, Policy
from policies.rules import Verdict
from sandbox.bwrap import BwrapUnavailable
from sandbox.egress import Answer, Judge, Request, open_egress, resolve
from sandbox.execution import ExitStatus
from sandbox.launch import open_launch, prepare
from sandbox.preflight import preflight
from sandbox.profile import Profile, ProfileError
from sandbox.runner import Command
from sandbox.spawn import Child
from sandbox.survey import survey
from sandbox.toolchains import describe

EXIT_REFUSED = 2


def register(subparsers: Any) -> None:
    """Add the ``sandbox`` subcommand."""
    parser = subparsers.add_parser(
        "sandbox",
        help="run one command under a sandbox profile (for debugging a policy)",
        description="Run CMD under the bubblewrap profile a policy with these settings would "
        "give it. One argument is a shell line (run by /bin/sh -c), several are an argv.",
    )
    parser.add_argument(
        "--capability",
        default="read-only",
        help=f"one of {', '.join(CAPABILITY_NAMES)} (default: read-only)",
    )
    parser.add_argument("--workspace", type=Path, default=None, help="the workspace (default: cwd)")
    parser.add_argument(
        "--add-dir", type=Path, action="append", default=[], dest="add_dirs",
        help="an extra root, like the workspace (repeatable)",
    )
    parser.add_argument(
        "--network", action="store_true",
        help="network through the governor's proxy, to the --allow-host hosts only "
        "(each connection decided and printed on stderr)",
    )
    parser.add_argument(
        "--allow-host", action="append", default=[], dest="allow_hosts", metavar="HOST[:PORT]",
        help="with --network: a host the command may reach (repeatable; no port: 443 and 80; "
        "loopback and private addresses need the port, and are forwarded at the same address)",
    )
    parser.add_argument(
        "--env", action="append", default=[], dest="env_names", metavar="NAME",
        help="pass this variable from the current environment (repeatable)",
    )
    parser.add_argument("--timeout", type=float, default=None, help="kill after this many seconds")
    parser.add_argument("--bwrap", default=None, help="path of the bwrap binary to use")
    parser.add_argument(
        "--keep", type=Path, action="append", default=[], metavar="DIR",
        help="keep this host folder visible, read-only (repeatable), like a policy's "
        "[sandbox] keep",
    )
    parser.add_argument(
        "--no-toolchains", action="store_false", dest="toolchains",
        help="do not keep the toolchains under $HOME that PATH leads to (pyenv, nvm, "
        "cargo, ~/.local/bin, a .venv's interpreter)",
    )
    parser.add_argument(
        "--git", choices=GIT_ACCESS, default="commit",
        help="at edit-workspace: commit (default; hooks, config and the rest that runs "
        "code stay read-only) or read-only (.git read-only as a whole), as a policy's "
        "[sandbox] git",
    )
    parser.add_argument(
        "--print-argv", action="store_true",
        help="print the bwrap options (variable values masked) instead of running; "
        "what was kept visible, and why, goes to stderr",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    parser.set_defaults(func=main)


def _profile(args: argparse.Namespace) -> Profile:
    env: dict[str, str] = {}
    for name in args.env_names:
        if name not in os.environ:
            raise ProfileError(f"--env {name}: not set in the current environment")
        env[name] = os.environ[name]
    workspace = args.workspace if args.workspace is not None else Path.cwd()
    capability = Capability.parse(args.capability)
    if args.allow_hosts and not args.network:
        raise ProfileError("--allow-host needs --network")
    if args.network and not args.allow_hosts and capability < Capability.FULL_ACCESS:
        raise ProfileError(
            "--network allows no host by itself: name each one with --allow-host HOST[:PORT]"
        )
    egress = None
    if args.network and capability < Capability.FULL_ACCESS:
        egress = egress_for(_rules(args), "command")
    return Profile(
        capability=capability,
        workspace=workspace.absolute(),
        extra_roots=tuple(p.absolute() for p in args.add_dirs),
        network=args.network and egress is None,
        egress=egress,
        env=env,
        path=os.environ.get("PATH"),
        keep=tuple(Path(os.path.expanduser(p)).absolute() for p in args.keep),
        toolchains=args.toolchains,
        cwd=Path.cwd() if args.workspace is None else None,
        git_read_only=args.git == "read-only",
    )


def _rules(args: argparse.Namespace) -> NetworkRules:
    try:
        return NetworkRules().with_allowed(args.allow_hosts, enable=True)
    except HostPatternError as e:
        raise ProfileError(f"--allow-host: {e}") from None


def _judge(args: argparse.Namespace) -> Judge:
    """Decide each connection as a policy with these hosts would, and say so on
    stderr (`governor sandbox` keeps no audit log)."""
    policy = Policy(network=True, network_rules=_rules(args))

    async def judge(request: Request) -> Answer:
        action = Connect(request.host, request.port, request.method, request.path,
                         request.origin, problem=request.problem)  # fmt: skip
        decision = decide_network(action, policy)
        addresses: tuple[str, ...] = ()
        if decision.allowed:
            addresses = await resolve(request.host, request.port)
            decision = decide_network(replace(action, addresses=addresses), policy)
            if not addresses:
                decision = Decision(Verdict.DENY, "network.dns", f"{request.host} does not resolve")
        word = "allowed" if decision.allowed else "refused"
        print(f"governor sandbox: network {word}: {decision.reason}", file=sys.stderr)
        return Answer(decision.allowed, decision.reason, addresses if decision.allowed else ())

    return judge


def _masked(options: list[str]) -> list[str]:
    out = list(options)
    for index, option in enumerate(options[:-2]):
        if option == "--setenv":
            out[index + 2] = "***"
    return out


async def _run(args: argparse.Namespace, profile: Profile, command: Command) -> int:
    probed = await preflight(args.bwrap) if profile.sandboxed else None
    facts = survey(profile) if profile.sandboxed else None
    with prepare(profile, command.argv, probed, facts=facts) as launch:
        if args.print_argv:
            if facts is not None:
                for line in describe(facts.kept, facts.caches, facts.hidden):
                    print(line, file=sys.stderr)
                print(f"PATH   {facts.path}", file=sys.stderr)
            if launch.sandboxed:
                fd = int(launch.argv[2])
                os.lseek(fd, 0, os.SEEK_SET)
                data = b""
                while chunk := os.read(fd, 65536):
                    data += chunk
                options = [o.decode() for o in data.split(b"\0")[:-1]]
                print(" ".join([launch.argv[0], *_masked(options), "--", *command.argv]))
            else:
                print("(full-access: no sandbox) " + " ".join(command.argv))
            return 0
        async with open_egress(_judge(args)) as proxy:
            egress = profile.egress

            async def attach(pid: int) -> None:
                assert egress is not None
                await proxy.attach(pid, egress, "command")

            return await _wait(args, await open_launch(
                launch, stdin=None, stdout=None, stderr=None,
                attach=attach if egress is not None else None,
            ))  # fmt: skip


async def _wait(args: argparse.Namespace, child: Child) -> int:
    """The command's status (killed after ``--timeout``); it is reaped either way."""
    try:
        with trio.move_on_after(math.inf if args.timeout is None else args.timeout):
            return ExitStatus.from_returncode(await child.wait()).shell_code
        child.kill()
        print(f"governor sandbox: killed after {args.timeout} s", file=sys.stderr)
        return ExitStatus.from_returncode(await child.wait()).shell_code
    finally:
        with trio.CancelScope(shield=True):
            child.kill()
            await child.wait()


def main(args: argparse.Namespace) -> int:
    """Run the command; its status, or 2 when it could not be started safely."""
    words = list(args.command)
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        print("governor sandbox: no command given (governor sandbox [options] -- CMD ...)", file=sys.stderr)
        return EXIT_REFUSED
    try:
        profile = _profile(args)
        return trio.run(_run, args, profile, Command.from_acp(words[0], words[1:]))
    except (BwrapUnavailable, ProfileError, CapabilityError) as exc:
        print(f"governor sandbox: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    except FileNotFoundError as exc:
        print(f"governor sandbox: {exc.strerror}: {exc.filename}", file=sys.stderr)
        return EXIT_REFUSED
