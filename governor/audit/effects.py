"""The records of what an allowed action did: a command's exit (``exit``) and
what a governed write changed in its file (``diff``), for the report page.

A decision record says what was allowed; these say what came of it, so that
an auditor reads the command's exit code and the newest lines of its output,
and the lines a write added and removed, without the agent's word for either.

Rules of this file: it is pure (values in, a record's fields out); every text
is masked with the attempt's `governor.boundary.secrets.Masker` *before* it is cut to
its bound (a secret straddling the cut would otherwise leave a prefix the
masker no longer recognises; the log masks each record again as it writes
it); each record is bounded by lines and characters, whatever the command
printed or the file held, so a record costs a few kilobytes at most. They are
written after the action, off the decision path: the decision's own record,
written before the agent got its answer, is unchanged.
"""

from __future__ import annotations

import difflib
import re
from typing import Any, Final

from governor.boundary.secrets import MASK, Masker

TAIL_LINES: Final = 40
"""The newest lines of a command's output an ``exit`` record keeps."""
TAIL_CHARS: Final = 4000
"""What an ``exit`` record keeps of those lines at most (the newest characters)."""
DIFF_LINES: Final = 200
"""The lines of a unified diff a ``diff`` record keeps; it says how many more."""
DIFF_CHARS: Final = 16_000
"""What a ``diff`` record keeps of the diff at most."""
DIFF_INPUT_BYTES: Final = 256 * 1024
"""A file larger than this before or after a write is not diffed (the record
says so): a diff of megabytes is no page's and costs the attempt its time."""


def exit_fields(
    subject: dict[str, Any],
    decision: int | None,
    exit_code: int | None,
    signal: str | None,
    output: str,
    masker: Masker,
) -> dict[str, Any]:
    """The ``exit`` record's fields for a command that ended: its subject (the
    terminal decision's), the seq of that decision, how it ended, and the
    newest lines of its output, masked and bounded."""
    fields: dict[str, Any] = {
        "subject": subject,
        "decision": decision,
        "exit_code": exit_code,
        "signal": signal,
        "tail": tail(output, masker),
    }
    return {k: v for k, v in fields.items() if v is not None}


def tail(output: str, masker: Masker) -> str:
    """The newest `TAIL_LINES` lines of ``output``, then the newest `TAIL_CHARS`
    characters of them, saying how many lines came before.

    Masked before it is cut: the newest `TAIL_WINDOW` characters, from a line's
    start, are masked whole, so a private key block whose first line is above
    the kept lines is still masked from its ``BEGIN``; a block that began even
    before the window (its ``END`` with no ``BEGIN``) is masked from the
    window's start to its ``END``."""
    window = output[-TAIL_WINDOW:]
    if len(window) < len(output) and "\n" in window:
        window = window[window.index("\n") + 1 :]  # from a whole line
    masked = masker.text(window)
    end = _KEY_END.search(masked)
    if end is not None and "-----BEGIN" not in masked[: end.start()]:
        masked = MASK + masked[end.end() :]
    lines = masked.splitlines()
    kept = "\n".join(lines[-TAIL_LINES:])
    if len(kept) > TAIL_CHARS:
        kept = kept[-TAIL_CHARS:]
    total = output.count("\n") + (0 if output.endswith("\n") or not output else 1)
    dropped = total - min(len(lines), TAIL_LINES)
    return (f"[{dropped:,} earlier line(s) not kept]\n" if dropped > 0 else "") + kept


TAIL_WINDOW: Final = 256 * 1024
"""What of a command's output is masked for its tail (the ring may hold more)."""
_KEY_END: Final = re.compile(r"-----END [A-Z ]*PRIVATE KEY-----")


def diff_fields(
    path: str, decision: int | None, before: str | None, after: str, masker: Masker
) -> dict[str, Any]:
    """The ``diff`` record's fields for a governed write of ``after`` at
    ``path`` (``before``: the file's text before, None when it did not exist):
    a unified diff, masked, then cut to `DIFF_LINES` lines and `DIFF_CHARS`
    characters, saying what was cut."""
    return {
        "subject": {"path": path},
        "decision": decision,
        "diff": unified(path, before, after, masker),
    }


def unified(path: str, before: str | None, after: str, masker: Masker) -> str:
    """``before`` -> ``after`` as a unified diff, masked and bounded."""
    if max(len(before or ""), len(after)) > DIFF_INPUT_BYTES:
        return f"(not diffed: over {DIFF_INPUT_BYTES:,} characters)"
    old = masker.text(before or "").splitlines()
    new = masker.text(after).splitlines()
    label = path.rsplit("/", 1)[-1]
    lines = list(
        difflib.unified_diff(
            old,
            new,
            "/dev/null" if before is None else f"a/{label}",
            f"b/{label}",
            lineterm="",
            n=2,
        )
    )
    more = len(lines) - DIFF_LINES
    text = "\n".join(lines[:DIFF_LINES])
    if len(text) > DIFF_CHARS:
        text = text[:DIFF_CHARS] + f"... (cut: {len(text):,} characters)"
    if more > 0:
        text += f"\n... ({more:,} more line(s) of diff not kept)"
    return text or "(no change)"
