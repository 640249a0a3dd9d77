"""The audit log: written ahead of every answer, hash-chained, read back.

- `log`: the writer (`AuditLog`): masked, sealed, appended before the answer;
- `verify`: reading lines back and checking the chain;
- `reading`: logs grouped by attempt, one row per attempt with its tally;
- `replay`: what another policy would have decided for a log's requests;
- `report`: one attempt as a self-contained HTML page.
"""
