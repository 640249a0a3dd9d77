"""``governor sandbox``: run one command under the profile a policy would give it.

For operators debugging a policy: the same profile machinery, preflight and
bwrap argv as a governed command (`governor.confine.sandboxes.command_profile`), under
``--policy FILE`` or the least-authority default, each flag given overriding
the file (``--add-dir`` and ``--keep`` replace its lists; ``--timeout`` its
``[limits] wall``, which is otherwise the command's timeout only when the file
sets one: a wall is an attempt's). The limits are the file's, the defaults
filling the rest, as for a governed command. The terminal is passed straight through
(stdin, stdout and stderr are inherited, so ``governor sandbox -- bash`` is an
interactive shell inside the sandbox). Exits with the command's status (128 + N
for a signal). A bwrap that cannot work is one line on stderr and exit 2.

``--ceiling FILE`` first judges the policy, flags included, as ``governor run``
would (`governor.policies.ceiling.check_job`; no agent): one over it is refused with
every violation. Only when asked: the command runs with the operator's own
authority, which a ceiling for jobs does not bound.

trio, the confinement and the sandbox's processes are imported by the functions
that run the command, not with this module: every command's parser registers
this one, and ``governor --help`` must not wait for them.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from governor.job.ceiling_source import load_ceiling
from governor.job.policy_files import read_policy
from governor.policies.capability import CAPABILITY_NAMES, Capability, CapabilityError
from governor.policies.ceiling import check_job
from governor.policies.errors import ConfigError
from governor.policies.network import HostPatternError
from governor.policies.policy import GIT_ACCESS, Policy
from governor.sandbox.host.bwrap import BwrapUnavailable
from governor.sandbox.plan.profile import Profile, ProfileError

if TYPE_CHECKING:
    from governor.sandbox.net.judge import ConnectionAnswer, ConnectionRequest, Judge
    from governor.sandbox.run.runner import Command
    from governor.sandbox.run.spawn import Child

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
        "--policy", default=None, metavar="FILE|NAME",
        help="run under this policy's profile and [limits] (a file, or a shipped policy's "
        "name: edit-workspace); the flags below override it",
    )
    parser.add_argument(
        "--capability",
        default=None,
        help=f"one of {', '.join(CAPABILITY_NAMES)} (default: the policy's, else read-only)",
    )
    parser.add_argument("--workspace", type=Path, default=None, help="the workspace (default: cwd)")
    parser.add_argument(
        "--add-dir", type=Path, action="append", default=[], dest="add_dirs",
        help="an extra root, like the workspace (repeatable)",
    )
    parser.add_argument(
        "--network", action="store_true", default=None,
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
    parser.add_argument(
        "--ceiling", default=None, metavar="FILE",
        help="refuse, listing every violation, a policy (with these flags) over this ceiling",
    )  # fmt: skip
    parser.add_argument("--bwrap", default=None, help="path of the bwrap binary to use")
    parser.add_argument(
        "--keep", type=Path, action="append", default=[], metavar="DIR",
        help="keep this host folder visible, read-only (repeatable), like a policy's "
        "[sandbox] keep",
    )
    parser.add_argument(
        "--no-toolchains", action="store_false", dest="toolchains", default=None,
        help="do not keep the toolchains under $HOME that PATH leads to (pyenv, nvm, "
        "cargo, ~/.local/bin, a .venv's interpreter)",
    )
    parser.add_argument(
        "--git", choices=GIT_ACCESS, default=None,
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


def _policy(args: argparse.Namespace) -> Policy:
    """The policy file (or the default), with each flag that was given on top."""
    policy = Policy() if args.policy is None else read_policy(args.policy)
    given: dict[str, Any] = {}
    if args.capability is not None:
        given["capability"] = Capability.parse(args.capability)
    if args.network is not None:
        given["network"] = args.network
    if args.allow_hosts:
        if not (args.network or policy.network):
            raise ProfileError("--allow-host needs --network")
        try:
            given["network_rules"] = policy.network_rules.with_allowed(
                args.allow_hosts, enable=True
            )
        except HostPatternError as e:
            raise ProfileError(f"--allow-host: {e}") from None
    if args.toolchains is not None:
        given["toolchains"] = args.toolchains
    if args.git is not None:
        given["git"] = args.git
    if args.keep:
        given["keep"] = tuple(str(Path(os.path.expanduser(p)).absolute()) for p in args.keep)
    if args.timeout is not None:
        given["limits"] = policy.limits.with_wall(args.timeout)
    chosen = replace(policy, **given)
    sandboxed = chosen.capability < Capability.FULL_ACCESS
    if args.network and sandboxed and not chosen.network_rules.patterns:
        raise ProfileError(
            "--network allows no host by itself: name each one with --allow-host HOST[:PORT]"
        )
    return chosen


def _judge(policy: Policy) -> Judge:
    """Decide each connection as the policy does, and say so on stderr
    (`governor sandbox` keeps no audit log)."""
    from governor.confine.egress import decide_connection
    from governor.sandbox.net.judge import ConnectionAnswer

    async def judge(request: ConnectionRequest) -> ConnectionAnswer:
        decision, addresses = await decide_connection(request, policy)
        word = "allowed" if decision.allowed else "refused"
        print(f"governor sandbox: network {word}: {decision.reason}", file=sys.stderr)
        return ConnectionAnswer(decision.allowed, decision.reason, addresses if decision.allowed else ())

    return judge


def _profile(args: argparse.Namespace, policy: Policy) -> Profile:
    from governor.boundary.secrets import forwarding_problems
    from governor.confine.sandboxes import command_profile

    named = [(n, os.environ.get(n), "the policy's env") for n in policy.env]
    named += [(n, os.environ.get(n), "--env") for n in args.env_names]
    if refused := forwarding_problems(named):
        raise ProfileError("; ".join(refused))
    env: dict[str, str] = {}
    for name in (*policy.env, *args.env_names):
        if name not in os.environ:
            raise ProfileError(f"--env {name}: not set in the current environment")
        env[name] = os.environ[name]
    workspace = args.workspace if args.workspace is not None else Path.cwd()
    extra = tuple(str(p.absolute()) for p in args.add_dirs) if args.add_dirs else None
    bound = policy.bind(str(workspace.absolute()), extra)
    # $HOME and PATH as a governed command gets the agent's: this shell's, where
    # its toolchain and its user site are (not the password database's home)
    profile = command_profile(bound, os.environ)
    return replace(
        profile,
        env={**profile.env, **env},
        cwd=Path.cwd() if args.workspace is None else None,
    )


def _masked(options: list[str]) -> list[str]:
    out = list(options)
    for index, option in enumerate(options[:-2]):
        if option == "--setenv":
            out[index + 2] = "***"
    return out


async def _run(
    args: argparse.Namespace,
    policy: Policy,
    profile: Profile,
    command: Command,
    timeout: float | None,
) -> int:
    from governor.sandbox.host.survey import survey
    from governor.sandbox.host.toolchains import describe
    from governor.sandbox.net.proxy import open_egress
    from governor.sandbox.run.launch import Launch, launched, open_launch, prepare
    from governor.sandbox.run.preflight import preflight

    probed = await preflight(args.bwrap) if profile.sandboxed else None
    facts = survey(profile) if profile.sandboxed else None
    if args.print_argv:
        with prepare(profile, command.argv, probed, facts=facts) as launch:
            if facts is not None:
                for line in describe(facts.kept, facts.caches, facts.hidden):
                    print(line, file=sys.stderr)
                print(f"PATH   {facts.path}", file=sys.stderr)
            if launch.sandboxed:
                fd = int(launch.argv[launch.argv.index("--args") + 1])
                os.lseek(fd, 0, os.SEEK_SET)
                data = b""
                while chunk := os.read(fd, 65536):
                    data += chunk
                options = [o.decode() for o in data.split(b"\0")[:-1]]
                at = launch.argv.index("--args")  # a launcher (a pids group) may come first
                words = [*launch.argv[:at], *_masked(options), *launch.argv[at + 2 :]]
                print(" ".join(words))
            else:
                print("(full-access: no sandbox) " + " ".join(command.argv))
            return 0
    async with open_egress(_judge(policy)) as proxy:
        egress = profile.egress

        async def attach(pid: int) -> None:
            assert egress is not None
            await proxy.attach(pid, egress, "command")

        async def begin(launch: Launch) -> Child:
            return await open_launch(
                launch, stdin=None, stdout=None, stderr=None,
                attach=attach if egress is not None else None,
            )  # fmt: skip

        surveyed = [facts]  # the first try's; a retry surveys anew (`launched`)
        with ExitStack() as stack:
            child = await launched(
                stack,
                lambda: prepare(
                    profile, command.argv, probed, facts=surveyed.pop() if surveyed else None
                ),
                begin,
            )
            return await _wait(child, profile, timeout)


async def _wait(child: Child, profile: Profile, timeout: float | None) -> int:
    """The command's status (killed after ``timeout``); it is reaped either way."""
    import trio

    from governor.sandbox.host.limits import blame
    from governor.sandbox.run.execution import ExitStatus

    try:
        with trio.move_on_after(math.inf if timeout is None else timeout):
            status = ExitStatus.from_returncode(await child.wait())
            # the output went to the terminal: only a limit's signal names it
            limit = blame(profile.limits, status.exit_code, status.signal, b"")
            if limit is not None:
                print(f"governor sandbox: stopped at the {limit}", file=sys.stderr)
            return status.shell_code
        child.kill()
        print(f"governor sandbox: killed after {timeout:g} s", file=sys.stderr)
        return ExitStatus.from_returncode(await child.wait()).shell_code
    finally:
        with trio.CancelScope(shield=True):
            child.kill()
            await child.wait()


