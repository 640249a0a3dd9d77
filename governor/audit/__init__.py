"""The audit log: written ahead of every answer, hash-chained, read back.

- `log`: the writer (`AuditLog`): masked, sealed, appended before the answer;
- `verify`: reading lines back and checking the chain;
- `reading`: logs grouped by attempt, one row per attempt with its tally;
- `replay`: what another policy would have decided for a log's requests;
- `report`, `page_source`, `batch_page`: the HTML pages of an attempt and a batch;
- `anchor`, `signing`: what ties a log to something outside it;
- `tally`, `record_shape`, `read_in_passes`, `repeated_refusals`, `effects`:
  the counts, a record's shape, a log read in passes, refusals counted,
  the records of what an allowed action did.

May import: `policies` and `boundary` (masking); never the gate or the attempt,
which write through it.
"""
