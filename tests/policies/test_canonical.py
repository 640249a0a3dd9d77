"""The policy and ceiling digests of `attempt-start` come from a canonical text."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from governor.policies.canonical import canonical, digest
from governor.policies.ceiling import parse_ceiling
from governor.policies.policy import parse_policy

REPO = Path(__file__).resolve().parents[2]

POLICY = """
capability = "edit-workspace"
env = ["LANG"]
[allow]
tools = ["read", "search", "fetch", "think", "other", "switch_mode"]
commands = ["git status", "pytest *"]
[deny]
tools = ["delete", "move", "execute"]
"""

SEEDS = ("0", "1", "2", "3", "12345")

_PRINT = """
import sys
from pathlib import Path
from governor.policies.canonical import digest
from governor.policies.ceiling import parse_ceiling
from governor.policies.policy import parse_policy
policy = parse_policy(sys.stdin.read(), "p.toml")
ceiling = parse_ceiling(Path(sys.argv[1]).read_text(), "ceiling.toml")
print(digest(policy), digest(ceiling), hash(repr(policy)) % 97, repr(policy.rules.allow.tools))
"""

CEILING = """
max_capability = "edit-workspace"
allowed_agents = ["demo", "claude", "codex"]
"""


def _in_process(seed: str, ceiling: Path) -> list[str]:
    env = {**os.environ, "PYTHONHASHSEED": seed}
    out = subprocess.run(
        [sys.executable, "-c", _PRINT, str(ceiling)],
        input=POLICY, env=env, cwd=REPO, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return out.stdout.split(maxsplit=3)


def test_one_policy_has_one_digest_whatever_the_hash_seed(tmp_path: Path) -> None:
    ceiling = tmp_path / "ceiling.toml"
    ceiling.write_text(CEILING)
    seen = [_in_process(seed, ceiling) for seed in SEEDS]
    # the hazard is real: the frozenset of tools came out in more than one order
    assert len({tools for *_, tools in seen}) > 1, seen
    assert len({(policy, ceil) for policy, ceil, *_ in seen}) == 1, seen


def test_a_policy_that_differs_in_one_set_item_has_another_digest() -> None:
    one = parse_policy(POLICY, "a.toml")
    other = parse_policy(POLICY.replace('"switch_mode"]', '"switch_mode", "edit"]'), "a.toml")
    assert digest(one) != digest(other)
    assert digest(one) == digest(parse_policy(POLICY, "elsewhere/b.toml"))  # the source is not the policy


def test_the_ceiling_digest_follows_its_content_not_its_order() -> None:
    one = parse_ceiling(CEILING, "c.toml")
    assert digest(one) == digest(parse_ceiling(CEILING, "d.toml"))
    assert digest(one) != digest(parse_ceiling(CEILING.replace(', "codex"', ""), "c.toml"))


def test_sets_and_keys_are_written_sorted() -> None:
    assert canonical({"b": frozenset({"y", "x"}), "a": (1, None)}) == '{"a":[1,null],"b":["x","y"]}'


def test_a_value_with_no_canonical_form_is_refused_by_name() -> None:
    with pytest.raises(TypeError, match="no canonical form for a object"):
        canonical({"x": object()})
