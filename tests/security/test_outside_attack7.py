"""A seventh outside attack (the helper "breakbase", who built none of it): a
paused attempt's saved state and its resume, and ``governor agents import
AGENT.json``, attacked from the agent's side and from a hostile registry
entry's.

Each hole is a test marked ``xfail(strict=True)``: it fails today because the
attack works, and the fixer removes the mark. Its allowed neighbour, and the
attacks that held, are ordinary tests. Real attempts through the real CLI
(``python -m governor.cli``), as root and as the unprivileged govtest user,
``TMPDIR`` under the box and ``$HOME`` the box's own home; the agent is
tests/audit/scripted_agent.py. The harness is test_outside_attack.py's and
test_outside_attack3.py's.

The holes, by class:

- a grant keyed on what is shown, not on what is asked: a person's
  ``--always`` on the paused request (matched on its key, the request whole)
  becomes a grant on its shown text, a permission's *title*, which the agent
  writes; every later permission with that title is allowed "by a person's
  grant", whatever it edits;
- a limit whose count is not carried across a pause: the tokens the proxy saw
  on the wire (the governor's own count, for an agent whose key the governor
  holds) are not in the paused state, so each part has the whole
  ``[limits] tokens`` again.
"""

from __future__ import annotations

from typing import Any

import pytest
from escape_harness import USERS, Account, Box
from test_outside_attack import box_for, governor
from test_outside_attack3 import Paused, asking, paused, permission

# -- a person's "always" on one request grants every request with its title -------------------

POLICY_EDITS = '[ask]\ntools = ["edit"]\n'
"""Every edit is asked about."""

TITLE = "Edit notes.md"


def edit(path: str, call: str) -> dict[str, Any]:
    """The agent asks to edit ``path`` (in the workspace) under the one title."""
    return asking(permission(TITLE, "edit", paths=("{cwd}/" + path,), call=call))


def approved_always(accounts: dict[str, Account | str], user: str, name: str) -> tuple[Box, Paused]:
    """The pause on "Edit notes.md" naming ``notes.md``, approved ``--always``
    by the person (the approval shows that request: its title and its path)."""
    box = box_for(accounts, user, name)
    job = Paused(box, name, POLICY_EDITS)
    outcome = paused(job.run([edit("notes.md", "tc-1"), {"say": "Done."}]))
    pending = outcome["pending"]
    assert pending["subject"]["paths"] == [str(box.ws / "notes.md")], pending
    done = job.approve("--request", str(pending["request"]), "--always")
    assert done.returncode == 0, done.stderr
    assert job.records()[-1]["answer"] == "always"
    return box, job


def rulings(job: Paused, seq: int) -> list[dict[str, Any]]:
    """The ruling on each permission past record ``seq``: its request's first
    record (a second one says what the capability makes of the paths it names)."""
    first: dict[int, dict[str, Any]] = {}
    for r in job.records():
        if r["seq"] > seq and r.get("kind") == "permission":
            first.setdefault(r["request"], r)
    return list(first.values())


@pytest.mark.xfail(
    strict=True,
    reason=(
        "hole: a person's --always on one edit grants every edit with its title (class: a grant "
        "keyed on what is shown, not on what is asked: the resumed part matches the person's "
        "decision on the request's key, then `Approvals.settle` stores the grant as (kind, shown), "
        "and shown is the permission's title, the agent's own words; mechanism: a grant is keyed "
        "on `request_key` (the request whole but its tool call's id), as the paused decision is)"
    ),
)
@pytest.mark.parametrize("user", USERS)
def test_an_always_on_one_edit_lets_the_resumed_agent_make_no_other_edit_under_its_title(
    accounts: dict[str, Account | str], user: str
) -> None:
    """Class: a grant keyed on what is shown. The policy asks before every
    edit. The agent asks "Edit notes.md" naming ``notes.md``; the attempt
    pauses; the person approves it ``--always`` ("allow it, and every
    identical request"). Resumed, the agent asks that again (allowed: the
    person's), then "Edit notes.md" naming ``.github/workflows/ci.yml``: no
    person was shown that path, and it is not the identical request, yet it
    is allowed "by a person's grant". It should pause again."""
    box, job = approved_always(accounts, user, "always-other")
    after = job.records()[-1]["seq"]
    job.plays([edit("notes.md", "tc-2"), edit(".github/workflows/ci.yml", "tc-3"), {"say": "Done."}])
    resumed = job.resume()
    other = [r for r in rulings(job, after)
             if r["subject"].get("paths") == [str(box.ws / ".github/workflows/ci.yml")]]  # fmt: skip
    assert other, job.records()
    assert other[0]["verdict"] != "allow", other[0]
    assert resumed["status"] == "needs_approval", resumed


@pytest.mark.parametrize("user", USERS)
def test_an_always_on_one_edit_lets_the_resumed_agent_make_that_edit_again_and_again(
    accounts: dict[str, Account | str], user: str
) -> None:
    """The neighbour: resumed, the agent asks the very request the person
    approved ``--always``, three times (new tool call ids): each is allowed,
    the first by the person, the others by their grant, and the attempt ends
    completed with a log that verifies."""
    box, job = approved_always(accounts, user, "always-same")
    after = job.records()[-1]["seq"]
    job.plays([edit("notes.md", f"tc-{i}") for i in (2, 3, 4)] + [{"say": "Done."}])
    resumed = job.resume()
    assert resumed["status"] == "completed", resumed
    asked = rulings(job, after)
    assert [(r["subject"]["tool_call"], r["verdict"], r["by"]) for r in asked] == [
        ("tc-2", "allow", "person"), ("tc-3", "allow", "grant"), ("tc-4", "allow", "grant"),
    ], asked  # fmt: skip
    verified = governor(box, ["audit", "verify", str(job.log)])
    assert verified.returncode == 0, verified.stdout + verified.stderr
