"""`governor audit verify`, `keygen` and `replay`: whether a log is what was
written (its chain, its head, its signature), and what another policy would
have decided."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from governor.audit.anchor import (
    Anchor,
    Authenticity,
    authenticate,
    outcome_anchors,
)
from governor.audit.read_in_passes import check_log, records
from governor.audit.reading import log_files
from governor.audit.replay import Replay, replay
from governor.audit.signing import PublicKey, keygen
from governor.audit.verify import INCOMPLETE, UNFINISHED, Verification
from governor.boundary.display import terminal
from governor.cli.audit_common import HEAD, UsageError
from governor.cli.audit_views import find_attempt, in_logs
from governor.cli.outcome_json import listing, write_json


def run_verify(
    paths: Sequence[str],
    *,
    as_json: bool = False,
    heads: Sequence[str] | None = None,
    outcomes: str | None = None,
    public_key: str | None = None,
) -> int:
    """Exit 0 when every log verifies (unfinished attempts and a cut last line are
    reported, not failures) and, given heads or a key, each attempt ends at its
    head and its end record's signature holds; 1 naming what does not."""
    key = PublicKey.load(public_key) if public_key else None
    targets: list[tuple[Path, list[Anchor] | None]] = []
    if outcomes is not None:
        if heads:
            raise UsageError("--head and --outcomes both give the heads: choose one")
        targets.extend(outcome_anchors(Path(outcomes)).items())
    files = log_files(paths) if paths else []
    if heads:
        if len(files) != 1:
            raise UsageError(
                f"--head anchors one log, and {len(files)} are named: name one file "
                "(a batch's logs: --outcomes OUT/outcomes.jsonl)"
            )
        bad = [h for h in heads if not HEAD.fullmatch(h)]
        if bad:
            raise UsageError(f"--head {bad[0]!r} is not a head: 64 lowercase hex digits")
    targets.extend((f, [Anchor(h) for h in heads] if heads else None) for f in files)
    if not targets:
        raise UsageError(f"no audit logs in {', '.join(paths)}" if paths else "name the logs to verify")
    results = [_verified(path, anchors, key) for path, anchors in targets]
    failed = sum(1 for r in results if not r.ok)
    if as_json:
        doc = {"status": "failed" if failed else "ok", "logs": [r.to_json() for r in results]}
        print(json.dumps(doc, indent=1))
        return 1 if failed else 0
    for r in results:
        for line in r.lines():
            print(line)
    return 1 if failed else 0




@dataclass(frozen=True, slots=True)
class _Verified:
    """One log's verification and what vouches for it; ``check`` None: the log is missing."""

    path: Path
    check: Verification | None
    auth: Authenticity

    @property
    def ok(self) -> bool:
        return self.check is not None and self.check.problem is None and self.auth.ok

    def to_json(self) -> dict[str, Any]:
        check = self.check
        return {
            "log": str(self.path),
            "intact": check is not None and check.problem is None,
            "problem": None
            if check is None or check.problem is None
            else asdict(check.problem),
            "authentic": self.ok and bool(self.auth.checked),
            "checked_against": list(self.auth.checked),
            "anchor_problems": list(self.auth.problems),
            "held": list(self.auth.held),
            "notes": list(self.auth.notes),
            "unsigned": list(self.auth.unsigned),
            "unfinished": list(check.unfinished) if check else [],
            "incomplete": list(check.incomplete) if check else [],
            "attempts": check.attempts if check else 0,
            "records": check.records if check else 0,
        }

    def lines(self) -> Iterator[str]:
        path, check, auth = self.path, self.check, self.auth
        if check is None:
            yield f"{path}: TAMPERED: " + "; ".join(auth.problems)
            return
        if check.problem is not None:
            yield f"{path}: TAMPERED: {check.problem.what}"
        elif auth.problems:
            yield from (f"{path}: TAMPERED: {p}" for p in auth.problems)
        elif auth.unsigned:
            yield from (f"{path}: intact but NOT SIGNED: {u}" for u in auth.unsigned)
        else:
            counts = f"{check.records} line(s), {check.attempts} attempt(s)"
            yield (
                f"{path}: intact, {auth.label()} ({counts})"
                if auth.checked
                else f"{path}: intact, not anchored ({counts}): nothing outside the file vouches "
                "for it (check it with --head, --outcomes or --public-key)"
            )
        yield from (f"{path}: {h}" for h in auth.held)
        yield from (f"{path}: {n}" for n in auth.notes)
        for n in check.incomplete:
            yield (
                f"{path}: line {n}: {INCOMPLETE}"
                if n == check.records
                else f"{path}: line {n}: incomplete (the governor stopped while writing it; a new attempt follows)"
            )
        for attempt in check.unfinished:
            yield f"{path}: attempt {attempt}: {UNFINISHED}"


