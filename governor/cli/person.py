"""A person at the terminal answers each ``ask``: allow once, allow for the rest
of this attempt, or refuse; and fills in the forms an agent sends
(``elicitation/create``), or declines them. Reads the controlling terminal, not
stdin (which may carry the prompt)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

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


    async def fill(self, message: str, fields: Mapping[str, Any]) -> dict[str, Any] | None:
        """The form's values as the person typed them, or None when they decline."""
        async with self.lock:
            return await trio.to_thread.run_sync(
                self._fill, message, dict(fields), abandon_on_cancel=True
            )

    def _fill(self, message: str, fields: dict[str, Any]) -> dict[str, Any] | None:
        try:
            fd = os.open(self.tty, os.O_RDWR | os.O_NOCTTY)
        except OSError:
            return None
        try:
            _write(fd, f"\n--- the agent asks for input: {message}\n")
            _write(fd, "fill in the form [f], or [d]ecline? ")
            line = _readline(fd)
            if line is None or line.strip().lower()[:1] != "f":
                return None
            content: dict[str, Any] = {}
            for name, prop in fields.items():
                value = _field(fd, name, prop)
                if value is _DECLINED:
                    return None
                if value is not None:
                    content[name] = value
            return content
        finally:
            os.close(fd)


_DECLINED: Any = object()


def _field(fd: int, name: str, prop: Mapping[str, Any]) -> Any:
    """One field's value, asked up to three times (None: left empty; `_DECLINED`)."""
    kind = str(prop.get("type", "string"))
    choices = list(prop.get("enum") or [c.get("const") for c in prop.get("oneOf") or []])
    label = prop.get("title") or name
    hint = kind + (f", one of: {', '.join(map(str, choices))}" if choices else "")
    default = prop.get("default")
    if prop.get("description"):
        _write(fd, f"    {prop['description']}\n")
    for _ in range(3):
        shown = f" [{default}]" if default is not None else ""
        _write(fd, f"  {label} ({hint}){shown}: ")
        line = _readline(fd)
        if line is None:
            return _DECLINED
        text = line.strip()
        if not text:
            return default
        value = _parsed(text, kind, choices)
        if value is not None:
            return value
        _write(fd, f"    not a valid {hint}\n")
    return _DECLINED


def _parsed(text: str, kind: str, choices: list[Any]) -> Any:
    if kind == "boolean":
        return {"y": True, "yes": True, "true": True, "n": False, "no": False, "false": False}.get(
            text.lower()
        )
    try:
        if kind == "integer":
            return int(text)
        if kind == "number":
            return float(text)
    except ValueError:
        return None
    if kind == "array":
        items = [t.strip() for t in text.split(",") if t.strip()]
        return items if not choices or all(i in choices for i in items) else None
    return text if not choices or text in choices else None


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
