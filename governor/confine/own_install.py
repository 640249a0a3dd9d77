"""The governor's own install, which no sandbox may change.

A project's ``.venv`` with acp-governor in it is inside the workspace
(``--workspace`` defaults to ``.``). Whatever the agent writes there runs at
the next ``governor`` start as the person, outside any sandbox: a ``.pth`` file
in its site-packages, a changed ``pyvenv.cfg`` ``home``, an edited dependency,
the ``governor`` script itself. So every folder the interpreter runs or imports
from at start (`own_install`) is pinned read-only in every sandbox, the
agent's and the commands', where it lies inside a root.

Pinned rather than refused: the venv inside the project is the common layout
(tests and CI run from one in the checkout, a spec-driven loop imports us from
a venv in its own repository), and a read-only venv still runs the project's
tests; only installing into it from inside fails. A folder that *is* a root
cannot be pinned without making the whole root read-only: that start is
refused (`problems`), with where to install instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from governor import policies, sandbox


def own_install() -> tuple[str, ...]:
    """The folders the next start runs or imports from, resolved: `_installs`
    and every folder on ``sys.path``."""
    paths = (entry for entry in sys.path if entry and os.path.isabs(entry))
    return _resolved((*_installs(), *paths))


def _installs() -> tuple[str, ...]:
    """The folders whose every file may run at start: the interpreter's
    prefixes (the venv's and its base's), the folder of the interpreter
    program, and our packages' folders (an editable install imports them from
    a checkout)."""
    return _resolved(
        (
            sys.prefix,
            sys.exec_prefix,
            sys.base_prefix,
            sys.base_exec_prefix,
            os.path.dirname(os.path.realpath(sys.executable)),
            str(Path(__file__).parent.parent),  # governor/ (this room's package is under it)
            *(str(Path(p.__file__ or "").parent) for p in (policies, sandbox)),
        )
    )


def _linked() -> tuple[str, ...]:
    """The install's folders as the person reaches them (the prefix, the
    interpreter's and the started script's folders), unresolved: one that
    passes through a link is not pinned by its target's pin."""
    started = sys.argv[0] if sys.argv and os.path.isabs(sys.argv[0]) else ""
    paths = (sys.prefix, os.path.dirname(sys.executable), os.path.dirname(started))
    return tuple(dict.fromkeys(os.path.abspath(p) for p in paths if p))


def _resolved(folders: Sequence[str]) -> tuple[str, ...]:
    found = (os.path.realpath(f) for f in folders if f)
    return tuple(dict.fromkeys(f for f in found if os.path.isdir(f) and f != "/"))


def read_only_in(roots: Sequence[str]) -> tuple[Path, ...]:
    """The folders of `own_install` that lie inside one of ``roots`` (strictly),
    outermost first and without those inside another: what the sandboxes pin."""
    inside = sorted(
        (f for f in own_install() if any(_below(f, r) for r in roots)),
        key=lambda f: (f.count("/"), f),
    )
    out: list[str] = []
    for folder in inside:
        if not any(folder == o or _below(folder, o) for o in out):
            out.append(folder)
    return tuple(Path(f) for f in out)


def problems(roots: Sequence[str]) -> list[str]:
    """Why the governor may not start with these writable roots: one is a
    folder of `own_install` (a pin would make the whole root read-only), or
    lies in one of `_installs`, whose every file may run at start (in a folder
    that is only on ``sys.path``, a root below it is a package nobody imports),
    or holds a link the install is reached through (`_linked`)."""
    installs = _installs()
    out = []
    for root in roots:
        real = os.path.realpath(root)
        held = [f for f in own_install() if real == f]
        held += [f for f in installs if _below(real, f)]
        out += [
            f"the governor's own install {path} lies in the root {root} through a link "
            f"(to {os.path.realpath(path)}): the agent could replace the link, and the next "
            "start would run what it leads to; install acp-governor outside the project "
            "(pipx install acp-governor, uv tool install acp-governor, or a venv outside "
            "every root), or use the link's target"
            for path in _linked()
            if _below(path, real) and os.path.realpath(path) != path
        ][:1]
        out += [
            f"the root {root} is the governor's own install or lies in it ({folder}, which "
            "Python runs or imports from at every start): the agent could change what the "
            "next `governor` runs; install acp-governor outside the project (pipx install "
            "acp-governor, uv tool install acp-governor, or a venv outside every root), or "
            "choose another workspace"
            for folder in held[:1]
        ]
    return out


def _below(path: str, parent: str) -> bool:
    return path != parent and path.startswith(parent.rstrip("/") + "/")
