"""A person at the terminal answers each ``ask``: allow once, allow for the rest
of this attempt, or refuse. Reads the controlling terminal, not stdin (which may
carry the prompt)."""

from __future__ import annotations

import json
import os

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
            return await trio.to_thread.run_sync(self._ask, ask, abandon_on_cancel=True)

    def _ask(self, ask: Ask) -> Answer:
        try:
            fd = os.open(self.tty, os.O_RDWR | os.O_NOCTTY)
        except OSError:
            return "refuse"
        try:
            _write(fd, render(ask))
            for _ in range(5):
                _write(fd, "allow [o]nce, allow for the rest of this [a]ttempt, or [r]efuse? ")
                line = _readline(fd)
                if line is None:
                    return "refuse"
                answer = _CHOICES.get(line.strip().lower()[:1])
                if answer is not None:
                    return answer  # type: ignore[return-value]
            return "refuse"
        finally:
            os.close(fd)


def _write(fd: int, text: str) -> None:
    data = text.encode("utf-8", errors="replace")
    while data:
        data = data[os.write(fd, data) :]


def _readline(fd: int, limit: int = 4096) -> str | None:
    """One line from the terminal (a tty is not seekable: no buffered text file)."""
    buf = b""
    while not buf.endswith(b"\n") and len(buf) < limit:
        chunk = os.read(fd, 1)
        if not chunk:
            return None if not buf else buf.decode(errors="replace")
        buf += chunk
    return buf.decode(errors="replace")


def render(ask: Ask) -> str:
    """The tool call a person is asked about: the command, or the content of a write."""
    out = [f"\n--- the agent asks: {ask.kind}: {ask.subject}\n    why: {ask.reason}\n"]
    content = ask.detail.get("content")
    if isinstance(content, str):
        out.append(
            "    content to write:\n"
            + "".join(f"    + {line}\n" for line in content.splitlines()[:40])
        )
    raw = ask.detail.get("raw_input")
    if raw:
        out.append(f"    input: {json.dumps(raw, ensure_ascii=False)[:800]}\n")
    return "".join(out)
