"""A person at the terminal answers each ``ask``: allow once, allow for the rest
of this attempt, or refuse; and fills in the forms an agent sends
(``elicitation/create``), or declines them. Reads the controlling terminal, not
stdin (which may carry the prompt)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import trio

from governor.boundary import display
from governor.gate.approver import Approval, Ask

_CHOICES = {"o": "once", "a": "always", "r": "refuse", "": "refuse"}


class Person:
    """The ``person`` approver; refuses when no terminal can be opened."""

    name = "person"

    def __init__(self, tty: str = "/dev/tty") -> None:
        self.tty = tty
        self.lock = trio.Lock()

    async def __call__(self, ask: Ask) -> Approval:
        async with self.lock:  # one question at a time
            return await trio.to_thread.run_sync(self._ask, ask, abandon_on_cancel=True)

    def _ask(self, ask: Ask) -> Approval:
        try:
            fd = os.open(self.tty, os.O_RDWR | os.O_NOCTTY)
        except OSError:
            return "refuse"
        try:
            shown = render(ask)
            _write(fd, shown.first)
            pages = list(shown.more)
            for _ in range(5 + len(pages)):
                view = f"[v]iew more ({len(pages)} left), " if pages else ""
                _write(fd, f"{view}allow [o]nce, allow for the rest of this [a]ttempt, or [r]efuse? ")
                line = _readline(fd)
                if line is None:
                    return "refuse"
                key = line.strip().lower()[:1]
                if key == "v" and pages:
                    _write(fd, pages.pop(0))
                    continue
                answer = _CHOICES.get(key)
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
            _write(fd, f"\n--- the agent asks for input (its words): {display.terminal(message)}\n")
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
    label = display.terminal(prop.get("title") or name)
    hint = display.terminal(kind + (f", one of: {', '.join(map(str, choices))}" if choices else ""))
    default = prop.get("default")
    if prop.get("description"):
        _write(fd, f"    {display.terminal(prop['description'])}\n")
    for _ in range(3):
        shown = f" [{display.terminal(default)}]" if default is not None else ""
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


PAGE_LINES: Final = 40
"""Lines of a write shown at once; the rest a page at a time, before the answer."""
INPUT_CHARACTERS: Final = 800
"""Characters of the agent's raw input shown at once; the rest on a page of its own."""


@dataclass(frozen=True, slots=True)
class Shown:
    """What a person is shown of one ask: ``first``, then each of ``more`` on ``v``."""

    first: str
    more: tuple[str, ...] = ()


_ACTS: Final = {
    "permission": "asks permission for a tool call",
    "read": "asks to read a file",
    "write": "asks to write a file",
    "terminal": "asks to run a command",
}


def render(ask: Ask) -> Shown:
    """The ask as a person sees it: what would be done first and whole (the
    command, the path), then the rule and why, then what the agent says of it,
    marked as the agent's. Everything agent-supplied is terminal-safe
    (`governor.boundary.display`); a write's content and a long input are never cut
    silently: their size is said and the rest is a page away."""
    act = _ACTS.get(ask.kind, f"asks: {display.terminal(ask.kind)}")
    out = [f"\n--- the agent {act}\n"]
    label = {"write": "path", "read": "path", "terminal": "command"}.get(ask.kind)
    command = ask.detail.get("command")
    title = ask.detail.get("title")
    if label is None:  # a permission: decided on its command when it has one, else its title
        label = "command" if isinstance(command, str) else "title (the agent's)"
    out.append(f"    {label}: {display.terminal(ask.subject)}\n")
    for path in ask.detail.get("paths") or ():
        out.append(f"    path: {display.terminal(path)}\n")
    for pair in ask.detail.get("env") or ():  # a command's environment, masked: it changes what runs
        out.append(f"    env: {display.terminal(str(pair))}\n")
    if ask.detail.get("output_byte_limit") is not None:
        out.append(f"    output limit: {display.terminal(str(ask.detail['output_byte_limit']))} bytes\n")
    out.append(f"    rule: {display.terminal(ask.rule)}; why: {display.terminal(ask.reason)}\n")
    if isinstance(title, str) and title and label != "title (the agent's)":
        out.append(f"    the agent's title: {display.terminal(title)}\n")
    more: list[str] = []
    content = ask.detail.get("content")
    if isinstance(content, str):
        lines = display.terminal_lines(content.removesuffix("\n"))
        size = len(content.encode("utf-8", errors="replace"))
        out.append(f"    content to write: {size:,} bytes, {len(lines):,} lines\n")
        out += [f"    + {line}\n" for line in lines[:PAGE_LINES]]
        for start in range(PAGE_LINES, len(lines), PAGE_LINES):
            page = lines[start : start + PAGE_LINES]
            end = start + len(page)
            more.append(
                "".join(f"    + {line}\n" for line in page)
                + f"    (lines {start + 1}-{end} of {len(lines):,})\n"
            )
        if more:
            out.append(f"    ({len(lines) - PAGE_LINES:,} more lines: [v] shows them)\n")
    raw = ask.detail.get("raw_input")
    if raw:
        text = display.terminal(json.dumps(raw, ensure_ascii=False, default=str))
        out.append(f"    the agent's input ({len(text):,} characters): {text[:INPUT_CHARACTERS]}\n")
        if len(text) > INPUT_CHARACTERS:
            rest = text[INPUT_CHARACTERS:]
            out.append(f"    ({len(rest):,} more characters: [v] shows them)\n")
            more.append(f"    the agent's input, continued: {rest}\n")
    return Shown("".join(out), tuple(more))
