"""What an agent changed in its own home folders, reported like the workspace's changes.

An agent's sandbox keeps its preset's home folders (``~/.claude``, ``~/.codex``,
...) writable: its login, sessions and caches must survive it. What in them
makes the host run code later (the preset's ``runs_code``) is held read-only
there (`governor.confine.sandboxes.agent_profile`), but whatever else the agent wrote
in them is still read by the agent's next start on the host, outside any
sandbox: its instructions (``CLAUDE.md``), a script a hook already names, a
file the list did not foresee. So the attempt walks those folders before and
after, with the workspace's walker (`governor.confine.workspace.snapshot`: a file
root is looked at as one entry), and the outcome names every path created,
changed or deleted there.

Bounded: at most `HOME_MAX_FILES` entries are walked (a home folder holds
years of sessions); past that the notice says the walk stopped. npm's cache,
kept for an agent run through npx, is not a home folder of its preset and is
not walked.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from governor.agents.presets import Preset
from governor.confine.workspace import Change

HOME_MAX_FILES: Final = 20_000
"""The most entries one walk of an agent's home folders looks at."""

SHOWN_IN_NOTICE: Final = 20
"""The most changed home paths a notice names (the outcome's field has them all)."""


def home_roots(preset: Preset | None, env: Mapping[str, str]) -> tuple[str, ...]:
    """The agent's home entries as its environment places them (``$HOME``, and
    the variables that relocate them), absolute; none without a preset or a
    ``$HOME``."""
    home = env.get("HOME") or os.environ.get("HOME", "")
    if preset is None or not os.path.isabs(home):
        return ()
    return tuple(str(p) for p in preset.home_paths(env, Path(home)))


def notice(agent: str, changes: Sequence[Change], complete: bool) -> str | None:
    """The outcome's notice for the changes in the agent's home folders; None
    when there are none and the walk was whole."""
    if not changes and complete:
        return None
    named = [f"{c.path} ({c.how})" for c in changes[:SHOWN_IN_NOTICE]]
    more = len(changes) - len(named)
    text = (
        f"{agent} changed its home folders, which its next start on the host reads: "
        f"{', '.join(named)}{f' and {more} more' if more > 0 else ''}"
        if changes
        else f"{agent} changed nothing seen in its home folders"
    )
    if not complete:
        text += f" (the walk stopped at {HOME_MAX_FILES} entries: more may have changed)"
    return text
