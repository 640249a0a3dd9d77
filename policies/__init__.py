"""The pure decision algebra: capabilities, ceilings, policies, rules and `decide`.

Nothing here does I/O beyond parsing text it is given, and nothing imports trio.
"""

from governor.policies.capability import CAPABILITY_NAMES, Capability, CapabilityError

__all__ = ["CAPABILITY_NAMES", "Capability", "CapabilityError"]
