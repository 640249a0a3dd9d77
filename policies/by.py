"""The words of a record's ``by`` field: what decided, one word each, defined once.

A decision's ``by`` is set where it is made -- in `governor.policies.decide` for the
engine's words, in the gate and the approver for the rest -- never guessed
afterwards from the rule's text. The ``rule`` field says which rule, glob or
default it was; ``by`` says whose word that rule is, so that a reader knows
what to change: the policy's rules, the job's capability, the ceiling, or
nothing at all (a protected path).

`DECIDED` are the words of decision records (the kinds the tally counts as
asked), `OBSERVED` those of records of what the agent did on its own, `SETUP`
that of the session's settings. `LEGACY` are words older logs carry: every
reader still takes them (replay re-decides a record from its subject, never
from its ``by``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

CAPABILITY: Final = "capability"
PROTECTED: Final = "protected"
RULE: Final = "rule"
CEILING: Final = "ceiling"
PERSON: Final = "person"
GRANT: Final = "grant"
UNATTENDED: Final = "unattended"
CANCELLED: Final = "cancelled"
FAILED: Final = "failed"
PROTOCOL: Final = "protocol"
OPTIONS: Final = "options"
AGENT: Final = "agent"
SNAPSHOT: Final = "snapshot"
JOB: Final = "job"

DECIDED: Final[Mapping[str, str]] = {
    CAPABILITY: "no rule of the policy matched: the defaults of the job's capability decided "
    "(read-only reads and runs sandboxed commands but never writes; edit-workspace writes "
    "inside the roots; nothing below full-access reaches outside the roots), as do the "
    "defaults the engine keeps for what no rule names: a tool call naming no command or "
    "path by its kind, a command line it cannot judge safely (ask), a connection to a host "
    "no rule allows or from a command when the network is off",
    PROTECTED: "a path no rule of a job can open: protected (git internals that run code "
    "later, the policy files, hook and editor configs, the policy's `protected`), hidden "
    "(secrets: `hidden`) or frozen (`[sandbox] frozen`), or a special address (loopback, "
    "link-local, private) that no rule names exactly; the rule field names the glob",
    RULE: "a rule of the policy matched (allow, ask or deny over commands, paths, tool "
    "kinds or hosts, and the agent's own model API hosts); the rule field names it",
    CEILING: "a protected path the operator's ceiling names: no job can unprotect it",
    PERSON: "a person answered an ask (allow once, allow always, refuse; a form filled in "
    "or declined), at the terminal or through a library's approver callback",
    GRANT: "allowed without asking again: a person's earlier allow-always covers it, or "
    "the permission a person just allowed carries it out (its command, its write)",
    UNATTENDED: "an ask nobody was there to answer: refused (unattended approvals, a "
    "policy's on_ask refuse) or left pending for later (verdict approval: --approvals pause)",
    CANCELLED: "the turn was cancelled (a timeout, a pause, an interrupt) before the ask "
    "was answered",
    FAILED: "the attempt had failed closed (its audit log could not be written, the "
    "sandbox stopped working): everything from then on is refused",
    PROTOCOL: "the request cannot be carried out as asked: a relative path, a port out of "
    "range, an HTTP request the proxy cannot read, a host that does not resolve, a line of "
    "the agent that is not a JSON-RPC message the governor can read (a wire record)",
    OPTIONS: "allowed, but the agent offered no option that allows just this request "
    "(only ones that would stop it asking, which the policy does not allow): refused",
}
"""The ``by`` of a decision record (permission, read, write, terminal, network,
elicitation) and what it means."""

OBSERVED: Final[Mapping[str, str]] = {
    AGENT: "the agent reported it: a tool call it says it completed that never came "
    "through the governor, or a change it made itself under a permission it was allowed",
    SNAPSHOT: "found by comparing the workspace before and after the attempt: a change no "
    "governed write, command or allowed permission explains",
}
"""The ``by`` of a record of what the agent did on its own (``reported``,
``unasked``, ``changed``)."""

SETUP: Final[Mapping[str, str]] = {
    JOB: "the job's own settings (its model, its mode, the config options it sets), as the "
    "agent offered them",
}
"""The ``by`` of a ``config`` or ``mode`` record."""

LEGACY: Final[Mapping[str, str]] = {
    "policy": "older logs: a rule or a capability default (now `rule` or `capability`), or "
    "an ask nobody answered (now `unattended`)",
    "ceiling": "older logs: also every boundary refusal (now `capability` or `protected`)",
    "sandbox": "older logs: a change found by the workspace snapshot (now `snapshot`), or a "
    "command the sandbox could not start (now `failed`)",
}
"""Words of older logs, still read."""

WORDS: Final[Mapping[str, str]] = {**DECIDED, **OBSERVED, **SETUP}
"""Every ``by`` a record is written with now."""
