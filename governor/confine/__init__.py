"""The governor's use of `sandbox/` and of the host's folders, for one policy.

- `sandboxes`: a bound policy's profiles (the agent's, each command's), the
  preflight, the agent process, the governed terminals;
- `egress`: what the agent may reach, and the proxy's judge (it asks for a
  `Recorder`, which the gate satisfies, rather than naming the gate);
- `frozen`, `harness`: the paths every sandbox pins, and their digests;
- `own_install`: the governor's own install, which no sandbox may change;
- `attempt_folders`: each attempt's own folder, under the hidden state folder;
- `workspace`: the roots' snapshots, what changed and what nothing explains;
- `stray_processes`: what an unsandboxed agent left running.

May import: `policies`, `sandbox`, and the rooms below it (`boundary`, `acp`,
`audit`, `tamper`, `agents`); never the gate, the attempt or the command line.
"""
