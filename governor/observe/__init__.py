"""Watching the governor run: operational logs and OpenTelemetry (not the audit).

- `logs`: structlog events, console in a terminal, JSON otherwise;
- `otel`: a trace per attempt and metrics for its tally (the optional extra).

May import: the rooms below it (`version`, `boundary`, `ending`, `job`); the
attempt does not import it: the command line drives it.
"""
