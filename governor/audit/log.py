"""The audit log: one JSON line per decision, hash-chained, written ahead.

Rules of this file:

- **Write-ahead.** `AuditLog.record` hands the line to the OS (one ``os.write``
  on an ``O_APPEND`` descriptor) before it returns, and callers answer the agent
  only after it returns -- so a decision the agent received survives the
  governor being killed. Disk durability is a setting: ``fsync = "always"``
  (`AuditLog.durable` waits for an fsync covering the record; concurrent
  decisions share one fsync: group commit) or ``"batch"`` (an fsync at most
  every 50 ms while dirty, and at the end).
- **Hash chain.** Every record carries ``prev`` (the previous record's hash in
  its attempt; null for the attempt-start record) and ``hash`` (SHA-256 of the
  line as written up to ``,"hash":``, closed with ``}``: the compact JSON of the
  record without ``hash``, keys in the order written). `verify` hashes each
  line's own bytes, so it does not depend on how a JSON library formats a
  value, and finds the first line that was edited, deleted, inserted or
  reordered. A chain proves nothing about whoever can write the whole file:
  `head` (the last record's hash and the count) is reported with the attempt
  (its outcome, a batch's line, the CI summary, the events, the span), and
  `governor audit verify --head` checks that the chain ends there.
- **Signed when the operator gives a key.** With a `Signer`, the attempt-end
  record carries an Ed25519 signature over its own bytes before ``hash``
  (`governor.audit.signing`: why there and not every N records).
- **Masked.** Every string in a record is masked (`governor.boundary.secrets.Masker`)
  before it is hashed and written. Masking every string with the masker's
  regular expressions costs more than everything else a record does, so a
  record is first serialized and screened as a whole (`_SCREEN` and the known
  values): only a record the screen flags is masked string by string. The
  screen may flag a clean record, never pass a dirty one (a test holds it to
  every shape in `governor.boundary.secrets`).
- **A crash is not tampering.** A line cut by a crash (the last line, or one
  followed by a new attempt-start after a restart) is reported as incomplete,
  not as an edit; reopening a log whose last line was cut starts on a new line.
- **Fail closed.** A write that fails (disk full, read-only) raises
  `AuditUnavailable`; the governor then refuses every further action.
- **Bounded.** The agent decides how much it asks, so nothing it sends may
  grow the log without bound: a record over `RECORD_BYTES` has its long
  strings and containers cut (`_capped`); repeated refusals past a rate are
  counted (`governor.audit.repeated_refusals`); past the attempt's ``[limits] log``
  (``limit``) one ``limit`` record is written, everything after it is
  refused and counted, and only the counts and the end record follow.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import re
import string
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Final, Literal

import orjson
import trio

from governor.audit.repeated_refusals import Key, Pending, Thinning, key_of
from governor.audit.signing import Signer
from governor.audit.tally import ASKED_KINDS, Tallier
from governor.boundary.person_files import open_output
from governor.boundary.secrets import Masker, spellings
from governor.boundary.spelling import escaped, loads
from governor.policies.limits import size_text
from governor.policies.paths import is_under

Durability = Literal["always", "batch"]
DURABILITIES: Final = ("batch", "always")
BATCH_INTERVAL: Final = 0.05

# A necessary condition for every token shape `governor.boundary.secrets` masks, on the
# serialized record (bytes). The regex engine scans for the first characters of
# the branches at C speed and tries the branches only where one occurs, so each
# branch is keyed on a character that is rare in records (not ``-``, ``_`` or
# the hex digits of hashes and ids) and checks the shape's literal part around
# it. None of these literals contains a character JSON escapes, so a shape inside
# any string of the record shows up in its serialization.
_SCREEN: Final = re.compile(
    rb"|".join(
        [
            rb"G(?<=-----BEG)IN",  # private key blocks
            rb"k(?<=sk)-",  # sk-..., sk-ant-..., sk-proj-...
            rb"g(?=h[pousr]_|ithub_pat_|lpat-)",
            rb"x(?=ox[abposr]-)",
            rb"K(?<=AK)IA",
            rb"z(?<=AIz)a",
            rb"J(?<=eyJ)",  # JWTs
            rb"b(?=[Ee][Aa][Rr][Ee][Rr])",
            rb"B(?=[Ee][Aa][Rr][Ee][Rr])",
            # ?api_key=, &token=, and NAME=value assignments of secret-looking variables
            rb"=(?:(?<=key=)|(?<=token=)|(?<=secret=)|(?<=TOKEN=)|(?<=SECRET=)"
            rb"|(?<=PASSWORD=)|(?<=PASSWD=)|(?<=KEY=)|(?<=CREDENTIAL=)|(?<=CREDENTIALS=))",
        ]
    )
)
_ENCODED: Final = bytes(
    0x61 if chr(i) in string.ascii_letters + string.digits + "+/=_-" else 0x20 for i in range(256)
)
"""A ``bytes.translate`` table: each character of base64 (either alphabet) and
hex as ``a``, every other byte a space (`AuditLog._encoded_screen`)."""
RECORD_BYTES: Final = 64 * 1024
"""A record longer than this has its long values cut (`_capped`)."""
FIELD_CHARS: Final = 2048
"""What is kept of a string in a record that was too long."""
ITEMS: Final = 64
"""What is kept of a list or a mapping in a record that was too long."""
_PAST_LIMIT: Final = frozenset({"attempt-end", "repeated", "limit", "unasked", "changed"})
"""Records written past the log's limit: the counts and the end, and what the
governor itself found changed in the roots (bounded by its walk)."""


class AuditUnavailable(Exception):
    """The audit log cannot be written: nothing more may be allowed."""


def _not_json(value: Any) -> Any:
    raise TypeError(f"an audit record holds a {type(value).__name__}, which is not a JSON value")


# The stdlib's C encoder, built once, for what orjson refuses but JSON can hold
# (integers beyond 64 bits, nesting deeper than 255): the same form, slower.
_make_c_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_ENCODER: Final = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=_not_json)
_C_ENCODER: Final = (
    _make_c_encoder(
        None, _not_json, json.encoder.encode_basestring, None, ":", ",", False, False, True
    )
    if _make_c_encoder is not None
    else None
)
_ORJSON_OPTIONS: Final = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def _dumped(value: dict[str, Any]) -> bytes:
    """Compact JSON, keys in insertion order, UTF-8 as is.

    orjson, because it is much cheaper than the stdlib's encoder on the decision
    path (bench/audit.py). A value that is not JSON
    raises TypeError; a string with a lone surrogate (a file name's byte that is
    not UTF-8, which UTF-8 cannot hold) is written as its JSON escape
    (`governor.boundary.spelling`: the name stays its own, never U+FFFD).
    """
    try:
        return orjson.dumps(value, default=_not_json, option=_ORJSON_OPTIONS)
    except orjson.JSONEncodeError as e:
        if isinstance(e.__cause__, TypeError):
            raise TypeError(str(e.__cause__)) from None
    text = "".join(_C_ENCODER(value, 0)) if _C_ENCODER is not None else _ENCODER.encode(value)
    return escaped(text).encode()


def chain_hash(record: dict[str, Any]) -> str:
    """The hash of a record as the writer takes it: SHA-256 over the compact JSON of
    the record without ``hash``. (`verify` hashes the line itself, as written.)"""
    body = {k: v for k, v in record.items() if k != "hash"}
    return hashlib.sha256(_dumped(body)).hexdigest()


def sealed(record: dict[str, Any]) -> bytes:
    """The line a record (with its ``hash``) is written as."""
    return _line(_dumped({k: v for k, v in record.items() if k != "hash"}), record["hash"])


def _line(body: bytes, digest: str) -> bytes:
    """``{...}`` (the body's JSON) closed with its hash as the last field, and a newline."""
    return b'%s,"hash":"%s"}\n' % (body[:-1], digest.encode())


def _capped(value: Any) -> Any:
    """A JSON value with each string over `FIELD_CHARS` cut and each list or
    mapping over `ITEMS` entries cut, saying how long it was."""
    if isinstance(value, str):
        if len(value) <= FIELD_CHARS:
            return value
        return f"{value[:FIELD_CHARS]}... (cut: {len(value)} characters)"
    if isinstance(value, dict):
        items = list(value.items())
        kept = {k[:FIELD_CHARS]: _capped(v) for k, v in items[:ITEMS]}
        if len(items) > ITEMS:
            kept["..."] = f"cut: {len(items)} entries"
        return kept
    if isinstance(value, list):
        out = [_capped(v) for v in value[:ITEMS]]
        if len(value) > ITEMS:
            out.append(f"... (cut: {len(value)} items)")
        return out
    return value


class AuditLog:
    """One attempt's records: kept in memory and, with a path, appended to disk.

    Field values are JSON values with string keys; a record keeps references to
    the containers it was given (callers must not change them afterwards).
    """

    def __init__(
        self,
        path: Path | None,
        attempt: str,
        *,
        durability: Durability = "batch",
        masker: Masker | None = None,
        signer: Signer | None = None,
        limit: int | None = None,
    ) -> None:
        if durability not in DURABILITIES:
            raise ValueError(f"unknown audit durability {durability!r}: use batch or always")
        self.path = path
        self.attempt = attempt
        self.durability = durability
        self.masker = masker or Masker()
        self.signer = signer
        # The screen needs the masker's known values, in every spelling it masks
        # (base64, hex, URL-encoded: a record with a secret's base64 in it passed
        # a screen of the raw values unmasked); any other masker is asked about
        # every record (None).
        self._known: tuple[bytes, ...] | None = None
        self._encoded: tuple[bytes, ...] = ()
        self._encoded_run = b""
        if type(self.masker) is Masker:
            every = {s.encode("utf-8", "surrogatepass") for v in self.masker.values for s in spellings(v)}
            clear = {v.encode("utf-8", "surrogatepass") for v in self.masker.values}
            encoded = {s for s in every - clear if not s.translate(_ENCODED).strip(b"a")}
            self._known = tuple(every - encoded)
            self._encoded = tuple(encoded)
            self._encoded_run = b"a" * min(map(len, encoded), default=0)
        # A log without a file keeps its records as the lines written, not as
        # dicts: tens of thousands of nested dicts made every full garbage
        # collection walk them. A log with a file keeps none: `records` reads
        # them back from where this log began, so an attempt's memory does not
        # grow with its decisions.
        self._lines: list[bytes] = []
        self._begins = 0  # the file's size when this log opened it
        self._parsed: list[dict[str, Any]] = []
        self._prev: str | None = None
        self._seq = 0
        self._first = 0  # the seq this log's part of its attempt follows (`continue_chain`)
        self._fd: int | None = None
        self._written = 0  # seq of the last record handed to the OS
        self._synced = 0  # seq of the last record known fsynced
        self._sync_running = False
        self._sync_done = trio.Event()
        self._dirty = False
        self.broken: str | None = None
        self.fsyncs = 0
        self.tallier = Tallier()
        """The outcome's tally of every record written, kept as they are written."""
        self.unasked: list[dict[str, Any]] = []
        """The subjects of the ``unasked`` records written (as masked)."""
        self.limit = limit
        """Bytes this log may write for its attempt (``[limits] log``); None: no bound."""
        self.full: str | None = None
        """Why nothing more is written (the limit was reached), or None."""
        self._bytes = 0
        self.thinning = Thinning(time.monotonic)
        if path is not None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = _open_log(path)
                _end_torn_line(self._fd)
                self._begins = os.fstat(self._fd).st_size
            except OSError as e:
                raise AuditUnavailable(f"cannot open the audit log {path}: {e.strerror}") from None

    # -- writing --------------------------------------------------------------------

    def record(self, kind: str, **fields: Any) -> dict[str, Any]:
        """Append one record (masked, chained) and hand it to the OS before returning;
        fields that are None are left out."""
        return self.append(kind, {k: v for k, v in fields.items() if v is not None})

    def append(self, kind: str, fields: dict[str, Any], *, thin: bool = True) -> dict[str, Any]:
        """`record` with its fields as a dict, none of them None (the decision path).

        ``thin`` False: a refusal written in full whatever the burst (a part of
        a request decided in several: counting one part and writing another
        would count the request twice, and lose its refusal from the tally)."""
        if self.broken is not None:
            raise AuditUnavailable(self.broken)
        key = None if kind in _PAST_LIMIT or not thin else key_of(kind, fields)
        if self.full is not None and kind not in _PAST_LIMIT:
            key = (kind, key[1] if key else "agent", "audit.limit", "")
            reason = str(fields.get("reason", ""))
            self._count(key, fields, self.thinning.count(key, fields.get("request"), reason))
            raise AuditUnavailable(self.full)
        if key is not None:
            added = self.thinning.counted(key, fields.get("request"), str(fields.get("reason", "")))
            if added is not None:
                return self._count(key, fields, added)
            self.flush(key=key)  # a counted run of this key before this record
        elif kind == "attempt-end":
            self.flush(everything=True)
        seq = self._seq + 1
        now = time.time_ns() // 1000 / 1e6  # microseconds, as round(time.time(), 6), without its cost
        body: dict[str, Any] = {
            "seq": seq,
            "time": now,
            "attempt": self.attempt,
            "kind": kind,
            **fields,
            "prev": self._prev,
        }
        line, digest = self._serialized(body)
        past = self.limit is not None and self._bytes + len(line) > self.limit
        if past and kind not in _PAST_LIMIT:
            self._reached(kind, fields)
        if self._fd is not None:
            try:
                written = os.write(self._fd, line)
                if written != len(line):
                    raise OSError(28, "short write (disk full?)")
            except OSError as e:
                self.broken = f"the audit log {self.path} cannot be written: {e.strerror or e}"
                raise AuditUnavailable(self.broken) from None
            self._written = seq
            self._dirty = True
        self._seq = seq
        self._prev = digest
        self._bytes += len(line)
        if key is not None:
            self.thinning.wrote(key, seq)
        if self.path is None:
            self._lines.append(line)
        self.tallier.add(
            kind, body.get("verdict"), body.get("by"), body.get("request"), body.get("failed")
        )
        if kind == "unasked":
            self.unasked.append(body.get("subject") or {})
        return body

    def _count(self, key: Key, fields: dict[str, Any], added: int) -> dict[str, Any]:
        """A refusal counted instead of written (``added``: the requests it
        adds to the tally); what the caller gets in place of its record: masked,
        with the seq of the last record written."""
        requests = added if key[0] in ASKED_KINDS else 0
        if key[3]:
            self.tallier.add_failed(requests)
        else:
            self.tallier.add_refused(requests)
        shown = {k: fields[k] for k in ("subject", "reason") if k in fields}
        return {"seq": self._seq, "counted": True, **self.masker.json(shown)}

    def _reached(self, kind: str, fields: dict[str, Any]) -> None:
        """The limit is reached by this record: write the ``limit`` record in
        its place, count this refusal and raise (fail closed)."""
        assert self.limit is not None
        self.full = (
            f"the audit log reached its limit ([limits] log = {size_text(self.limit)}): "
            "everything after it was refused"
        )
        self.append("limit", {"reason": self.full, "bytes": self._bytes})
        self.append(kind, fields)  # counted under audit.limit, and raises

    def flush(self, *, everything: bool = False, key: Key | None = None) -> None:
        """Write the ``repeated`` record of each count that is due (see
        `governor.audit.repeated_refusals`)."""
        for (kind, origin, rule, failed), pending in self.thinning.due(everything=everything, key=key):
            self._repeated(kind, origin, rule, failed, pending)

    def _repeated(self, kind: str, origin: str, rule: str, failed: str, pending: Pending) -> None:
        like = f" like seq {pending.like}" if pending.like is not None else ""
        what = "failures" if failed else "refusals"
        fields: dict[str, Any] = {
            "of": kind,
            "origin": origin,
            "rule": rule,
            "count": pending.count,
            "requests": pending.requests,
            "reason": f"{pending.count} more {what}{like} ({kind} from {origin}, "
            f"{rule}): counted, not written one by one",
            "samples": pending.samples,
        }
        if failed:
            fields["failed"] = failed  # the tally counts them as failed, not refused
        self.append("repeated", fields)

    @property
    def seq(self) -> int:
        """The seq of the last record appended: how many records this log holds."""
        return self._seq

    @property
    def head(self) -> tuple[str, int] | None:
        """The hash of the last record written and how many were: what anchors the
        chain outside the file (None before the first record)."""
        return None if self._prev is None else (self._prev, self._seq)

    def continue_chain(self, prev: str, seq: int, earlier: Iterable[Mapping[str, Any]] = ()) -> None:
        """Go on with an attempt's chain from its record ``seq`` (hash ``prev``), before
        the first record: a paused attempt resumed (`governor.attempt.paused`)
        writes its second part into the same chain, so that `verify` checks it
        across the pause. The ``earlier`` records of the attempt are tallied, so
        the outcome's tally covers both parts, and counted against ``limit``
        (``[limits] log`` spans every part: what is left, not a fresh allowance),
        each as long as its line, written again as it was."""
        assert self._seq == 0, "a chain is continued before its first record"
        self._prev, self._seq, self._first = prev, seq, seq
        self._written = self._synced = seq
        for r in earlier:
            self.tallier.add(
                r.get("kind"), r.get("verdict"), r.get("by"), r.get("request"), r.get("failed")
            )
            self._bytes += len(_dumped(dict(r))) + 1

    @property
    def records(self) -> list[dict[str, Any]]:
        """Every record of this log so far, in order: read back from its file (the
        lines of this attempt after where it began), else parsed from the lines
        kept; cached until the next record."""
        if self.path is not None:
            if len(self._parsed) != self._seq - self._first:
                self._parsed = self._read_back()
            return self._parsed
        if len(self._parsed) < len(self._lines):
            # Parsed records are plain JSON values, without cycles: collecting while
            # tens of thousands of them are made would only walk them, several
            # times over, at a cost well beyond the parse itself.
            was_enabled = gc.isenabled()
            gc.disable()
            try:
                self._parsed.extend(map(loads, self._lines[len(self._parsed) :]))
            finally:
                if was_enabled:
                    gc.enable()
        return self._parsed

    def _read_back(self) -> list[dict[str, Any]]:
        assert self.path is not None
        was_enabled = gc.isenabled()
        gc.disable()  # plain JSON values, no cycles: see `records`
        out: list[dict[str, Any]] = []
        try:
            with self.path.open("rb") as f:
                f.seek(self._begins)
                for line in f:
                    try:
                        record = loads(line)
                    except orjson.JSONDecodeError:
                        continue  # another writer's torn line: not ours
                    if isinstance(record, dict) and record.get("attempt") == self.attempt:
                        out.append(record)
        except OSError as e:
            raise AuditUnavailable(f"cannot read the audit log {self.path} back: {e}") from None
        finally:
            if was_enabled:
                gc.enable()
        return out

    def _serialized(self, body: dict[str, Any]) -> tuple[bytes, str]:
        """The masked body's line (``hash`` appended last) and its hash; masks in place."""
        data = _dumped(body)
        if len(data) > RECORD_BYTES:
            data = self._replace(body, _capped(body))
        known = self._known
        if (
            known is None
            or b"\\" in data  # an escaped character: the screen cannot see through it
            or _SCREEN.search(data) is not None
            # `in` per value: a regex of them all scans far slower
            or (known and any(value in data for value in known))
            or (self._encoded and self._encoded_screen(data))
        ):
            data = self._replace(body, self.masker.json(body))
        if self.signer is not None and body["kind"] == "attempt-end":
            # After masking: what is signed is what is written, and the
            # signature (hex) is no string a masker could change.
            data = self.signer.sealed(data)
            body["signature"] = loads(data)["signature"]
        digest = hashlib.sha256(data).hexdigest()
        body["hash"] = digest
        return _line(data, digest), digest

    def _encoded_screen(self, data: bytes) -> bool:
        """True when ``data`` may hold a base64 or hex spelling of a known
        secret. A fast path, kept here: a record holds one only where it has a
        run of those characters as long as the shortest, and one translate and
        one search find such a run in a few microseconds, where an ``in`` for
        each of a secret's ten spellings took 4 us a secret (bench/audit.py
        --secrets)."""
        end = len(data)
        if self._prev is not None and data.endswith(tail := b',"prev":"' + self._prev.encode() + b'"}'):
            end -= len(tail)  # the chain's hash, in every record: 64 hex digits, never a secret
        if data.translate(_ENCODED).find(self._encoded_run, 0, end) < 0:
            return False
        return any(value in data for value in self._encoded)

    @staticmethod
    def _replace(body: dict[str, Any], new: dict[str, Any]) -> bytes:
        body.clear()
        body.update(new)
        return _dumped(body)

    async def durable(self, record: dict[str, Any]) -> None:
        """Wait until ``record`` is on disk when durability is ``always`` (group commit)."""
        if self._fd is None or self.durability != "always":
            return
        seq = record["seq"]
        while self._synced < seq:
            if self.broken is not None:
                raise AuditUnavailable(self.broken)
            if not self._sync_running:
                await self._sync_once()
            else:
                await self._sync_done.wait()

    async def _sync_once(self) -> None:
        """One fsync covering every record written before it starts.

        The leader yields once first, so that decisions already on their way
        append their records and share this fsync; the records covered are
        counted in the worker thread just before the fsync, not when it was asked.
        """
        self._sync_running = True
        done = self._sync_done
        try:
            await trio.lowlevel.checkpoint()
            fd = self._fd
            if fd is not None:
                target = await trio.to_thread.run_sync(self._fsync, fd)
                self._synced = max(self._synced, target)
            self._dirty = self._written > self._synced
        except OSError as e:
            self.broken = f"the audit log {self.path} cannot be synced: {e.strerror}"
            raise AuditUnavailable(self.broken) from None
        finally:
            self._sync_running = False
            self._sync_done = trio.Event()
            done.set()

    def _fsync(self, fd: int) -> int:
        target = self._written
        _sync_data(fd)
        self.fsyncs += 1
        return target

    async def run_batch_sync(self) -> None:
        """In batch mode: fsync at most every 50 ms while there is something new."""
        if self._fd is None or self.durability != "batch":
            return
        while True:
            await trio.sleep(BATCH_INTERVAL)
            if self.thinning.pending and self.broken is None:
                with contextlib.suppress(AuditUnavailable):
                    self.flush()
            if self._dirty and not self._sync_running:
                await self._sync_once()

    def close(self) -> None:
        """Fsync what is left and close (at attempt end)."""
        if self.thinning.pending and self.broken is None:
            with contextlib.suppress(AuditUnavailable):
                self.flush(everything=True)
        if self._fd is not None:
            with contextlib.suppress(OSError):
                _sync_data(self._fd)
            os.close(self._fd)
            self._fd = None


# fdatasync flushes the data and the size an append changed, not the times.
_sync_data: Final = getattr(os, "fdatasync", os.fsync)


def _open_log(path: Path) -> int:
    """Open for appending; a log this creates has its directory entry synced too,
    or a power cut could lose the whole file with every record fsynced in it.
    A link or what is not a regular file in its place is refused, naming it
    (`governor.boundary.person_files`): ``--log`` may name a file in a folder an
    attempt wrote."""
    fd, made = open_output(path, append=True, readable=True, mode=0o600)  # never through a link
    if not made:
        return fd
    directory = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    return fd


def _end_torn_line(fd: int) -> None:
    """A log whose last line a crash cut short gets a newline, so the next record
    starts a line of its own (`verify` then reports the cut line as incomplete)."""
    size = os.fstat(fd).st_size
    if size and os.pread(fd, 1, size - 1) != b"\n":
        os.write(fd, b"\n")


# Keys whose values are file contents: only their presence matters to a decision
# (an "other" tool call that carries content is judged a write).
_CONTENT_KEYS: Final = frozenset(
    {"content", "new_string", "old_string", "new_str", "old_str", "edits", "patch", "diff"}
)
INPUT_VALUE_LIMIT: Final = 16_384


def recorded_input(raw: Mapping[str, Any]) -> dict[str, Any]:
    """What of a tool call's raw input the log keeps, so that `governor audit replay`
    can rebuild the decision: every key, contents replaced by their size, the
    paths of a ``changes`` map without their diffs, any other value kept unless it
    is longer than `INPUT_VALUE_LIMIT` characters (then replaced by its size)."""
    kept: dict[str, Any] = {}
    for key, value in raw.items():
        if key in _CONTENT_KEYS:
            kept[key] = f"<{_size(value)}>"
        elif key == "changes" and isinstance(value, Mapping):
            kept[key] = {str(k): None for k in value}
        elif isinstance(value, bool | int | float) or value is None:
            kept[key] = value
        else:
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            kept[key] = value if len(text) <= INPUT_VALUE_LIMIT else f"<{_size(value)}>"
    return kept


def _size(value: Any) -> str:
    if isinstance(value, str):
        return f"{len(value)} characters"
    if isinstance(value, list):
        return f"{len(value)} items"
    return type(value).__name__


def inside(path: Path | str, roots: Iterable[str]) -> str | None:
    """The root that holds ``path`` (symlinks resolved), if any: an audit log there
    could be rewritten by the agent it records."""
    real = os.path.realpath(path)
    return next((root for root in roots if is_under(real, os.path.realpath(root))), None)
