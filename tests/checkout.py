"""Whether this checkout can be seen from inside a sandbox.

Some tests run a scripted agent (or a check) straight from the checkout's
``tests/`` folder inside the agent's sandbox, through a preset's program on
``PATH`` that only execs it. The sandbox hides ``$HOME``, the password
database's home and the private ``/tmp`` and ``/var/tmp``: from a checkout
there (a developer's clone under their home, a clone in ``/tmp``) such a test
cannot work, and says so by skipping rather than failing. The governor's own
install stays visible wherever it is: the README's demo runs from any
checkout."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def hidden_from_sandboxes() -> str | None:
    """Why a sandbox cannot see this checkout, or None when it can."""
    places = {
        "$HOME": os.environ.get("HOME"),
        "the password database's home": pwd.getpwuid(os.getuid()).pw_dir,
        "the private /tmp": "/tmp",
        "the private /var/tmp": "/var/tmp",
    }
    for what, place in places.items():
        if place and place != "/" and REPO.is_relative_to(os.path.realpath(place)):
            return f"this checkout ({REPO}) is under {what}, which every sandbox hides"
    return None


def needs_a_visible_checkout() -> pytest.MarkDecorator:
    """Skip a test whose agent runs from the checkout when no sandbox sees it."""
    why = hidden_from_sandboxes()
    return pytest.mark.skipif(why is not None, reason=why or "")
