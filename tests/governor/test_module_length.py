"""No module of ours is over `LIMIT` lines: a module is read whole by whoever
changes it, and past that it holds more than one thing (the walker read words,
redirects and statements; the profile held its values and their rendering; the
lifecycle every step of an attempt). A long module is split into modules named
for what they hold, never allowed more lines here.

`LATER` lists the modules left over the limit, to be split after the work on
them lands: the list can only shrink (each must still be over the limit, so a
split one is taken off it)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LIMIT = 700

LATER: frozenset[str] = frozenset({
    "sandbox/host/survey.py",  # the host's probing apart from the sandbox's planning
    "governor/checks/canaries.py",
    # past the limit on main while the three above were split (their rooms under work):
    "sandbox/host/processes.py",
    "sandbox/net/proxy.py",
})  # fmt: skip
"""Over the limit still, each to be split: nothing is added here."""


def lengths() -> dict[str, int]:
    """Each module of ours (the three packages, the links inside `governor/` not
    counted twice) and its number of lines."""
    found = {}
    for package in ("policies", "sandbox", "governor"):
        for path in sorted((ROOT / package).rglob("*.py")):
            where = path.relative_to(ROOT)
            if where.parts[0] == "governor" and where.parts[1] in ("policies", "sandbox"):
                continue
            found[where.as_posix()] = len(path.read_text(encoding="utf-8").splitlines())
    return found


def test_no_module_is_over_the_limit_but_those_left_for_later() -> None:
    found = lengths()
    assert len(found) > 100  # the walk found the modules
    over = {path: n for path, n in found.items() if n > LIMIT and path not in LATER}
    assert not over, f"modules over {LIMIT} lines (split each into modules named for what they hold): {over}"


def test_the_list_left_for_later_only_shrinks() -> None:
    found = lengths()
    done = sorted(path for path in LATER if found.get(path, 0) <= LIMIT)
    assert not done, f"no longer over {LIMIT} lines (or gone): take them off LATER: {done}"
