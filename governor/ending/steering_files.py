"""Changes called out on their own in the outcome: whatever the attempt did to
the files that steer what runs next, a notice apiece, explained or not.

Two kinds, each a table below:

- **Agent instruction files.** The next agent that works here reads them as
  its instructions (``CLAUDE.md``, ``AGENTS.md``, ``.github/copilot-instructions.md``
  ...): a change to one changes what that agent does, with none of this
  attempt's limits. They are the project's to edit, so they are not protected;
  the person is told, by name, whichever way the change came.
- **A new git repository** inside a root (its ``.git/config`` created): where
  the outer repository records a gitlink to it (the agent's ``git add``), the
  person's next ``git status`` there runs its config (``core.fsmonitor``).

Pure: the attempt gives the snapshots' `Change` list and the roots.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Sequence
from typing import Final

from governor.confine.workspace import Change

INSTRUCTION_NAMES: Final = frozenset(
    {
        "CLAUDE.md",  # Claude Code, at any depth (CLAUDE.local.md: the person's own)
        "CLAUDE.local.md",
        "AGENTS.md",  # Codex, Copilot, Cursor, Zed... (https://agents.md), at any depth
        "AGENT.md",
        "GEMINI.md",  # Gemini CLI's context files
        "QWEN.md",  # Qwen Code's
        ".cursorrules",  # Cursor's legacy rules
        ".windsurfrules",
        ".clinerules",  # Cline: a file or a folder of rules
        ".roorules",
        ".goosehints",
        "copilot-instructions.md",  # .github/copilot-instructions.md
    }
)
"""File names that are instructions wherever they are in a root."""

INSTRUCTION_FOLDERS: Final = (
    ".github/instructions/",  # Copilot's *.instructions.md
    ".github/prompts/",
    ".clinerules/",
    ".cursor/rules/",
    ".windsurf/rules/",
    ".roo/",
    ".junie/",
    ".kiro/steering/",
    ".amazonq/rules/",
    ".continue/rules/",
)
"""Folders (relative to a root) whose every file is an instruction."""

_REPOSITORY_CONFIG: Final = "/.git/config"


def is_instruction(rel: str) -> bool:
    """Whether the root-relative path ``rel`` is an agent instruction file."""
    return posixpath.basename(rel) in INSTRUCTION_NAMES or rel.startswith(INSTRUCTION_FOLDERS)


def callouts(changes: Iterable[Change], roots: Sequence[str]) -> list[str]:
    """The notices for ``changes``: one for the instruction files changed, one
    per repository made."""
    instructions: list[str] = []
    notices: list[str] = []
    for change in changes:
        root = next((r for r in roots if change.path.startswith(r.rstrip("/") + "/")), None)
        if root is None:
            continue
        rel = change.path[len(root.rstrip("/")) + 1 :]
        if is_instruction(rel):
            instructions.append(f"{change.path} ({change.how})")
        if change.how == "created" and change.path.endswith(_REPOSITORY_CONFIG):
            repository = change.path.removesuffix(_REPOSITORY_CONFIG)
            notices.append(
                f"a new git repository at {repository}: a gitlink to it makes your next "
                f"git status in the outer repository run its config (core.fsmonitor); "
                f"read {change.path} before running git there"
            )
    if instructions:
        notices.insert(
            0,
            "agent instruction files changed, which the next agent here reads as its "
            f"instructions: {', '.join(instructions)}",
        )
    return notices
