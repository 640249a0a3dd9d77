"""Word and quote handling: a word's text as bash would pass it, and the text tests on gaps.

The rules, all bash's:

- Unquoted, a backslash keeps the next character as it is; in double quotes only
  before `$`, a backtick, `"`, a backslash or a newline; an escaped newline is a
  line continuation and vanishes (`_unescape`).
- `$'...'` is decoded with the escapes in `_ANSI_C`, `\\xHH` and octal; an escape
  outside them leaves the word unknown (`_ansi_c` returns None), never guessed.
- A word made only of `_PLAIN` bytes means itself anywhere: the walker takes it
  as it is, and may put it back when the grammar drops it.
- The gap between two tokens is judged as bytes: `_blank` (may separate words),
  `_line_break` (ends a command), `_skipped` (the parser left text unread).
- `_short` cuts a construct quoted in a reason: reasons are logged.

Pure functions over `str` and `bytes`; nothing here knows the tree.
"""

from __future__ import annotations

from governor.policies.errors import clipped

_NOT_FILES = frozenset({"/dev/null", "/dev/stdout", "/dev/stderr", "/dev/stdin", "/dev/tty"})

_ANSI_C = {
    "a": "\a",
    "b": "\b",
    "e": "\x1b",
    "E": "\x1b",
    "f": "\f",
    "n": "\n",
    "r": "\r",
    "t": "\t",
    "v": "\v",
    "\\": "\\",
    "'": "'",
    '"': '"',
    "?": "?",
}


def _short(text: str, limit: int = 40) -> str:
    """A construct quoted in a reason, cut short: reasons are logged, lines may hold secrets."""
    return clipped(" ".join(text.split()), limit)


def _line_break(gap: bytes) -> bool:
    """Blanks around an unescaped newline: where bash ends a command."""
    gap = gap.replace(b"\\\n", b"")
    return b"\n" in gap and not gap.translate(None, b" \t\r\n")


def _skipped(gap: bytes) -> bool:
    """Anything but blanks, newlines and line continuations between two statements."""
    return bool(gap.replace(b"\\\n", b"").translate(None, b" \t\r\n"))


def _blank(gap: bytes) -> bool:
    """Only spaces, tabs and line continuations: what may separate two words of a command."""
    return not gap.replace(b"\\\n", b"").translate(None, b" \t")


_PLAIN = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=+,@%"
"""Bytes of a word that means itself in any position: safe to put back when the grammar drops it."""


def _not_a_file(path: str) -> bool:
    return path in _NOT_FILES or (path.startswith("/dev/fd/") and path[8:].isdigit())


def _basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]


# ---------------------------------------------------------------- quote removal


def _unescape(text: str, escapable: str | None) -> str:
    """Backslash removal: any character after a backslash (unquoted, ``escapable``
    None) or only those in ``escapable`` (inside double quotes); an escaped newline
    is a line continuation and vanishes."""
    if "\\" not in text:
        return text
    out: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and (escapable is None or text[i + 1] in escapable):
            if text[i + 1] != "\n":
                out.append(text[i + 1])
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


def _unescape_unquoted(text: str) -> str:
    return _unescape(text, None)


def _bare_blank(text: str) -> bool:
    """A space, tab or newline not escaped by a backslash: a word boundary to bash."""
    if " " not in text and "\t" not in text and "\n" not in text:
        return False
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if ch in " \t\n":
            return True
        i += 1
    return False


def _unescape_double(text: str) -> str:
    return _unescape(text, '$`"\\\n')


def _ansi_c(body: str) -> str | None:
    """Decode the inside of `$'...'`; None when an escape is one this table does not know."""
    if "\\" not in body:
        return body
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ANSI_C:
            out.append(_ANSI_C[nxt])
            i += 2
        elif nxt == "x":
            j = i + 2
            while j < n and j < i + 4 and body[j] in "0123456789abcdefABCDEF":
                j += 1
            if j == i + 2:
                return None
            out.append(chr(int(body[i + 2 : j], 16)))
            i = j
        elif nxt in "01234567":
            j = i + 1
            while j < n and j < i + 4 and body[j] in "01234567":
                j += 1
            out.append(chr(int(body[i + 1 : j], 8) & 0xFF))
            i = j
        else:
            return None
    return "".join(out)


def _quoted_delimiter(start: str) -> bool:
    return any(ch in start for ch in "'\"\\")
