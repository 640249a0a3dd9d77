"""The capability ladder: how much authority one attempt gets.

The members ascend in authority and their order is what the ceiling check
compares, so never reorder them. Parsing is exact and case-sensitive, as in the
seed `Agent.hs`: ``Read-Only`` is an error that names the accepted spellings,
never a guess.
"""

from __future__ import annotations

import enum
from typing import Final


class CapabilityError(ValueError):
    """A capability name that is not one of the accepted spellings."""


@enum.unique
class Capability(enum.IntEnum):
    """``read-only`` < ``edit-workspace`` < ``full-access``.

    * read-only: may read the roots and run sandboxed commands that cannot write.
    * edit-workspace: may also change files inside the roots, except protected paths.
    * full-access: no sandbox at all; only exists where the operator's ceiling allows it.
    """

    READ_ONLY = 0
    EDIT_WORKSPACE = 1
    FULL_ACCESS = 2

    def __str__(self) -> str:
        return _NAMES[self]

    @classmethod
    def parse(cls, text: str) -> Capability:
        """Parse a canonical name exactly; raise `CapabilityError` naming the accepted ones."""
        found = _BY_NAME.get(text)
        if found is None:
            raise CapabilityError(
                f"unknown capability {text!r}; accepted: {', '.join(_NAMES.values())}"
            )
        return found


_NAMES: Final = {
    Capability.READ_ONLY: "read-only",
    Capability.EDIT_WORKSPACE: "edit-workspace",
    Capability.FULL_ACCESS: "full-access",
}
_BY_NAME: Final = {v: k for k, v in _NAMES.items()}

CAPABILITY_NAMES: Final = tuple(_NAMES.values())
