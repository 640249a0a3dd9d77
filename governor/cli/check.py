"""`governor check`: does a policy fit the ceiling in force?"""

from __future__ import annotations

import argparse
import sys

from governor.ceilings import load_ceiling
from governor.policyfile import read_policy
from policies.ceiling import CUSTOM_AGENT, AgentForbidden, RunRequest, check
from policies.errors import ConfigError
from policies.policy import Policy


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the `check` subcommand."""
    p = sub.add_parser(
        "check",
        help="check a policy file against the operator's ceiling",
        description="Check a policy against the ceiling in force: exit 0 when it fits, "
        "exit 2 listing every violation (one per line) otherwise.",
    )
    p.add_argument("--policy", metavar="FILE", help="the job's policy (TOML); default: read-only")
    p.add_argument("--ceiling", metavar="FILE", help="the operator's ceiling (TOML)")
    p.add_argument("--agent", metavar="ID", default=None, help="the agent the job would run")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Exit 0 when the policy fits, 2 with every violation otherwise."""
    try:
        policy = Policy() if args.policy is None else read_policy(args.policy)
        ceiling = load_ceiling(args.ceiling)
    except ConfigError as e:
        print(f"governor: {e}", file=sys.stderr)
        return 2
    request = RunRequest(
        agent=args.agent or CUSTOM_AGENT,
        capability=policy.capability,
        network=policy.network,
        keep=policy.keep,
        limits=policy.limits,
    )
    verdict = check(request, ceiling)
    if isinstance(verdict, list) and args.agent is None:
        # No agent named: judge the policy alone.
        verdict = [v for v in verdict if not isinstance(v, AgentForbidden)] or request
    print(f"ceiling: {ceiling.source}")
    if isinstance(verdict, list):
        for violation in verdict:
            print(f"violation: {violation}", file=sys.stderr)
        return 2
    print(
        f"policy {policy.source} fits: capability {policy.capability}, "
        f"network {'on' if policy.network else 'off'}, on ask: {policy.on_ask}"
    )
    return 0
