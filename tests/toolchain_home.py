"""A developer's toolchain under a home, made for real: what the sandbox must keep
working (`governor.sandbox.host.toolchains`) and the secrets beside it it must keep hidden.

- an interpreter under ``~/.pyenv/versions``: the system's CPython binary, its
  standard library beside it (a link to the system's), so that it runs from
  that prefix as a pyenv build does;
- a workspace ``.venv`` made from it (``pyvenv.cfg`` names it);
- in ``~/.local/bin``: a shell tool, and a ``pip --user``-style script whose
  ``#!`` is the pyenv interpreter and whose module is in ``~/.local/lib``;
- ``~/.cargo/bin/cargo``;
- the secrets: ``~/.ssh/id_ed25519``, ``~/.npmrc``, ``~/.cargo/credentials.toml``,
  each holding the canary.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

VERSION = f"{sys.version_info.major}.{sys.version_info.minor}"
SYSTEM_PYTHON = Path(f"/usr/bin/python{VERSION}")
SYSTEM_STDLIB = Path(f"/usr/lib/python{VERSION}")
AVAILABLE = SYSTEM_PYTHON.exists() and (SYSTEM_STDLIB / "os.py").exists()
WHY_NOT = f"needs the system's python{VERSION} and its standard library"

PROBE = (
    "mytool; pyuser; cargo; .venv/bin/python -c 'import sys; print(\"venv\", sys.base_prefix)'; "
    "cat ~/.ssh/id_ed25519 ~/.npmrc ~/.cargo/credentials.toml; echo PATH=$PATH"
)
"""A shell line that uses each tool and tries each secret (run in the workspace)."""

COMMIT = "echo made > made.txt && git add made.txt && git commit -q -m from-the-sandbox && echo committed"
"""A shell line that commits a new file (the workspace must be a git repository)."""


def make_repository(workspace: Path) -> None:
    """``git init`` with an identity of its own (a fresh machine has none) and a
    first commit, as the person's repository."""

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=workspace, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.name", "Tool Chain")
    git("config", "user.email", "toolchain@example.invalid")
    (workspace / "README.md").write_text("hello\n")
    git("add", "README.md")
    git("commit", "-q", "-m", "first")


def commits(workspace: Path) -> list[str]:
    """The repository's commit subjects, newest first, as the host sees them."""
    log = subprocess.run(
        ["git", "log", "--format=%s"], cwd=workspace, capture_output=True, text=True, check=True
    )
    return log.stdout.split()


@dataclass(frozen=True)
class Toolchain:
    path: str
    """The ``PATH`` a person with this home has."""
    prefix: Path
    """The pyenv interpreter's prefix: what the venv's ``sys.base_prefix`` says."""

    def worked(self, text: str) -> bool:
        """Whether `PROBE`'s output shows every tool ran."""
        return all(
            line in text
            for line in ("mytool ran", "pyuser ran", "cargo ran", f"venv {self.prefix}")
        )


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(mode)


def make_toolchain(home: Path, workspace: Path, canary: str) -> Toolchain:
    """Lay the toolchain and secrets out under ``home``, the venv in ``workspace``."""
    prefix = home / ".pyenv" / "versions" / f"{VERSION}.99"
    python = prefix / "bin" / f"python{VERSION}"
    python.parent.mkdir(parents=True)
    shutil.copy2(SYSTEM_PYTHON, python)
    (prefix / "lib").mkdir()
    (prefix / "lib" / f"python{VERSION}").symlink_to(SYSTEM_STDLIB)
    local = home / ".local"
    _write(local / "bin" / "mytool", "#!/bin/sh\necho mytool ran\n", 0o755)
    _write(local / "bin" / "pyuser", f"#!{python}\nimport usermod\nusermod.hello()\n", 0o755)
    site = local / "lib" / f"python{VERSION}" / "site-packages"
    _write(site / "usermod.py", "def hello():\n    print('pyuser ran')\n")
    _write(home / ".cargo" / "bin" / "cargo", "#!/bin/sh\necho cargo ran\n", 0o755)
    _write(home / ".cargo" / "credentials.toml", f"token = '{canary}-cargo'\n")
    _write(home / ".ssh" / "id_ed25519", f"{canary}-ssh\n", 0o600)
    _write(home / ".npmrc", f"//registry.npmjs.org/:_authToken={canary}-npm\n", 0o600)
    subprocess.run(
        [str(python), "-m", "venv", "--without-pip", str(workspace / ".venv")],
        check=True,
        capture_output=True,
    )
    return Toolchain(f"{local}/bin:{home}/.cargo/bin:/usr/bin:/bin", prefix)


def developer_workspace(home: Path, workspace: Path, canary: str) -> Toolchain:
    """A repository in ``workspace`` (its venv ignored) and the toolchain in ``home``."""
    make_repository(workspace)
    toolchain = make_toolchain(home, workspace, canary)
    (workspace / ".gitignore").write_text(".venv/\n")
    return toolchain


def check_probe_and_commit(text: str, toolchain: Toolchain, canary: str, workspace: Path) -> None:
    """What ``PROBE; COMMIT`` run inside must show: every tool ran, no secret was
    read, and the commit landed in the host's repository."""
    assert toolchain.worked(text), text
    assert canary not in text
    assert "committed" in text and commits(workspace) == ["from-the-sandbox", "first"]
