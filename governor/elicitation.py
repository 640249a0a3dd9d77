"""``elicitation/create``: the agent asks the person for input (ACP 1.7).

Rules of this file:

- **Advertised only when a person answers** (``--approvals person``): the
  capability ``elicitation.form`` is sent at initialize then, and never
  otherwise. An agent that asks anyway is declined.
- **Unattended, the answer is decline**; a person sees the message and the
  form's fields at the terminal and fills them in, or declines.
- **URL mode is declined**: it would send the person to a page the governor
  cannot see.
- **Recorded before it is answered**: a decision record of kind
  ``elicitation`` with the message (masked, as every record is), the mode and
  the fields asked for, and the answer's action as its ``option``. The values a
  person typed are not recorded: a form may hold what should not be logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, cast

from acp import schema
from pydantic import RootModel

from policies.decide import Decision
from policies.rules import Verdict

Answer = dict[str, Any]
"""``{"action": "accept", "content": {...}}``, ``{"action": "decline"}`` or ``{"action": "cancel"}``."""


class Request(RootModel[schema.CreateElicitationRequest]):
    """The params of ``elicitation/create``, as a model the dispatcher validates."""


class FillsForms(Protocol):
    """An approver that can put a form to a person (`governor.cli.person.Person`)."""

    async def fill(self, message: str, fields: Mapping[str, Any]) -> dict[str, Any] | None: ...


def person_of(approver: object) -> FillsForms | None:
    """The approver as one that puts forms to a person, or None (nobody can)."""
    return cast(FillsForms, approver) if callable(getattr(approver, "fill", None)) else None


DECLINE: Answer = {"action": "decline"}
RULE = "elicitation"


def fields_of(request: Any) -> dict[str, Any]:
    """The form's fields as plain JSON schema (name -> property), in order."""
    requested = getattr(request, "requested_schema", None)
    properties = getattr(requested, "properties", None) or {}
    return {
        name: prop.model_dump(by_alias=True, exclude_none=True) for name, prop in properties.items()
    }


def subject_of(request: Any) -> dict[str, Any]:
    """What the record says was asked: message, mode, the fields' names."""
    subject: dict[str, Any] = {"message": request.message, "mode": request.mode}
    fields = fields_of(request)
    if fields:
        subject["fields"] = list(fields)
    if getattr(request, "tool_call_id", None):
        subject["tool_call"] = request.tool_call_id
    return subject


async def answer(request: Any, person: FillsForms | None) -> tuple[Decision, Answer]:
    """Ask `person` (None: nobody is there): the decision to record, whose
    verdict, ``by`` and reason say who answered and how, and the answer."""
    if person is None:
        why = "declined: nobody is there to answer (unattended)"
        return Decision(Verdict.DENY, RULE, why), DECLINE
    if request.mode != "form":
        why = "declined: a URL elicitation sends the person to a page"
        return Decision(Verdict.DENY, RULE, why), DECLINE
    content = await person.fill(request.message, fields_of(request))
    if content is None:
        return Decision(Verdict.DENY, RULE, "declined by the person", by="person"), DECLINE
    filled = Decision(Verdict.ALLOW, RULE, "filled in by the person", by="person")
    return filled, {"action": "accept", "content": content}
