"""What the `governor audit` commands share: the tally's columns, a head's
spelling, the usage error (exit 2), and where a batch's jobs are named.

`governor.cli.audit` (the tables and the dispatch) imports the commands it
hands over to -- `audit_checks` (verify, keygen, replay), `audit_report` (the
HTML page), `audit_views` (refusals, connections, one attempt's story) -- and
they import what they share from here, never from `audit` back: one way,
``audit -> audit_checks, audit_report, audit_views -> audit_common``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from governor.audit.reading import BATCH_OUTCOMES, LogMalformed, LogUnreadable, job_problem
from governor.audit.tally import WORDS
from governor.boundary.display import terminal

TALLY_COLUMNS: Final = tuple(WORDS)
"""The tally's words, in the order every table and total shows them."""

HEAD: Final = re.compile(r"[0-9a-f]{64}")
"""A log's head as ``--head`` and a batch's outcomes give it."""


class UsageError(Exception):
    """A command line that cannot be carried out (exit 2)."""


def job_lines(root: Path, files: Sequence[str]) -> dict[str, int]:
    """The line of a batch's outcomes file that first names each job, every job
    name checked (`job_problem`) before any of its files is opened."""
    outcomes = root / BATCH_OUTCOMES
    first: dict[str, int] = {}
    try:
        with outcomes.open("rb") as f:
            for n, raw in enumerate(f, 1):
                try:
                    line = json.loads(raw)
                except ValueError:
                    continue
                job = line.get("job") if isinstance(line, dict) else None
                if not isinstance(job, str) or job in first:
                    continue
                wrong = job_problem(root, job, files)
                if wrong is not None:
                    raise LogMalformed(outcomes, n, f"job {terminal(repr(job))}: {wrong}")
                first[job] = n
    except OSError as e:
        raise LogUnreadable(f"{outcomes}: cannot read the outcomes: {e.strerror or e}") from None
    return first
