"""A canonical text of a policy or a ceiling, and the digest the audit log records.

`repr` is no identity for a policy: a frozenset's items come out in the order
PYTHONHASHSEED gives them, so one policy file would record a different digest
in each process, and two attempts under the same policy could not be told to
be so. Here every set is sorted, every mapping's keys are sorted, and only the
fields that make a value equal to another (``compare=True``) are written:
caches and the file a policy came from are not the policy.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import re
from pathlib import PurePath
from typing import Final, TypeAlias

DIGEST_HEX: Final = 16
"""Hex digits of the sha256 kept: enough to tell policies apart in a log."""

Plain: TypeAlias = "bool | int | float | str | list[Plain] | dict[str, Plain] | None"


def canonical(value: object) -> str:
    """`value` as JSON with sorted keys and sets: the same text in every process.

    Raises `TypeError` naming a type with no canonical form, rather than falling
    back on `repr`, whose text may depend on the process.
    """
    return _dumps(_plain(value))


def digest(value: object) -> str:
    """The first `DIGEST_HEX` hex digits of the sha256 of `canonical(value)`."""
    return hashlib.sha256(canonical(value).encode()).hexdigest()[:DIGEST_HEX]


def _dumps(plain: Plain) -> str:
    return json.dumps(plain, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _plain(v: object) -> Plain:
    if v is None or isinstance(v, bool | str):
        return v
    if isinstance(v, enum.Enum):  # before int: an IntEnum is an int
        return _plain(v.value)
    if isinstance(v, int | float):
        return v
    if isinstance(v, re.Pattern):
        return {"pattern": _plain(v.pattern), "flags": v.flags}
    if isinstance(v, PurePath):
        return str(v)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return {f.name: _plain(getattr(v, f.name)) for f in dataclasses.fields(v) if f.compare}
    if isinstance(v, set | frozenset):
        return sorted((_plain(x) for x in v), key=_dumps)
    if isinstance(v, tuple | list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        out: dict[str, Plain] = {}
        for key, item in v.items():
            plain_key = _plain(key)
            out[plain_key if isinstance(plain_key, str) else _dumps(plain_key)] = _plain(item)
        return out
    raise TypeError(f"no canonical form for a {type(v).__name__}: {v!r:.80}")


__all__ = ["DIGEST_HEX", "canonical", "digest"]
