"""Whether a log that verifies is the one that was reported: its anchors and signatures.

A chain that verifies says only that the file agrees with itself: whoever can
write the whole file can rewrite every record and recompute every hash. What
ties it to something outside the file:

- **the head**, the hash of an attempt's last record and how many there were,
  reported with the attempt (its outcome, a batch's ``outcomes.jsonl`` line,
  the CI summary, the events, the OTel span): the chain must end there, not
  before it (a cut), not past it (records added), not elsewhere (rewritten or
  replaced by another log), and every attempt in the log must have one (an
  attempt spliced in from another log has none);
- **the signature** of an attempt's end record by the operator's Ed25519 key
  (`governor.audit.signing`): only the key's holder could have written that
  end record, and it covers every record before it. It does not prove the log
  is complete or the newest one: a validly signed older log, or one attempt
  dropped from a log of several, still carries good signatures. The head does.

Rules of this file: it is pure (a `Verification` and the anchors in, an
`Authenticity` out); a failure names the attempt and where its chain departs
from what was reported. An attempt with no end record (a crash) is not called
tampered: it is *unsigned* (covered by no signature), which fails a check
against a key all the same (``verify --public-key`` exits 1): a key given says
every attempt must be vouched for, and a cut log is one whose newest records
anyone who can write the file could have written.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from governor.audit.reading import job_problem
from governor.audit.signing import PublicKey
from governor.audit.verify import ChainEnd, Verification


@dataclass(frozen=True, slots=True)
class Anchor:
    """A head reported outside the log: the hash, the record count when known,
    the attempt when the report names it, and where it was read (for messages)."""

    head: str
    records: int | None = None
    attempt: str | None = None
    source: str = "--head"


@dataclass(slots=True)
class Authenticity:
    """What vouches for a log beyond its own consistency: what it was checked
    against (``head``, ``signature``), what failed, what held, and notes."""

    checked: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    unsigned: list[str] = field(default_factory=list)
    """Attempts a key was given for but no signature covers (no end record): not
    tampering as far as the file shows, but nothing vouches for them either."""

    @property
    def ok(self) -> bool:
        """Nothing failed, and with a key, every attempt is covered by a signature."""
        return not self.problems and not self.unsigned

    signatures: int = 0
    """End records whose signature held."""

    def label(self) -> str:
        """``anchored``, ``signed``, both, ``not anchored`` (nothing checked), or
        ``unsigned`` (a key given, but no attempt finished for a signature to hold)."""
        said = [
            {"head": "anchored", "signature": "signed" if self.signatures else "unsigned"}[c]
            for c in self.checked
        ]
        return " and ".join(said) if said else "not anchored"


def _short(digest: str) -> str:
    return digest[:16] + "…" if len(digest) > 16 else digest


def authenticate(
    check: Verification,
    *,
    anchors: Sequence[Anchor] | None = None,
    key: PublicKey | None = None,
) -> Authenticity:
    """Check a verified log against the heads reported for it (``anchors``; None:
    none asked for, an empty list: every attempt must have one and none does)
    and against the operator's public key."""
    out = Authenticity()
    if anchors is not None:
        out.checked.append("head")
        _heads(check, anchors, out)
    if key is not None:
        out.checked.append("signature")
        _signatures(check, key, out)
    return out


def _heads(check: Verification, anchors: Sequence[Anchor], out: Authenticity) -> None:
    ends = {e.attempt: e for e in check.ends}
    covered: set[str] = set()
    missing = [a for a in anchors if a.head not in check.found]
    for a in anchors:
        at = check.found.get(a.head)
        if at is None:
            continue
        if a.attempt is not None and at.attempt != a.attempt:
            out.problems.append(
                f"the head of attempt {a.attempt} ({a.source}) is record {at.seq} of attempt "
                f"{at.attempt} (line {at.line}): a log spliced from another"
            )
            continue
        end = ends[at.attempt]
        covered.add(at.attempt)
        if end.seq != at.seq:
            out.problems.append(
                f"attempt {at.attempt} goes on past its head ({a.source}): the head is record "
                f"{at.seq} (line {at.line}), the chain ends at record {end.seq} (line "
                f"{end.line}): records were added after the attempt was reported"
            )
        elif a.records is not None and a.records != at.seq:
            out.problems.append(
                f"attempt {at.attempt}: its head is record {at.seq} (line {at.line}), but "
                f"{a.source} reports {a.records} record(s)"
            )
        else:
            out.held.append(
                f"attempt {at.attempt}: its chain ends at its head {_short(a.head)} "
                f"(record {at.seq}, line {at.line}; {a.source})"
            )
    for a in missing:
        # The attempt whose chain left its head: the one it names, else the only
        # attempt no other head anchors.
        target = ends.get(a.attempt) if a.attempt else None
        rest = [e for e in check.ends if e.attempt not in covered]
        if target is None and a.attempt is None and len(rest) == 1:
            target = rest[0]
        if target is None:
            out.problems.append(_absent(a, check.ends))
            continue
        covered.add(target.attempt)
        out.problems.append(f"attempt {target.attempt}: {_departs(target, a)}")
    for e in check.ends:
        if e.attempt not in covered:
            out.problems.append(
                f"attempt {e.attempt} (its last record on line {e.line}) has no head among "
                "those given: spliced in from another log, or give its head"
            )


