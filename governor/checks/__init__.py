"""The job's checks after the attempt, and the verdict they come to.

- `check_runs`: the check commands run in a fresh sandbox over the workspace as
  the agent left it, and the values they make (`Verdict`, `CheckRun`);
- `test_results`: what each test came to, from the runners' own reports;
- `held_out`: tests the agent never sees, put back only for the checks;
- `observed`: the roots' copy each check runs over, whose access times show
  what it read (its harness, observed rather than parsed);
- `unittest_report`: the reporter copied into a check's ``PYTHONPATH``
  (standard library only, never imported by the governor).

The values the ending needs and the runner are still one module (`check_runs`):
they sit below `ending` together. May import: `policies`, `sandbox`, and the
rooms below it (`boundary`, `audit`, `tamper`, `confine`).
"""