def _verified(path: Path, anchors: list[Anchor] | None, key: PublicKey | None) -> _Verified:
    if anchors is not None and not path.is_file():
        named = ", ".join(a.source for a in anchors) or "the outcomes"
        return _Verified(path, None, Authenticity(problems=[f"the log is missing ({named} names it)"]))
    check = check_log(path, {a.head for a in anchors or ()}, strict=False).check
    if check.problem is not None:
        return _Verified(path, check, Authenticity())
    return _Verified(path, check, authenticate(check, anchors=anchors, key=key))


def run_keygen(key: str) -> int:
    """Write a new signing key pair (`governor.audit.signing.keygen`)."""
    public, key_id = keygen(Path(key))
    print(f"wrote {key} (the private key, mode 600) and {public}: key {key_id}")
    print(
        "sign with it: the ceiling's audit_key = \"<absolute path of the key>\", or its "
        "text in $ACP_GOVERNOR_AUDIT_PRIVATE_KEY (a CI secret); verify with "
        f"`governor audit verify --public-key {public} LOG`"
    )
    return 0


# -- replay -----------------------------------------------------------------------------


def run_replay(
    log: str,
    policy_file: str,
    *,
    ceiling: str | None = None,
    attempt: str | None = None,
    as_json: bool = False,
) -> int:
    """List what would change if the log's actions were decided under another policy."""
    from governor.job.ceiling_source import load_ceiling
    from governor.job.policy_files import read_policy
    from governor.policies.errors import ConfigError

    try:
        policy = read_policy(policy_file)
        protected = load_ceiling(ceiling).protected
    except ConfigError as e:
        raise UsageError(str(e)) from None
    files = log_files([log])
    if len(files) != 1:
        raise UsageError(f"replay reads one log file, not {log}")
    checked = check_log(files[0])
    if checked.check.problem is not None:
        print(
            f"warning: {log} does not verify ({checked.check.problem.what}); replaying what it says",
            file=sys.stderr,
        )
    wanted: set[str] | None = None
    if attempt is not None:
        try:
            wanted = {find_attempt(in_logs([checked]), attempt).attempt}
        except LookupError as e:
            print(f"governor audit: {e}", file=sys.stderr)
            return 1
    results = replay(records(checked, wanted), policy, protected=protected)
    if as_json:
        problems = [f"{log} does not verify ({checked.check.problem.what})"] if checked.check.problem else []
        write_json(
            listing("replayed", (_replay_json(r) for r in results), problems), sys.stdout, indent=1
        )
        sys.stdout.write("\n")
        return 0
    for r in results:
        _print_replay(r, policy_file)
    return 0


def _replay_json(r: Replay) -> dict[str, Any]:
    return {
        "attempt": r.attempt,
        "actions": r.actions,
        "changes": [asdict(c) | {"change": c.label} for c in r.changes],
        "changed": r.changed,
        "counts": dict(r.counts),
        "skipped": list(r.skipped),
        "more_skipped": r.more_skipped,
        "unaffected": r.unaffected,
    }


def _print_replay(r: Replay, policy_file: str) -> None:
    print(terminal(f"attempt {r.attempt}: {r.actions} action(s) re-decided under {policy_file}"))
    for c in r.changes:
        note = " (approximate: an older record without the raw input)" if c.approximate else ""
        # a record's subject and reason hold the agent's words: terminal-safe lines
        print(terminal(f"  line {c.line} #{c.seq} {c.kind}: {c.subject}"))
        print(terminal(f"      {c.label} [{c.rule}]: {c.reason}{note}"))
    if r.changed > len(r.changes):
        print(f"  ... and {r.changed - len(r.changes):,} more change(s) (counted below): "
              f"{len(r.changes):,} are listed, the first by line")  # fmt: skip
    for s in r.skipped:
        print(terminal(f"  not replayed: {s}"))
    if r.more_skipped:
        print(f"  not replayed: {r.more_skipped:,} more record(s)")
    if r.unaffected:
        print(
            f"  {r.unaffected} decision(s) no policy makes (model, mode, settings, forms) "
            "stay as they were"
        )
    if not r.changed:
        print("  nothing would change")
    else:
        print("  " + ", ".join(f"{n} {label}" for label, n in r.counts))
