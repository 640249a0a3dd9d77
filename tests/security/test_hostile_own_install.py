"""The governor's own install inside the workspace is read-only in every
sandbox (issue 24), as root and as an unprivileged user, in a bwrap of its own
and in a session's sandbox: a ``.pth`` file planted in a project's ``.venv``
would run at the next ``governor`` start, as the person, outside any sandbox.

`governor.confine.own_install` decides which folders (tests/governor/test_install.py, and
a real attempt in tests/attempt/test_own_install_attempt.py); here the
sandbox's half: the pinned venv cannot be written, moved away or rebuilt,
while the rest of the workspace stays writable and the venv still runs.
"""

from __future__ import annotations

import pytest
from escape_harness import Box
from toolchain_home import AVAILABLE, SYSTEM_PYTHON, VERSION, WHY_NOT

pytestmark = pytest.mark.skipif(not AVAILABLE, reason=WHY_NOT)


def test_a_venv_held_read_only_takes_no_pth_and_cannot_be_swapped(box: Box) -> None:
    venv = box.ws / ".venv"
    made = box.host(str(SYSTEM_PYTHON), "-m", "venv", "--without-pip", str(venv))
    assert made.returncode == 0, made.stderr
    site = venv / "lib" / f"python{VERSION}" / "site-packages"
    pyvenv = (venv / "pyvenv.cfg").read_text()
    outcome = box.run(
        f"echo 'import os' > {site}/evil.pth; echo 'home = /tmp' > .venv/pyvenv.cfg; "
        "mv .venv .venv-old; rm -rf .venv; echo made > made.txt; "
        ".venv/bin/python -c 'print(\"venv runs\")'",
        read_only=[venv],
    )
    assert outcome.error is None, outcome.error
    assert not (site / "evil.pth").exists()
    assert (venv / "pyvenv.cfg").read_text() == pyvenv and not (box.ws / ".venv-old").exists()
    assert (box.ws / "made.txt").read_text() == "made\n"  # the neighbour: the rest is writable
    assert "venv runs" in outcome.text
    unpinned = box.run(f"echo 'import os' > {site}/evil.pth && echo planted")
    assert "planted" in unpinned.text  # without the pin the same write lands (it is the pin)


def test_a_read_only_path_that_holds_a_root_is_refused(box: Box) -> None:
    outcome = box.run("true", read_only=[box.ws])
    assert outcome.error is not None and "is a root or holds one" in outcome.error
