"""MCP servers under the gate: the job's servers run sandboxed behind the
governor, and every call the agent makes there is decided and recorded
(`governor.mcp.relay`; the rules are `governor.policies.mcp`).

May import: `policies`, `sandbox`, and the rooms below it (`boundary`, `acp`,
`audit`, `agents`, `confine`, `gate`).
"""
