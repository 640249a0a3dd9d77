"""`governor check`: does a job fit the ceiling in force?

It judges with the same `governor.policies.ceiling.check_job` as ``governor run``,
``batch`` and ``sandbox``, from the same options (``--policy``,
``--capability``, ``--agent``, ``--agent-arg``, ``--allow-host``,
``--timeout``), so a job it says fits is not refused by ``governor run``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from governor.job.ceiling_source import load_ceiling
from governor.job.policy_files import read_policy
from governor.policies.capability import CAPABILITY_NAMES, Capability, CapabilityError
from governor.policies.ceiling import check_job
from governor.policies.errors import ConfigError
from governor.policies.network import HostPatternError, parse_pattern
from governor.policies.policy import Policy


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `check` subcommand."""
    p = sub.add_parser(
        "check",
        help="check a job's policy against the operator's ceiling",
        description="Check a job against the ceiling in force, as governor run would before "
        "it starts: exit 0 when it fits, exit 2 listing every violation (one per line) "
        "otherwise. Without --agent the policy is judged alone.",
    )
    p.add_argument(
        "--policy", metavar="FILE|NAME",
        help="the job's policy: a TOML file, or a shipped policy by name; default: read-only",
    )  # fmt: skip
    p.add_argument(
        "--capability", default=None, help=f"override the policy's: {', '.join(CAPABILITY_NAMES)}"
    )
    p.add_argument("--ceiling", metavar="FILE", help="the operator's ceiling (TOML)")
    p.add_argument(
        "--agent",
        metavar="ID",
        default=None,
        help="the agent the job would run: a preset, acp (an ACP command) or command",
    )
    p.add_argument(
        "--agent-arg", action="append", default=[], metavar="ARG",
        help="a raw argument the job would append to the preset's argv (counted, never shown)",
    )  # fmt: skip
    p.add_argument(
        "--allow-host", action="append", default=[], metavar="HOST[:PORT]",
        help="a host the job would add (repeatable)",
    )  # fmt: skip
    p.add_argument(
        "--timeout", type=float, default=None, metavar="S",
        help="seconds for the attempt (wins over the policy's [limits] wall)",
    )  # fmt: skip
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Exit 0 when the job fits, 2 with every violation otherwise."""
    try:
        policy = Policy() if args.policy is None else read_policy(args.policy)
        if args.capability is not None:
            policy = replace(policy, capability=Capability.parse(args.capability))
        for host in args.allow_host:
            parse_pattern(host)
        ceiling = load_ceiling(args.ceiling)
    except (ConfigError, CapabilityError) as e:
        for line in str(e).splitlines():  # a policy's several problems, each its own line
            print(f"governor: {line}", file=sys.stderr)
        return 2
    except HostPatternError as e:
        print(f"governor: --allow-host: {e}", file=sys.stderr)
        return 2
    violations = check_job(
        policy,
        ceiling,
        agent=args.agent,
        agent_args=args.agent_arg,
        hosts=args.allow_host,
        wall=args.timeout,
    )
    print(f"ceiling: {ceiling.source}")
    if violations:
        for violation in violations:
            print(f"violation: {violation}", file=sys.stderr)
        return 2
    print(
        f"policy {policy.source} fits: capability {policy.capability}, "
        f"network {'on' if policy.network else 'off'}, on ask: {policy.on_ask}"
    )
    return 0
