"""The gate: every request the agent makes decided, recorded, then answered.

- `gatekeeper`: the `Gate` (the policy decides, an ask goes to the approver,
  the audit record is written, the ruling answers);
- `ruling`: a request's final word, and acting on it once it is made;
- `approver`: who answers an ``ask``;
- `elicitation`: the agent asking the person for input;
- `tool_calls`: the agent's tool calls, and which of them nothing governed explains;
- `file_requests`, `file_access`: ``fs/*``, governed then carried out on the host;
- `terminal_requests`: ``terminal/*``, a command decided before it starts;
- `handler_seam`: what a handler asks of the gate (a protocol).

The handlers (`file_requests`, `terminal_requests`) take `handler_seam.Governs`,
the little of the gate they use, never the `Gate` itself (the gate builds
them: ``gatekeeper -> handlers -> handler_seam``, one way); so do the MCP relay
(`governor.mcp.gate_seam`) and the connection's judge (`governor.confine.egress`).
May import: `policies`, `sandbox`, and the rooms below it (`boundary`, `acp`,
`audit`, `confine`, `ending`).
"""