def main(args: argparse.Namespace) -> int:
    """Run the command; its status, or 2 when it could not be started safely."""
    import trio

    from governor.sandbox.run.runner import Command

    words = list(args.command)
    if words and words[0] == "--":
        words = words[1:]
    if not words:
        print("governor sandbox: no command given (governor sandbox [options] -- CMD ...)", file=sys.stderr)
        return EXIT_REFUSED
    try:
        policy = _policy(args)
        if args.ceiling is not None:
            ceiling = load_ceiling(args.ceiling)
            violations = check_job(policy, ceiling, agent=None)
            for violation in violations:
                print(
                    f"governor sandbox: refused by the ceiling ({ceiling.source}): {violation}",
                    file=sys.stderr,
                )
            if violations:
                return EXIT_REFUSED
        profile = _profile(args, policy)
        timeout = policy.limits.wall  # --timeout, or the file's wall; None: none
        command = Command.from_acp(words[0], words[1:])
        return trio.run(_run, args, policy, profile, command, timeout)
    except (BwrapUnavailable, ProfileError, CapabilityError, ConfigError) as exc:
        for line in str(exc).splitlines():  # a policy's several problems, each its own line
            print(f"governor sandbox: {line}", file=sys.stderr)
        return EXIT_REFUSED
    except FileNotFoundError as exc:
        print(f"governor sandbox: {exc.strerror}: {exc.filename}", file=sys.stderr)
        return EXIT_REFUSED
