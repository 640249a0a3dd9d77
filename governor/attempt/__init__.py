"""The attempt's lifecycle: spawn the agent, drive one turn, end as a value.

- `lifecycle`: `run_attempt` and `run`, the steps each in a nursery nothing outlives,
  sequenced by `Attempt` from `under_way` (its state, deadline, limits, shutdown),
  `agent_session` (an ACP agent's steps), `program_run` (a plain program's) and
  `roots_changes` (the tamper audit, the changes nothing governed explains);
- `session_choices` (sans-IO) and `session_setup`: the model and mode set in a new session;
- `turn`: the agent's updates folded (sans-IO);
- `budget`: the policy's budgets held against what the agent reports;
- `roots_size`: how much the writable roots hold, while the attempt runs;
- `command_agent`: a plain program as the agent;
- `start_end_records`: the fields of the records that frame an attempt in its log;
- `tries`: a job's attempt again while its checks fail.

Rules of this room: the lifecycle records what happened; `governor.ending`
judges it. May import: every room below it (`policies` and `sandbox` too), never
`observe`, the face, `batch` or `cli`.
"""
