"""The job: what was asked, and every check before the attempt starts.

- `spec`: `AttemptSpec` and `prepare` (ceiling, environment names, workspace,
  agent installed): refuse before start;
- `policy_files`: a ``--policy`` value made a `Policy`, in one place;
- `ceiling_source`: which operator ceiling is in force, and where it came from.

May import: `policies`, `sandbox`, and the rooms below it (`boundary`, `audit`,
`agents`, `confine`, `checks`, `gate`, `mcp`).
"""