def _absent(a: Anchor, ends: Sequence[ChainEnd]) -> str:
    if a.attempt is not None:
        return (
            f"attempt {a.attempt} ({a.source}) is not in the log: dropped from it, or the log "
            "was replaced by another"
        )
    where = "; ".join(f"attempt {e.attempt} at record {e.seq} (line {e.line})" for e in ends)
    return (
        f"no record has the head {_short(a.head)} ({a.source}): the log was rewritten, cut or "
        f"replaced by another; its chains end at: {where or 'nothing (no records)'}"
    )


def _departs(end: ChainEnd, a: Anchor) -> str:
    """Where an attempt's chain departs from its head, as far as the log shows."""
    if not end.ended and (a.records is None or end.seq < a.records):
        return (
            f"its chain stops at record {end.seq} (line {end.line}) with no end record, and "
            f"its head {_short(a.head)} ({a.source}) is on no line: the log was cut after "
            f"line {end.line}" + (f" ({a.records} records were reported)" if a.records else "")
        )
    if a.records is not None and end.seq < a.records:
        return (
            f"the log holds records 1-{end.seq} of the {a.records} reported ({a.source}): "
            f"cut after line {end.line}"
        )
    if a.records is not None and end.seq > a.records:
        return (
            f"its record {a.records} is not the one reported ({a.source}): it or a record "
            f"before it was rewritten, and the chain goes on to record {end.seq} (line {end.line})"
        )
    return (
        f"its chain ends at record {end.seq} (line {end.line}) with hash {_short(end.hash)}, "
        f"not at the head {_short(a.head)} ({a.source}): that record or one before it was "
        "rewritten, or the log was replaced by another"
    )


def _signatures(check: Verification, key: PublicKey, out: Authenticity) -> None:
    for e in check.ends:
        if not e.ended:
            out.unsigned.append(
                f"attempt {e.attempt}: no end record, so no signature covers its records "
                "(a crash cuts a log so; so could anyone who can write it)"
            )
        elif e.signed is None:
            out.problems.append(f"attempt {e.attempt}: its end record (line {e.line}) is not signed")
        elif e.signed.key != key.key_id:
            out.problems.append(
                f"attempt {e.attempt}: its end record (line {e.line}) is signed by key "
                f"{e.signed.key}, not by the key given ({key.key_id}, {key.source})"
            )
        elif not key.verifies(e.signed):
            out.problems.append(
                f"attempt {e.attempt}: the signature of its end record (line {e.line}) does not "
                "verify: that record or one before it was rewritten"
            )
        else:
            out.signatures += 1
            out.held.append(
                f"attempt {e.attempt}: its end record (line {e.line}) is signed by key {key.key_id}"
            )


class OutcomesUnreadable(Exception):
    """An ``--outcomes`` file that cannot be read or holds no outcome."""


def _anchor(anchors: list[Anchor], outcome: dict[str, Any], where: str) -> None:
    """The anchor of one outcome's head, added to ``anchors`` (none: no head)."""
    head, records, attempt = outcome.get("log_head"), outcome.get("log_records"), outcome.get("run_id")
    if isinstance(head, str):
        anchors.append(
            Anchor(
                head,
                records if isinstance(records, int) else None,
                attempt if isinstance(attempt, str) and attempt else None,
                where,
            )
        )


def outcome_anchors(path: Path) -> dict[Path, list[Anchor]]:
    """The heads an outcomes file reports, by the log each is for: a batch's
    ``outcomes.jsonl`` (each job's log is ``<its folder>/<job>/audit.jsonl``,
    wherever the folder was moved), or one outcome as ``governor run --json``
    prints it (its ``log``). A line with no head (its job ended before an
    attempt) anchors its log as holding none. An outcome with ``tries`` anchors
    each try's log (a batch's ``audit.tryN.jsonl``) at that try's head."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise OutcomesUnreadable(f"{path}: cannot read the outcomes: {e}") from None
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        lines: list[tuple[int, Any]] = [(1, whole)]
    else:
        lines = []
        for n, raw in enumerate(text.splitlines(), 1):
            if not raw.strip():
                continue
            try:
                lines.append((n, json.loads(raw)))
            except ValueError:
                raise OutcomesUnreadable(f"{path}: line {n} is not JSON") from None
    found: dict[Path, list[Anchor]] = {}
    for n, line in lines:
        if not isinstance(line, dict):
            raise OutcomesUnreadable(f"{path}: line {n} is not an outcome (a JSON object)")
        job, log = line.get("job"), line.get("log")
        if isinstance(job, str):
            wrong = job_problem(path.parent, job)
            if wrong is not None:  # "../x" would verify a log outside the batch's folder
                raise OutcomesUnreadable(f"{path}: line {n}: job {job!r}: {wrong}")
        if not isinstance(job, str) and not isinstance(log, str):
            raise OutcomesUnreadable(f"{path}: line {n} names neither a job nor a log")
        tries = line.get("tries")
        # with tries (`governor.attempt.tries`), each try its own log and head; the line is the last's
        each = [t for t in tries if isinstance(t, dict)] if isinstance(tries, list) else []
        for entry in each or [line]:
            at = f", try {entry.get('try')}" if each else ""
            if isinstance(job, str):
                name = Path(str(entry.get("log") or "")).name if each else ""
                target = path.parent / job / (name if name.startswith("audit.") else "audit.jsonl")
                where = f"{path.name} line {n}, job {job}{at}"
            else:
                target = Path(str(entry.get("log") or log))
                where = f"{path.name} line {n}{at}"
            _anchor(found.setdefault(target, []), entry, where)
    if not found:
        raise OutcomesUnreadable(f"{path}: no outcome in it")
    return found
