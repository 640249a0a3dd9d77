"""The job's checks after the attempt, and the verdict they come to.

- `check_values`: the values the checks come to (`CheckRun`, `Checks`, `Verdict`),
  which the ending reads: they import no runner;
- `check_runs`: the check commands run in a fresh sandbox over the workspace as
  the agent left it;
- `test_results`: what each test came to, from the runners' own reports;
- `held_out`: tests the agent never sees, put back only for the checks;
- `observed`: the roots' copy each check runs over, whose access times show
  what it read (its harness, observed rather than parsed);
- `unittest_report`: the reporter copied into a check's ``PYTHONPATH``
  (standard library only, never imported by the governor).

May import: `policies`, `sandbox`, and the
rooms below it (`boundary`, `audit`, `tamper`, `confine`).
"""
