"""Process lookups for the sandbox tests (a uniquely named module: test
directories here are not packages, so ``conftest`` is an ambiguous name)."""

from __future__ import annotations

import os


def processes_matching(marker: str) -> list[int]:
    """Host pids whose command line contains ``marker``."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                cmdline = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in cmdline and int(entry) != os.getpid():
            found.append(int(entry))
    return found
