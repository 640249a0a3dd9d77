"""``governor run --events FILE``: the attempt as it happens, one JSON object per line.

For tools that follow an attempt while it runs (CI dashboards, loop drivers):
every event carries the schema version (``v``), the attempt id (``attempt``,
from the first event on), a sequence number (``n``, from 1), its ``type`` and
its ``time`` (seconds since the epoch, UTC, to the microsecond: the form of the
audit records' ``time``; a decision's is its record's), then its fields:

- ``attempt``: the attempt began (``agent``, ``log``);
- ``fetching``: a first npx start fetches the agent's package (``agent``,
  ``package``), before ``spawned``;
- ``spawned``, ``prompt``: the agent started, the prompt was sent;
- ``plan``: the agent's plan (``entries``);
- ``message``: the agent's words, its chunks folded into one event per message
  (sent when something else happens, or at the end);
- ``tool_call``: a tool call's state (``id``, ``title``, ``kind``, ``status``);
- ``waiting``: a request waits for a person;
- ``decision``: one per audit record of a decision, as logged (``seq``,
  ``kind``, ``verdict``, ``by``, ``rule``, ``reason``, ``subject``): the same
  records, in the same order, as the audit log's;
- ``mcp_result``: an allowed MCP request was answered (``server``,
  ``request``: its decision record's, ``error``: whether the server answered
  an error, did not answer in time, or exited);
- ``reported``, ``unasked``, ``changed``: what the agent did on its own;
- ``check``: one of the job's checks after the attempt ended (``command``,
  ``verdict``: passed or failed, ``exit``, ``duration_s``, ``tail``: the end
  of its output, masked);
- ``try``: with ``--tries``, a try begins (``try``: its number, ``of``: how
  many at most); each try's events follow it, under its own ``attempt``;
- ``outcome``: the last line, the outcome as ``--json`` prints it (its
  ``exit_code`` the one the command returns).

Text from the agent is masked like the audit log (known secret values and token
shapes). ``-`` writes to stdout, which then holds only the events.
"""

from __future__ import annotations

import time
from typing import Any, Final, TextIO

from governor.boundary import spelling
from governor.boundary.secrets import Masker
from governor.cli.outcome_json import document, write_json
from governor.ending.outcome import Outcome

SCHEMA: Final = 1
_DECISION_FIELDS: Final = ("seq", "kind", "verdict", "by", "rule", "reason", "subject")


class Events:
    """An ``on_event`` callback writing the event stream to ``out``."""

    def __init__(self, out: TextIO, masker: Masker) -> None:
        self.out = out
        self.masker = masker
        self.attempt: str | None = None
        self.n = 0
        self._message: list[str] = []

    def __call__(self, kind: str, info: dict[str, Any]) -> None:
        if kind == "message":
            self._message.append(str(info.get("text", "")))
            return
        self._flush_message()
        if kind == "attempt":
            self.attempt = info.get("id")
        records = info.get("records")
        if isinstance(records, list):  # a decision: one event per record, as logged
            for record in records:
                fields = {k: record[k] for k in _DECISION_FIELDS if k in record}
                self._write("decision", fields, record.get("time"))
            return
        self._write(kind, self.masker.json(info))

    def outcome(self, outcome: Outcome, exit_code: int) -> None:
        """The last event: the outcome, with the exit code the command returns."""
        self._flush_message()
        self.attempt = self.attempt or outcome.run_id
        self.n += 1  # its decision records streamed from the log, never all held
        event = self._event("outcome", {"outcome": document(outcome, exit_code)}, None)
        write_json(event, self.out)
        self.out.write("\n")
        self.out.flush()

    def _flush_message(self) -> None:
        if self._message:
            text, self._message = "".join(self._message), []
            self._write("message", {"text": self.masker.text(text)})

    def _event(self, kind: str, fields: dict[str, Any], at: Any) -> dict[str, Any]:
        if not isinstance(at, int | float):
            at = time.time_ns() // 1000 / 1e6  # as the audit log writes its records' time
        return {"v": SCHEMA, "attempt": self.attempt, "n": self.n, "type": kind, "time": at,
                **fields}  # fmt: skip

    def _write(self, kind: str, fields: dict[str, Any], at: Any = None) -> None:
        self.n += 1
        self.out.write(spelling.dumps(self._event(kind, fields, at)) + "\n")
        self.out.flush()
