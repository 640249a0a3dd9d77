"""What changed in the roots: the tamper audit of the diff and the changes no governed action explains.

At the end of an attempt its roots are compared with their start: the diff's
tamper audit (`governor.tamper`, the harness's findings) goes into the
`Ending`, and each change nothing governed explains is an ``unasked`` (or
``changed``) record (`governor.ending.attribution` holds the rule).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from typing import Any

import trio

from governor import tamper as tamper_rules
from governor.attempt.under_way import UnderWay
from governor.audit import effects
from governor.audit.log import AuditUnavailable
from governor.checks import held_out
from governor.checks.check_values import Checks
from governor.confine import harness
from governor.confine import sandboxes as confine
from governor.confine.workspace import Change, Snapshot, diff
from governor.ending.attribution import Evidence, change_record, explain
from governor.ending.steering_files import callouts
from governor.tamper import baseline as tamper


class RootsChanges(UnderWay):
    """The steps at the end of an attempt that read what changed in its roots."""

    async def _tamper_audit(self, kept: tamper.Baseline, before: Snapshot, after: Snapshot) -> None:
        """The tamper audit of the diff (`governor.tamper`), into the `Ending`."""
        diffed = diff(before, after)
        changed = [c.path for c in diffed]
        self.end.files_changed = tuple(changed)
        found = await trio.to_thread.run_sync(tamper.audit, kept, after.files, changed)
        self.changed_how = [(c.path, c.how) for c in diffed]
        set_changed = harness.findings(
            self.prepared.policy,
            self.changed_how,
            itertools.chain(before.files, after.files),
        )
        findings = tuple(found.findings)
        if not self.prepared.policy.checks:
            # New code at import in a source module matters to a check's verdict
            # only: with no check, a script's top-level code (the demo's
            # hello.py) is the agent's work, not a weakened test.
            roots = self.prepared.policy.roots
            findings = tuple(
                f for f in findings
                if f.rule != "import-code-added" or tamper_rules.looks_like_test(_under(f.path, roots))
            )
        self.end.findings = findings + tuple(set_changed)
        self.end.findings_more = found.more
        self.end.audit_skipped = found.skipped

    def _change_diff(self, change: Change) -> dict[str, str]:
        """The diff of a change the agent made itself, from the attempt's start
        (`tamper.change_texts`: source and test files the baseline kept),
        masked and bounded as a governed write's is; none for a later part of a
        paused attempt, whose baseline is the attempt's start, not the part's."""
        if self.baseline is None or self.continues is not None:
            return {}
        texts = tamper.change_texts(self.baseline[1], change.path, change.how)
        if texts is None:
            return {}
        return {"diff": effects.unified(change.path, *texts, self.audit.masker)}

    def _unasked_changes(self, before: Snapshot, after: Snapshot) -> None:
        """Record each change in the roots that no governed action explains
        (``unasked``), and each that only an allowed permission explains (the agent
        did it itself: ``changed``, with what explains it); `governor.ending.attribution`
        holds the rule."""
        changes = diff(before, after)
        self.turn.notices.extend(callouts(changes, self.prepared.policy.roots))
        if self.gate is None:
            return  # nothing was governed: nothing ran
        carried = self.end.carried
        covered = {p for subject in self.audit.unasked for p in subject.get("paths", [])}
        now = time.time_ns()
        evidence = Evidence(
            written=carried.written,
            current=after,
            commands=[(a, b or now) for a, b in confine.command_windows(self.terminals)],
            allowed=carried.allowances,
            ended_ns=now,
            program=self.program_ran,
        )
        masked = self.audit.masker.text
        for change in changes:
            if change.path in covered or masked(change.path) in covered:
                continue  # (the record holds the path as masked: a secret in it)
            cause = explain(change, evidence)
            if cause is not None and cause.tool_call is None and cause.rule != "program":
                continue  # a governed write or command: its own record says so
            fields = change_record(change, cause)
            fields.update(self._change_diff(change))
            try:
                self.audit.record(fields.pop("kind"), session=self.turn.session_id, **fields)
            except AuditUnavailable:
                break
        if after.left_unknown:
            self.turn.notices.append(
                "the workspace has more files than the governor walks: every file there at "
                "the start was checked, but new files past the walk's bound (50,000 outside a "
                "git repository, 1,000,000 that git tracks or would track) were not looked for"
            )
        elif after.left_unseen():
            self.turn.notices.append(
                "the workspace has more files git ignores than the governor walks (50,000): "
                "every file git tracks or would track was checked, but files were made or "
                "removed during the attempt in ignored folders it did not walk: "
                + ", ".join(after.changed_unwalked()[:5])
            )

    # -- the workspace's part of the `Ending`: written here only -----------------------

    def _frozen_seen(self, start: dict[str, Any], end: dict[str, Any] | None) -> None:
        """The frozen files' digest at the attempt's start and at its end."""
        self.end.frozen = {"start": start, "end": end}

    def _held_out_back(self, held: held_out.HeldOut) -> None:
        """The held-out files, put back for the checks: their digests and what the
        agent made at their paths."""
        self.end.held_out = held.to_json()

    def _home_changed(self, before: Snapshot, after: Snapshot) -> None:
        """What changed in the agent's own home folders, and whether the walk saw all."""
        self.end.home_changes = tuple(diff(before, after))
        self.end.home_complete = before.complete and after.complete

    def _checks_ran(self, result: Checks) -> None:
        """The job's checks, run on the roots after the attempt, and what they read
        that the attempt changed (observed: `governor.checks.observed`), a harness
        finding unless it is code under test; a check that could not be observed
        says so in a notice (the parsed closure still holds)."""
        self.end.checks = result
        policy = self.prepared.policy
        self.end.findings += tuple(
            harness.read_findings(policy, self.changed_how, result.read, self.end.findings)
        )
        if result.unobserved is not None:
            self.turn.notices.append(result.unobserved)

    def _harness_left(self, described: dict[str, Any] | None) -> None:
        """The checks' harness set as the job left it."""
        self.end.harness = described


def _under(path: str, roots: Sequence[str]) -> str:
    """``path`` relative to the root that holds it (as the tamper audit names files)."""
    for root in roots:
        if path.startswith(root.rstrip("/") + "/"):
            return path[len(root.rstrip("/")) + 1 :]
    return path
