"""``elicitation/create``: the agent asks the person for input (ACP 1.7).

Rules of this file:

- **Advertised only when a person answers** (``--approvals person``): the
  capability ``elicitation.form`` is sent at initialize then, and never
  otherwise. An agent that asks anyway is declined.
- **Unattended, the answer is decline**; a person sees the message and the
  form's fields at the terminal and fills them in, or declines.
- **URL mode is declined**: it would send the person to a page the governor
  cannot see.
- **A server's form never asks for a secret**: MCP forbids a server to ask
  for passwords, tokens or keys in a form; one whose field's name, title or
  description says so (`SECRET_FIELD`) is refused before the person sees it
  (a "your session expired, sign in again" form is phishing).
- **Governed like any request** (`governor.gate.gatekeeper.Gate.govern`): `decide` says
  whether the form may be shown, the person settles it (`ask`), and a gate
  that failed closed refuses it before anyone sees it.
- **A server's form is the agent's**: an MCP server's ``elicitation/create``
  (`from_server`, relayed by `governor.mcp.relay`) goes through the same gate,
  its message saying which server asks and its record naming it (``origin``
  ``mcp:NAME``).
- **Recorded before it is answered**: a decision record of kind
  ``elicitation`` with the message (masked, as every record is), the mode and
  the fields asked for, and the answer's action as its ``option``. The values a
  person typed are not recorded: a form may hold what should not be logged.

Pure but for `ask`, which awaits the person.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final, Protocol, cast

from pydantic import ConfigDict, RootModel, ValidationError

from governor.acp.models import schema
from governor.gate.approver import Settled
from governor.policies import by as who
from governor.policies.decide import Decision
from governor.policies.rules import Verdict

ElicitationReply = dict[str, Any]
"""``{"action": "accept", "content": {...}}``, ``{"action": "decline"}`` or ``{"action": "cancel"}``."""


class ElicitationRequest(RootModel[schema.CreateElicitationRequest]):
    """The params of ``elicitation/create``, as a model the dispatcher validates."""

    # Built on the first elicitation, not at every start (most runs see none).
    model_config = ConfigDict(defer_build=True)


class FillsForms(Protocol):
    """An approver that can put a form to a person (`governor.cli.person.Person`)."""

    async def fill(self, message: str, fields: Mapping[str, Any]) -> dict[str, Any] | None: ...


def person_of(approver: object) -> FillsForms | None:
    """The approver as one that puts forms to a person, or None (nobody can)."""
    return cast(FillsForms, approver) if callable(getattr(approver, "fill", None)) else None


DECLINE: ElicitationReply = {"action": "decline"}
RULE = "elicitation"


_SERVER_FIELDS = ("requestedSchema", "url", "elicitationId")
_SERVER_MODES: Mapping[Any, type[Any]] = {
    "form": schema.CreateFormRequestElicitationRequest,
    "url": schema.CreateUrlRequestElicitationRequest,
}


SECRET_FIELD: Final = re.compile(
    r"passw|passphrase|passcode|secret|token|api[\s_-]*key|private[\s_-]*key|credential|"
    r"\botp\b|2fa|mfa|one[\s_-]*time|\bpin\b|\bssh\b|\bcvv|card[\s_-]*number|\bseed\b|mnemonic",
    re.IGNORECASE,
)
"""What in a server's form field (its name, title or description) asks for a secret."""


def secret_asked(params: Mapping[str, Any]) -> str | None:
    """The first field of a server's form that asks for a secret, or None."""
    requested = params.get("requestedSchema")
    properties = requested.get("properties") if isinstance(requested, dict) else None
    for name, prop in (properties.items() if isinstance(properties, dict) else ()):
        said = [str(name)]
        if isinstance(prop, dict):
            said += [str(prop.get(k, "")) for k in ("title", "description")]
        if any(SECRET_FIELD.search(text) for text in said):
            return str(name)
    return None


def from_server(server: str, ident: Any, params: Any) -> ElicitationRequest | str:
    """An MCP server's ``elicitation/create`` params as the request the gate
    decides (its message prefixed with the server's name, so that the person
    knows who asks), or what is wrong with them."""
    if not isinstance(params, dict) or not isinstance(params.get("message"), str):
        return "invalid params for elicitation/create: a message is required"
    if (field := secret_asked(params)) is not None:
        return (
            f"its form asks for a secret (field {field[:64]!r}): MCP forbids a server to ask "
            "the person for passwords, tokens or keys"
        )
    body = {  # MCP's fields only: a server names no ACP session or tool call
        **{k: v for k, v in params.items() if k in _SERVER_FIELDS},
        "requestId": ident,
        "mode": params.get("mode", "form"),
        "message": f"the MCP server {server} asks: {params['message']}",
    }
    model = _SERVER_MODES.get(body["mode"], schema.CreateOtherElicitationRequest)
    try:
        return ElicitationRequest(root=model.model_validate(body))
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "params"
        return f"invalid params for elicitation/create: {where}: {first['msg']}"


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


def decide(request: Any, person: FillsForms | None) -> Decision:
    """Whether the form may be put to `person` (None: nobody can answer): a
    refusal when nobody is there or the request sends them to a URL, else an
    ``ask`` that the person settles (`ask`)."""
    if person is None:
        return Decision(
            Verdict.DENY, RULE, "declined: nobody is there to answer (unattended)", who.UNATTENDED
        )
    if request.mode != "form":
        return Decision(Verdict.DENY, RULE, "declined: a URL elicitation sends the person to a page")
    return Decision(Verdict.ASK, RULE, "a form for the person to fill in")


async def ask(request: Any, person: FillsForms) -> tuple[Settled, ElicitationReply]:
    """Put the form to `person`: the settled verdict (``by`` the person) and the
    answer to send once it is recorded."""
    content = await person.fill(request.message, fields_of(request))
    if content is None:
        return (Verdict.DENY, who.PERSON, "declined by the person"), DECLINE
    return (Verdict.ALLOW, who.PERSON, "filled in by the person"), {
        "action": "accept",
        "content": content,
    }
