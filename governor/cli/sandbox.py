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
from pathlib import Path
from typing import Any

import trio

from policies.capability import CAPABILITY_NAMES, Capability, CapabilityError
from policies.policy import GIT_ACCESS
from sandbox.bwrap import BwrapUnavailable
from sandbox.execution import ExitStatus
from sandbox.launch import open_launch, prepare
from sandbox.preflight import preflight
from sandbox.profile import Profile, ProfileError
from sandbox.runner import Command
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
        help="share the host network (Unix sockets are then refused: the host's abstract "
        "sockets would be reachable)",
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
    # $HOME as a governed command gets the agent's: this shell's, where its
    # toolchain and its user site are (not the password database's)
    home = os.environ.get("HOME", "")
    env: dict[str, str] = {"HOME": home} if os.path.isabs(home) else {}
    for name in args.env_names:
        if name not in os.environ:
            raise ProfileError(f"--env {name}: not set in the current environment")
        env[name] = os.environ[name]
    workspace = args.workspace if args.workspace is not None else Path.cwd()
    return Profile(
        capability=Capability.parse(args.capability),
        workspace=workspace.absolute(),
        extra_roots=tuple(p.absolute() for p in args.add_dirs),
        network=args.network,
        env=env,
        path=os.environ.get("PATH"),
        keep=tuple(Path(os.path.expanduser(p)).absolute() for p in args.keep),
        toolchains=args.toolchains,
        cwd=Path.cwd() if args.workspace is None else None,
        git_read_only=args.git == "read-only",
    )


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
        child = await open_launch(launch, stdin=None, stdout=None, stderr=None)
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
