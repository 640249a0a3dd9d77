"""The display boundary: every string an agent supplied, on its way to a person or a CI system.

An agent controls its titles, plan entries, messages, reasons it gives, file
names it writes and the tail of its stderr. Each reaches a sink that gives
some characters a meaning of its own: a terminal runs escape sequences (colour,
cursor moves, the window title, OSC 52 writes the clipboard) and starts a new
line at CR or LF; a CI log reads a line that starts with ``::`` as a workflow
command (``::stop-commands::`` switches off every annotation after it); the
step summary is Markdown with HTML in it (a ``<details>`` folds away what
follows, ``</td>`` leaves a cell, a backtick ends a code span).

Rules of this file (everything that makes agent text safe for a sink):

1. One function per kind of sink: `terminal` for one line of a terminal or a
   log, `terminal_lines` for a block shown line by line, `markdown` for the
   step summary's text and table cells, `markdown_code` for a path or command
   shown as code. Nothing writes agent text to a sink without one of them.
2. Nothing is interpreted and nothing is dropped silently: a control
   character, an escape sequence's introducer, a line break and a bidi
   override are shown as visible escapes (``\\x1b``, ``\\n``, ``\\u202e``);
   printable Unicode (accents, CJK, emoji and their joiners) shows as written.
3. A cut says so: `clip` keeps the start of a long string and says how many
   characters were left out, so that a padded string cannot push what
   matters out of sight unnoticed.

Because no line break survives `terminal`, agent text never starts a line of
ours, and so never a workflow command; the governor's own workflow commands
escape their data as GitHub documents (`governor.cli.ci`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Final, TextIO


def _visible(code: int) -> str:
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


_INVISIBLE: Final = (
    *range(0x00, 0x20), 0x7F, *range(0x80, 0xA0),  # C0, DEL, C1 (0x9b is a one-byte CSI)
    0x2028, 0x2029,  # line and paragraph separators: a new line to some readers
    0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A),  # bidi
    0xFEFF,  # a byte-order mark shown as nothing
    *range(0xD800, 0xE000),  # lone surrogates: no UTF-8 writer can encode them
)  # fmt: skip
_TERMINAL: Final = {code: _visible(code) for code in _INVISIBLE} | {ord("\\"): "\\\\"}
"""What `terminal` shows instead of each character a terminal would act on.
A backslash is doubled, so that a literal ``\\x1b`` typed by the agent reads
differently from an escape character it sent."""

_LINES: Final = {k: v for k, v in _TERMINAL.items() if k != ord("\n")}


_STYLES: Final = {"good": "32", "bad": "1;31", "heed": "33", "quiet": "2"}
"""SGR codes of the few styles the governor's own words get on a terminal:
green, bold red, yellow, dim."""


def wants_colour(stream: TextIO, environ: Mapping[str, str] = os.environ) -> bool:
    """Colour on `stream`: only a terminal, not ``TERM=dumb``, and never with
    ``NO_COLOR`` set to anything (no-color.org); ``FORCE_COLOR`` asks for it
    on a pipe (a CI log that renders colour)."""
    if environ.get("NO_COLOR"):
        return False
    if environ.get("FORCE_COLOR"):
        return True
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty()) and environ.get("TERM") != "dumb"


def paint(text: str, style: str, colour: bool) -> str:
    """`text` (the governor's own words, or agent text already made inert by
    `terminal`) in a style of `_STYLES` when `colour` is on."""
    return f"\x1b[{_STYLES[style]}m{text}\x1b[0m" if colour else text


def terminal(text: object) -> str:
    """``text`` as one line a terminal shows as it is: no character in it acts."""
    return str(text).translate(_TERMINAL)


def acting(text: str) -> str | None:
    """The first character of ``text`` a terminal would act on (a control
    character, a line break, a bidi override: what `terminal` shows escaped),
    None when there is none: for a reader that refuses such text outright."""
    return next((c for c in text if c != "\\" and ord(c) in _TERMINAL), None)


def terminal_lines(text: str) -> list[str]:
    """``text`` split at its line feeds, each line made safe as `terminal` makes it
    (a carriage return inside a line is shown, never returns to its start)."""
    return text.translate(_LINES).split("\n")


def clip(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how many were left out."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text) - limit:,} more characters)"


_MARKDOWN_SPECIAL: Final = frozenset("\\`*_{}[]()<>!|~&")
"""What gives inline Markdown or HTML a meaning: escapes, code, emphasis,
links and images, tags and entities, table cells. Block markers (``#``, ``-``,
``>``, ``1.``) mean something only at a line's start, where `markdown` text is
never put: the caller writes its own words first."""

_BARE_URL: Final = re.compile(r"(:)(?=//)|(?<![A-Za-z0-9])([Ww])(?=[Ww][Ww]\.)")
"""What GFM links by itself, with no brackets: a scheme's ``://`` and a ``www.``
host (and it would take the entity of an escaped closing parenthesis into the
link). Their colon or first letter as an entity, nothing is linked."""


def markdown(text: object, limit: int = 300) -> str:
    """``text`` as inline Markdown that means only its characters: one line, every
    character inline Markdown or HTML gives a meaning to written as an HTML
    entity (a table cell cannot be left, a tag or link cannot be opened, a
    bare URL is not linked: GFM's autolinks stop at neither), cut
    at ``limit`` characters with the cut said. Put it after words of the
    caller's own, never at a line's start."""
    return _inert(clip(terminal(" ".join(str(text).split())), limit))


def _inert(text: str, special: frozenset[str] = _MARKDOWN_SPECIAL) -> str:
    """Each character of ``special`` as an HTML entity, and a bare URL unlinked."""
    escaped = "".join(f"&#{ord(c)};" if c in special else c for c in text)
    return _BARE_URL.sub(lambda m: f"&#{ord(m.group(0))};", escaped)


def markdown_code(text: object, limit: int = 300) -> str:
    """``text`` as an inline code span that no character in it can end or turn
    into markup: an HTML ``<code>`` element (a backtick span ends at the first
    backtick run of its own length) whose content has every character Markdown
    or HTML gives a meaning to written as an entity (inside an inline HTML
    element GFM still reads links: ``[x](https://...)`` would be one)."""
    return "<code>" + _inert(clip(terminal(text), limit), _CODE_SPECIAL) + "</code>"


_CODE_SPECIAL: Final = _MARKDOWN_SPECIAL | frozenset("\"'")
