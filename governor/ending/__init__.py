"""How an attempt ended, as values, and the one pure function that judges it.

- `how_it_ended`: the `Ending` (the facts, in the words of whoever saw them)
  and `judge`, which makes the `Outcome`;
- `outcome`: the outcome's value, its statuses and verdict;
- `exit_codes`: an outcome as the command's exit code;
- `attribution`: what explains each change in the workspace;
- `steering_files`: changes to files that steer what runs next, called out;
- `home_changes`: what an agent changed in its own home folders.

Rules of this room: facts in, values out; nothing here reaches back into the
connection, the gate or the processes. May import: `policies`, and the rooms
below it (`boundary`, `audit`, `tamper`, `agents`, `confine`, `checks`).
"""
