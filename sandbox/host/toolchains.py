"""The person's toolchains under ``$HOME``, kept visible inside the sandbox.

Every home is an empty tmpfs inside the sandbox (it holds ``~/.ssh``, tokens,
the agents' logins), which would take the person's toolchain with it: cargo
in ``~/.cargo/bin``, tools installed with ``pip --user``, pipx or uv in
``~/.local/bin``, nvm's node, pyenv's interpreters and every virtualenv made
from one. `detect` finds what a command or an agent needs of them, from facts
alone (nothing is guessed from a tool's name):

* each directory under a home that the process's ``PATH`` names, with the
  prefix it belongs to (``~/.nvm/versions/node/v22/bin`` keeps
  ``~/.nvm/versions/node/v22``; ``~/.local/bin`` keeps ``~/.local/lib``
  beside it, where ``pip --user`` puts packages, and not ``~/.local/share``);
* what the programs in those directories lead to: a symlink's target (pipx's
  and uv's tool venvs) and a script's interpreter (its ``#!`` line);
* the roots of the usual toolchain variables (`TOOLCHAIN_VARIABLES`), set or at
  their default place, and the variables themselves when set;
* the interpreter of each virtualenv at the top of a root (``.venv``:
  ``pyvenv.cfg``'s ``home``, and where ``bin/python`` points), only when it is
  a real interpreter (an executable ELF file) inside what the two rules above
  allow. A root is the agent's to write, and so is its ``pyvenv.cfg``: taken at
  its word, ``home = /root/.claude`` would show that folder (or the
  governor's audit logs, ``~/.cache``, another agent's logins) to every later
  sandbox. What a root holds never widens what is kept.

All of it is bound read-only, and never a home itself or a folder that holds
one of `CREDENTIAL_DIRS`. `CREDENTIAL_FILES` inside what is kept are masked
with an empty file. Package caches (`CACHES`) are mounted as overlays whose
writes go to a private tmpfs: a build inside reuses what the host downloaded
and cannot change the host's copy. An operator names more folders with the
policy's ``[sandbox] keep`` and turns detection off with ``toolchains = false``.

The listing of a ``PATH`` directory is cached by its modification time: a
session surveys again for every command.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from governor.policies.paths import is_under
from governor.sandbox.plan.profile import Kept, ProfileError
from governor.sandbox.plan.protected import (
    CREDENTIAL_DIRS,
    CREDENTIAL_FILES,
    CREDENTIALS_IN_TOOLCHAIN,
)

SHEBANG_MAX_BYTES: Final = 256
ENTRIES_MAX: Final = 512
"""Programs read per ``PATH`` directory for their links and interpreters; a
directory with more is kept, the rest of its entries not followed."""

TOOLCHAIN_VARIABLES: Final[Mapping[str, str | None]] = {
    "PYENV_ROOT": ".pyenv",
    "NVM_DIR": ".nvm",
    "CARGO_HOME": ".cargo",
    "RUSTUP_HOME": ".rustup",
    "GOPATH": "go",
    "GOROOT": None,
    "UV_PYTHON_INSTALL_DIR": ".local/share/uv/python",
    "VOLTA_HOME": ".volta",
    "BUN_INSTALL": ".bun",
    "SDKMAN_DIR": ".sdkman",
    "ASDF_DATA_DIR": ".asdf",
    "MISE_DATA_DIR": ".local/share/mise",
}
"""Each variable with its default place under a home (None: no default)."""

CACHES: Final = (
    ".cache/pip",
    ".cache/uv",
    ".npm",
    ".cargo/registry",
    ".cargo/git",
    ".cache/go-build",
    "go/pkg/mod",
    ".m2/repository",
    ".gradle/caches",
    ".cache/yarn",
)
"""Package caches under a home: kept as overlays with private writes."""


@dataclass(frozen=True)
class Toolchains:
    """What `detect` found."""

    kept: tuple[Kept, ...] = ()
    caches: tuple[str, ...] = ()
    masked: tuple[str, ...] = ()
    """Credential files inside what is kept, covered with an empty file."""
    path: str = ""
    """``PATH`` with only the entries that exist and are visible inside."""
    env: Mapping[str, str] = field(default_factory=dict)
    """The toolchain variables that are set and whose folder is kept."""


def detect(
    search_path: str,
    variables: Mapping[str, str],
    *,
    homes: Sequence[str],
    roots: Sequence[str],
    visible: Sequence[str] = (),
    keep: Sequence[str] = (),
    detection: bool = True,
    overlays: bool = True,
    forbidden: Sequence[str] = (),
) -> Toolchains:
    """What of the homes a process with ``search_path`` and toolchain
    ``variables`` needs, with ``visible`` (already kept by the caller) and
    ``roots`` (bound anyway) left out. ``keep`` are the operator's folders
    (resolved, existing), kept whatever ``detection`` says. Detection never
    keeps a folder that holds or lies in one of ``forbidden``."""
    found = _Found(homes=tuple(homes), given=(*roots, *visible), forbidden=tuple(forbidden))
    for folder in keep:
        found.add(folder, "named by the policy's [sandbox] keep", operator=True)
    env: dict[str, str] = {}
    if detection:
        for entry in _entries(search_path):
            if found.hidden(entry) and os.path.isdir(entry):
                found.prefix(entry, "on PATH")
                for program, target in _programs(entry, _mtime(entry)):
                    found.prefix(target, f"{program} leads there")
        places: list[str] = []
        for name, default in TOOLCHAIN_VARIABLES.items():
            value = variables.get(name, "")
            named = [value] if os.path.isabs(value) else []
            if not named and default is not None:
                named = [os.path.join(home, default) for home in found.homes]
            for place in named:
                real = os.path.realpath(place)
                places.append(real)
                held = found.hidden(real) and os.path.isdir(real) and found.add(
                    real, f"${name}" if value else f"${name}'s default place"
                )
                if held and value:
                    env[name] = value
        allowed = [
            a
            for a in (*places, *(k for k in found.kept if k not in keep))
            if not any(is_under(h, a) for h in found.homes)
        ]
        for root in roots:
            for venv, interpreter in _venvs(root):
                if any(is_under(interpreter, a) for a in allowed) and _is_interpreter(interpreter):
                    found.prefix(interpreter, f"the interpreter of {venv}")
    kept = found.outermost()
    caches: tuple[str, ...] = ()
    if overlays and detection:
        caches = tuple(
            real
            for home in found.homes
            for rel in CACHES
            if os.path.isdir(real := os.path.realpath(os.path.join(home, rel)))
            and is_under(real, home)
        )
    return Toolchains(
        kept=kept,
        caches=caches,
        masked=_credentials(kept, tuple(found.kept), found.homes),
        path=":".join(
            entry
            for entry in _entries(search_path)
            if os.path.isdir(entry)
            and (not found.hidden(entry) or any(is_under(entry, k.path) for k in kept))
        ),
        env=env,
    )


@dataclass
class _Found:
    homes: tuple[str, ...]
    given: tuple[str, ...]
    forbidden: tuple[str, ...] = ()
    kept: dict[str, str] = field(default_factory=dict)

    def hidden(self, path: str) -> bool:
        """Whether ``path`` lies in a home (hidden inside) and not in what is
        given visible anyway."""
        return any(is_under(path, h) for h in self.homes) and not any(
            is_under(path, g) for g in self.given
        )

    def add(self, path: str, why: str, *, operator: bool = False) -> bool:
        """Keep ``path`` unless it is a home, holds one, or holds credentials
        (detection skips such a folder; the operator is refused earlier)."""
        if path in self.kept:
            return True
        if not operator and (
            not self.hidden(path)
            or any(is_under(h, path) for h in self.homes)
            or _holds_credentials(path, _credential_dirs(self.homes))
            or _holds_credentials(path, self.forbidden)
        ):
            return False
        self.kept[path] = why
        return True

    def prefix(self, path: str, why: str) -> None:
        """Keep the install ``path`` belongs to: for ``P/bin/x`` or ``P/bin``
        the prefix ``P`` (an interpreter needs its stdlib, node its
        ``lib/node_modules``), but only ``P/bin`` and ``P/lib`` of ``~/.local``
        and only ``~/bin`` of a home; otherwise the directory itself."""
        real = os.path.realpath(path)
        directory = real if os.path.isdir(real) else os.path.dirname(real)
        if not self.hidden(directory):
            return
        if os.path.basename(directory) != "bin":
            self.add(directory, why)
            return
        prefix = os.path.dirname(directory)
        if prefix in self.homes:
            self.add(directory, why)
        elif any(prefix == os.path.join(h, ".local") for h in self.homes):
            self.add(directory, why)
            lib = os.path.join(prefix, "lib")
            if os.path.isdir(lib):
                self.add(lib, f"{why} (its packages)")
        elif prefix not in self.kept and self.add(prefix, why):
            base = _venv_home(prefix)
            if base:  # a venv's python is a link out of it, to its base's prefix
                self.prefix(base, f"the interpreter of {prefix}")
        elif prefix not in self.kept:
            self.add(directory, why)

    def outermost(self) -> tuple[Kept, ...]:
        """What is kept, without folders inside other kept ones."""
        ordered = sorted(self.kept, key=lambda p: (p.count("/"), p))
        out: list[Kept] = []
        for path in ordered:
            if not any(is_under(path, k.path) for k in out):
                out.append(Kept(path, self.kept[path]))
        return tuple(out)


def _entries(search_path: str) -> Iterable[str]:
    return dict.fromkeys(
        os.path.normpath(e) for e in search_path.split(":") if os.path.isabs(e)
    )


def _mtime(directory: str) -> int:
    try:
        return os.stat(directory).st_mtime_ns
    except OSError:
        return 0


@functools.lru_cache(maxsize=256)
def _programs(directory: str, mtime_ns: int) -> tuple[tuple[str, str], ...]:
    """(program, the folder it leads to) for the links and scripts in
    ``directory`` at modification time ``mtime_ns`` (the cache key), one per
    folder: pyenv's shims and rustup's proxies are dozens leading to one place."""
    del mtime_ns
    out: dict[str, str] = {}
    try:
        entries = sorted(os.scandir(directory), key=lambda e: e.name)[:ENTRIES_MAX]
    except OSError:
        return ()
    for entry in entries:
        path = entry.path
        if entry.is_symlink():
            path = os.path.realpath(path)
            out.setdefault(os.path.dirname(path), entry.path)
        interpreter = shebang_interpreter(path)
        if interpreter is not None:
            out.setdefault(os.path.dirname(interpreter), entry.path)
    return tuple((program, folder) for folder, program in out.items())


def shebang_interpreter(path: str, search_path: str | None = None) -> str | None:
    """The resolved interpreter a script's ``#!`` line names (through
    ``/usr/bin/env NAME``, looked up on ``search_path``); None for a binary."""
    try:
        with open(path, "rb") as handle:
            first = handle.read(SHEBANG_MAX_BYTES).split(b"\n", 1)[0]
    except OSError:
        return None
    if not first.startswith(b"#!"):
        return None
    words = first[2:].decode("utf-8", "replace").split()
    if not words:
        return None
    program = words[0]
    if os.path.basename(program) == "env":
        rest = [w for w in words[1:] if not w.startswith("-")]
        if not rest:
            return None
        found = shutil.which(rest[0], path=search_path)
        return os.path.realpath(found) if found else None
    return os.path.realpath(program) if os.path.exists(program) else None


def _is_interpreter(path: str) -> bool:
    """Whether ``path`` is, or is a ``bin`` folder holding, a Python interpreter
    that is a real program: an executable regular ELF file, not a script or a
    folder named like one."""
    candidates = [path]
    if os.path.isdir(path):
        candidates = sorted(glob.glob(os.path.join(glob.escape(path), "python*")))[:ENTRIES_MAX]
    for candidate in candidates:
        real = os.path.realpath(candidate)
        if not os.path.basename(real).startswith("python") or not os.access(real, os.X_OK):
            continue
        try:
            with open(real, "rb") as handle:
                if os.path.isfile(real) and handle.read(4) == b"\x7fELF":
                    return True
        except OSError:
            continue
    return False


def _venvs(root: str) -> list[tuple[str, str]]:
    """(venv, its base interpreter's directory or program) for each virtualenv
    at the top of ``root`` (one ``stat`` per top-level directory), as the
    venv's own files say: `detect` checks them against the host."""
    out = []
    try:
        entries = list(os.scandir(root))
    except OSError:
        return []
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        home = _venv_home(entry.path)
        if home is None:
            continue
        if home:
            out.append((entry.path, home))
        python = os.path.join(entry.path, "bin", "python")
        if os.path.islink(python):
            out.append((entry.path, os.path.realpath(python)))
    return out


def _venv_home(prefix: str) -> str | None:
    """The ``home`` a ``pyvenv.cfg`` in ``prefix`` names (its base interpreter's
    ``bin``; "" when it names none), or None when ``prefix`` is not a virtualenv."""
    try:
        with open(os.path.join(prefix, "pyvenv.cfg"), encoding="utf-8", errors="replace") as f:
            text = f.read(4096)
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "home" and os.path.isabs(value.strip()):
            return value.strip()
    return ""


@functools.lru_cache(maxsize=16)
def _credential_dirs(homes: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(os.path.join(home, rel) for home in homes for rel in CREDENTIAL_DIRS)


@functools.lru_cache(maxsize=16)
def _credential_files(homes: tuple[str, ...]) -> tuple[str, ...]:
    return tuple(os.path.join(home, rel) for home in homes for rel in CREDENTIAL_FILES)


def _holds_credentials(path: str, folders: tuple[str, ...]) -> bool:
    """Whether ``path`` holds one of the credential ``folders`` or lies inside one."""
    return any(is_under(f, path) or is_under(path, f) for f in folders)


def credential_dirs_in(path: str, homes: Sequence[str]) -> list[str]:
    """The credential folders (`CREDENTIAL_DIRS`) that lie inside ``path`` or
    around it."""
    return [
        f
        for f in _credential_dirs(tuple(homes))
        if (is_under(f, path) and os.path.exists(f)) or is_under(path, f)
    ]


def _credentials(
    kept: Sequence[Kept], tops: Sequence[str], homes: Sequence[str]
) -> tuple[str, ...]:
    """The credential files that exist inside what is ``kept``: the home-relative
    ones (`CREDENTIAL_FILES`) and those at the top of each toolchain found,
    ``tops``, nested ones too (`CREDENTIALS_IN_TOOLCHAIN`:
    ``$CARGO_HOME/credentials.toml``, an nvm version's ``etc/npmrc``)."""
    out: list[str] = []
    candidates = [*_credential_files(tuple(homes))]
    candidates += [os.path.join(top, rel) for top in tops for rel in CREDENTIALS_IN_TOOLCHAIN]
    for path in candidates:
        if any(is_under(path, k.path) for k in kept) and os.path.isfile(path):
            out.append(os.path.realpath(path))
    return tuple(dict.fromkeys(out))


def describe(kept: Sequence[Kept], caches: Sequence[str], masked: Sequence[str]) -> list[str]:
    """One line per folder kept, cache overlaid and credential masked, for
    ``governor sandbox --print-argv`` and ``governor doctor``."""
    return [
        *(f"kept   {k.path} (read-only: {k.why})" for k in kept),
        *(f"cache  {c} (overlay: writes stay in the sandbox)" for c in caches),
        *(f"masked {m} (an empty file: a secret or credentials)" for m in masked),
    ]


def operator_folders(
    folders: tuple[Path, ...], homes: tuple[str, ...], state: str
) -> tuple[str, ...]:
    """The policy's ``[sandbox] keep`` folders, resolved; `ProfileError` for one
    that does not exist, is a home or holds one, holds credentials, or holds
    or lies in the governor's state directory ``state``."""
    out = []
    for folder in folders:
        real = os.path.realpath(folder)
        if not os.path.isdir(real):
            raise ProfileError(f"folder to keep {folder} does not exist or is not a directory")
        if is_under(real, state) or is_under(state, real):
            raise ProfileError(
                f"folder to keep {folder} holds or lies in the governor's state directory "
                f"{state}, where every attempt's audit log is; name a folder beside it instead"
            )
        if real == "/" or any(is_under(h, real) for h in homes):
            raise ProfileError(
                f"folder to keep {folder} is '/' or a home or holds one; that would expose "
                "~/.ssh, ~/.aws and agent credentials"
            )
        inside = credential_dirs_in(real, homes)
        if inside:
            raise ProfileError(
                f"folder to keep {folder} holds {inside[0]} (credentials); name a folder "
                "beside it instead"
            )
        out.append(real)
    return tuple(out)
