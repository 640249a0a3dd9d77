"""The governor's own descriptor budget (standard library only: the CLI calls it
before anything heavy is imported).

A soft ``RLIMIT_NOFILE`` of 1,024 (many distributions' default) is the budget an
agent that holds a thousand connections exhausts; the hard limit is what the
operator allows. Raised at start, the accept loops (`governor.sandbox.net.accepting`)
then meet the flood the operator's limit allows, and wait it out past that.
"""

from __future__ import annotations

import resource
from typing import Final

MOST_DESCRIPTORS: Final = 1 << 20
"""The soft limit set when the hard one is unlimited (Linux's default ``fs.nr_open``)."""


def raise_descriptor_limit() -> tuple[int, int]:
    """Raise this process's soft ``RLIMIT_NOFILE`` to its hard limit (at most
    `MOST_DESCRIPTORS` when that is unlimited); the (soft, hard) now in force.
    Never fails: a limit that cannot be raised is left as it was."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = MOST_DESCRIPTORS if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        except (OSError, ValueError):
            return soft, hard
        return target, hard
    return soft, hard
