"""Where an attempt keeps its own files on the host: a fresh folder of its own
under the governor's hidden folder (`governor.sandbox.host.concealed.attempts_dir`),
whatever ``TMPDIR`` is.

What goes there: the relay's sockets and shim (`governor.mcp.relay`), a batch
job's folder (its workspace, its live audit log, its tries copy:
`governor.batch.work`), a ``--clone`` workspace (`governor.cli.cloning`) and
the tries' starting copy (`governor.attempt.tries`). Every sandbox hides the state
folder that holds them all; a sandbox gets back only what is its own
attempt's (its roots, bound after the hiding tmpfs; its relay's folder,
`governor.sandbox.plan.profile.Profile.own`). Under ``TMPDIR`` they were shared: only
``/tmp`` and ``/var/tmp`` are private in a sandbox, so with ``TMPDIR=/srv/tmp``
one attempt's agent connected to another's relay socket and wrote into its
workspace.

Each folder is made ``0700`` (its parents too, when this makes them): the
person's other users see nothing of an attempt either.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from governor.sandbox.host.concealed import attempts_dir


class NoAttemptFolder(Exception):
    """The governor's folder for attempts cannot be made; the message names it."""


def attempt_folder(prefix: str) -> Path:
    """A new empty folder ``PREFIXxxxxxxxx`` of this attempt's own, under
    `attempts_dir` (made ``0700`` when missing); `NoAttemptFolder` naming the
    folder and why when it cannot be made."""
    under = attempts_dir()
    try:
        _make(under)
        return Path(tempfile.mkdtemp(prefix=prefix, dir=under))
    except OSError as e:
        raise NoAttemptFolder(
            f"the governor's folder for attempts {under} cannot be made: {e.strerror}; "
            "set XDG_STATE_HOME to a folder this user can write"
        ) from None


def _make(folder: Path) -> None:
    """``folder`` and its missing parents, each made ``0700``."""
    missing = []
    for path in (folder, *folder.parents):
        if path.is_dir():
            break
        missing.append(path)
    for path in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o700)
