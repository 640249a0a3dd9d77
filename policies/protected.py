"""Paths no governed write may touch, and paths no governed read may see.

This is the one list: the policy engine refuses governed writes to these paths
and the sandbox (``sandbox/``) re-binds them read-only inside a writable root.
Each entry is a glob relative to a root (see `policies.paths`).

Why each group:
- VCS execution surface: hooks and config run code at the operator's next
  ``git commit``, outside any sandbox. The policy engine refuses every governed
  write under ``.git`` (and nested repositories' ``.git``): agents write files,
  never git internals. The sandbox is finer, so that ``git commit`` works in it
  at edit-workspace: it pins only the parts of a git dir that run code
  (`sandbox.plan.protected.GIT_DIR_PROTECTED`) and binds the git dir over itself, so
  ``mv .git .git-old`` and a rebuilt ``.git`` with a hook fail (protecting only
  ``.git/hooks`` would be beaten that way); a policy's ``[sandbox] git =
  "read-only"`` pins ``.git`` as a whole.
- The agent and governor control plane: an agent must not rewrite its own
  policy, settings or future instructions.
- Editor and auto-run config: ``.vscode/tasks.json`` and ``.envrc`` run code when
  a person opens the folder.
- Shell and tool rc files, for a workspace that overlaps ``$HOME``.
"""

from __future__ import annotations

from typing import Final

VCS: Final = (".git", ".gitmodules", ".githooks", ".husky")
CONTROL_PLANE: Final = (
    ".acp-governor",
    ".claude",
    ".codex",
    ".gemini",
    ".agents",
    ".cursor",
    ".mcp.json",
)
AUTO_RUN: Final = (".vscode", ".idea", ".devcontainer", ".envrc")
RC_FILES: Final = (
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".gitconfig",
    ".npmrc",
    ".yarnrc",
    ".yarnrc.yml",
    ".pnpmfile.cjs",
    ".ripgreprc",
)

PROTECTED_NAMES: Final = VCS + CONTROL_PLANE + AUTO_RUN + RC_FILES
"""Names protected at the top of every writable root, file or folder, existing or
not. The sandbox pins exactly these (`sandbox.plan.protected` imports them), ``.git``
by its own rules (see above)."""

ALWAYS_PROTECTED: Final = (
    *(glob for name in PROTECTED_NAMES for glob in (name, f"{name}/**")),
    "**/.git",  # nested repositories
    "**/.git/**",
)
"""Write-protected for governed writes (``fs/write_text_file``) in every writable
root, whatever the policy says (globs); all of ``.git`` included, commits or not."""

HIDDEN_NAMES: Final = (".env", ".env.*")
"""File names no governed read may see, at any depth (the sandbox masks them)."""

HIDDEN_BY_DEFAULT: Final = tuple(f"**/{name}" for name in HIDDEN_NAMES)
"""Read-denied in the roots unless a policy replaces the list."""
