"""A person at the terminal answers each ``ask``: allow once, allow for the rest
of this attempt, or refuse. Reads the controlling terminal, not stdin (which may
carry the prompt)."""

from __future__ import annotations

import json
import os
from typing import TextIO

import trio

from governor.approver import Answer, Ask

_CHOICES = {"o": "once", "a": "always", "r": "refuse", "": "refuse"}


class Person:
    """The ``person`` approver; refuses when no terminal can be opened."""

    name = "person"

    def __init__(self, tty: str = "/dev/tty") -> None:
        self.tty = tty
        self.lock = trio.Lock()

    async def __call__(self, ask: Ask) -> Answer:
        async with self.lock:  # one question at a time
            return await trio.to_thread.run_sync(self._ask, ask)

    def _ask(self, ask: Ask) -> Answer:
        try:
            fd = os.open(self.tty, os.O_RDWR | os.O_NOCTTY)
        except OSError:
            return "refuse"
        with os.fdopen(fd, "r+", buffering=1, encoding="utf-8", errors="replace") as term:
            show(term, ask)
            for _ in range(5):
                term.write("allow [o]nce, allow for the rest of this [a]ttempt, or [r]efuse? ")
                term.flush()
                line = term.readline()
                if not line:
                    return "refuse"
                answer = _CHOICES.get(line.strip().lower()[:1])
                if answer is not None:
                    return answer  # type: ignore[return-value]
            return "refuse"


def show(term: TextIO, ask: Ask) -> None:
    """The tool call a person is asked about: the command, or the content of a write."""
    term.write(f"\n--- the agent asks: {ask.kind}: {ask.subject}\n    why: {ask.reason}\n")
    content = ask.detail.get("content")
    if isinstance(content, str):
        lines = content.splitlines()[:40]
        term.write("    content to write:\n" + "".join(f"    + {line}\n" for line in lines))
    raw = ask.detail.get("raw_input")
    if raw:
        term.write(f"    input: {json.dumps(raw, ensure_ascii=False)[:800]}\n")
