"""Paths no governed write may touch, and paths no governed read may see.

This is the one list: the policy engine refuses governed writes to these paths
and the sandbox (``sandbox/``) re-binds them read-only inside a writable root.
Each entry is a glob relative to a root (see `governor.policies.paths`).

Why each group:
- VCS execution surface: hooks and config run code at the operator's next
  ``git commit``, outside any sandbox. The policy engine refuses every governed
  write under ``.git`` (and nested repositories' ``.git``): agents write files,
  never git internals. The sandbox is finer, so that ``git commit`` works in it
  at edit-workspace: it pins only the parts of a git dir that run code
  (`governor.sandbox.plan.protected.GIT_DIR_PROTECTED`) and binds the git dir over itself, so
  ``mv .git .git-old`` and a rebuilt ``.git`` with a hook fail (protecting only
  ``.git/hooks`` would be beaten that way); a policy's ``[sandbox] git =
  "read-only"`` pins ``.git`` as a whole.
- The agent and governor control plane: an agent must not rewrite its own
  policy, settings or future instructions.
- Hook managers' configs: the hook git runs at the person's next ``git commit``
  is the manager's own, and it runs whatever this file names.
- Editor and auto-run config: ``.vscode/tasks.json``, ``.envrc``, ``mise.toml``
  run code when a person opens the folder or ``cd``s into it.
- Shell and tool rc files, for a workspace that overlaps ``$HOME``.

A name of `HOOK_CONFIGS` or `AUTO_RUN` may be unprotected by a policy
(``unprotect``, `UNPROTECTABLE`): a project whose job is to edit its
``.pre-commit-config.yaml``. The rest never: a policy may come from the
repository, and an agent must not rewrite git's internals or its own controls.

What stays out, on purpose: files that run code only when the person runs a
command that names them or their tool (``package.json``'s scripts at ``npm
install``, a ``Makefile``, ``tox.ini``, a JavaScript tool config): protecting
them would protect the project. Globs the sandbox cannot pin by name
(``mise.<env>.toml``, ``*.code-workspace``, ``*.sublime-project``) are not here
either; they run only once the person picks them.
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
HOOK_CONFIGS: Final = (
    # pre-commit: the hook it installs reads this file at each commit
    # (https://pre-commit.com/#plugins; prek reads the .yml spelling too)
    ".pre-commit-config.yaml",
    ".pre-commit-config.yml",
    # lefthook: every main and -local name, and their script folders
    # (https://lefthook.dev/configuration, "Config file name"; source_dir,
    # source_dir_local default to .lefthook/ and .lefthook-local/)
    *(
        f"{where}{dot}lefthook{local}.{ext}"
        for where, dot in (("", ""), ("", "."), (".config/", ""))
        for local in ("", "-local")
        for ext in ("yml", "yaml", "toml", "json", "jsonc")
    ),
    ".lefthook",
    ".lefthook-local",
    # husky v4 read its hooks from these at each commit (v5 on: .husky/, in VCS)
    ".huskyrc",
    ".huskyrc.json",
    ".huskyrc.js",
    "husky.config.js",
    # overcommit: its hooks run what this names (https://github.com/sds/overcommit)
    ".overcommit.yml",
)
"""The configs of hook managers: what the hook git runs at the person's next
commit does what they say."""
AUTO_RUN: Final = (
    ".vscode",  # tasks.json "runOn": "folderOpen", settings that name programs
    ".idea",  # JetBrains run configurations and startup tasks
    ".zed",  # .zed/tasks.json, .zed/settings.json (language server binaries)
    ".helix",  # .helix/languages.toml names language server commands
    ".nvim.lua",  # Neovim 'exrc': run at start in the folder (:help exrc)
    ".nvimrc",
    ".exrc",
    ".lvimrc",  # vim-localvimrc
    ".dir-locals.el",  # Emacs directory variables, eval forms included
    ".dir-locals-2.el",
    ".devcontainer",  # the folder and the file: both are opened as the container
    ".devcontainer.json",  # (https://containers.dev/implementors/spec/, "devcontainer.json")
    ".envrc",  # direnv: sourced by the shell at cd (https://direnv.net)
    # mise: at cd, [hooks] enter/cd and [env] _.source run; a tool's path:
    # version runs a binary the file names (https://mise.jdx.dev/configuration.html,
    # https://mise.jdx.dev/hooks.html)
    "mise.toml",
    ".mise.toml",
    "mise.local.toml",
    ".mise.local.toml",
    "mise/config.toml",
    ".mise/config.toml",
    ".config/mise.toml",
    ".config/mise",
    ".rtx.toml",
    # asdf (and mise): a "path:" version makes every shim run a binary from the
    # path the file names (https://asdf-vm.com/manage/configuration.html)
    ".tool-versions",
)
UNPROTECTABLE: Final = HOOK_CONFIGS + AUTO_RUN
"""The names a policy's ``unprotect`` may name."""
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

PROTECTED_NAMES: Final = VCS + CONTROL_PLANE + HOOK_CONFIGS + AUTO_RUN + RC_FILES
"""Names protected at the top of every writable root, file or folder, existing or
not. The sandbox pins exactly these (`governor.sandbox.plan.protected` imports them), ``.git``
by its own rules (see above)."""



def protected_globs(unprotected: tuple[str, ...] = ()) -> tuple[str, ...]:
    """The globs of `PROTECTED_NAMES` less ``unprotected`` (names of
    `UNPROTECTABLE`), and every nested repository's ``.git``."""
    return (
        *(glob for name in PROTECTED_NAMES if name not in unprotected for glob in (name, f"{name}/**")),
        "**/.git",  # nested repositories
        "**/.git/**",
    )


HIDDEN_NAMES: Final = (".env", ".env.*")
"""File names no governed read may see, at any depth (the sandbox masks them)."""

HIDDEN_BY_DEFAULT: Final = tuple(f"**/{name}" for name in HIDDEN_NAMES)
"""Read-denied in the roots unless a policy replaces the list."""
