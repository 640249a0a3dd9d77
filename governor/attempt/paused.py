"""What a paused attempt keeps for going on: its job, its agent's session, the
request that waits, and where its log's chain ended (issue 38).

An attempt that ends ``needs_approval`` writes one JSON file,
``paused/<attempt id>.json`` in the governor's state folder
(`governor.sandbox.host.concealed.state_dir`): hidden from every sandbox with
that folder, as the attempts' own folders are, so no agent reads another's job
or forges a continuation; made ``0600`` in a ``0700`` folder, since it holds the
prompt and the raw agent arguments. `governor approve` and `governor resume`
find it from the log: its last attempt's id names the file.

Why the job as it was *given* (the policy's and the ceiling's files, the
argv, the limits) and not the prepared policy: a resumed attempt is prepared
again, through the same checks, and refused when the policy or the ceiling in
force no longer has the digest the attempt started with (an approval answers
one request; it never changes the job). What is left of the wall time is the
resumed part's allowance, not a fresh one.
"""

from __future__ import annotations

import base64
import contextlib
import errno
import fcntl
import json
import os
import pwd
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from governor.job.policy_files import shipped_name
from governor.sandbox.host.concealed import state_dir

if TYPE_CHECKING:
    from governor.confine.workspace import Snapshot
    from governor.job.spec import Prepared
    from governor.tamper.baseline import Baseline

PAUSED_DIR_NAME: Final = "paused"
FORMAT: Final = 1


class NotPaused(Exception):
    """Nothing to approve or resume; the message says why and what to do."""


def paused_dir() -> Path:
    """``paused/`` in the governor's state folder (hidden from every sandbox)."""
    return state_dir() / PAUSED_DIR_NAME


def state_path(attempt: str) -> Path:
    """The state file of the paused attempt ``attempt`` (an id the governor made:
    no ``/``; refused otherwise, so a crafted log names no other file)."""
    if not attempt or "/" in attempt or attempt in (".", "..") or "\x00" in attempt:
        raise NotPaused(f"{attempt!r} is not an attempt id the governor makes")
    return paused_dir() / f"{attempt}.json"


@dataclass
class PausedState:
    """One paused attempt's state file, as JSON."""

    attempt: str
    log: str
    """The audit log (absolute) whose chain the resumed part continues."""
    head: str
    """The hash of the attempt's last record when it paused (its attempt-end)."""
    records: int
    """That record's seq."""
    requests: int
    """The requests the gate had numbered: the resumed part numbers after them."""
    job: dict[str, Any]
    """The job as given: `governor.job.spec.AttemptSpec`'s plain fields."""
    policy_digest: str
    ceiling_digest: str
    pending: dict[str, Any]
    """The request that waits, as the gate saw it: kind, request, subject, reason,
    and ``seq`` of its record and ``shown`` (what a grant is keyed on)."""
    session: dict[str, Any] = field(default_factory=dict)
    """The agent's session id and what it advertised: ``load`` (loadSession) and
    ``resume`` (sessionCapabilities.resume)."""
    elapsed_s: float = 0.0
    """Seconds the attempt has run, over all its parts."""
    parts: int = 1
    tool_calls: int = 0
    """Tool calls counted over all its parts: ``[limits] tool_calls`` spans them."""
    tool_call_ids: list[str] = field(default_factory=list)
    """Their ids (the newest `governor.attempt.budget.MAX_IDS`), but the paused
    call's: a call is counted once, by the part that decides it."""
    tokens: int | None = None
    cost_usd: float | None = None
    """Tokens and USD cost the agent reported over all its parts (each part's
    added): ``[limits] tokens`` and ``cost_usd`` span them too."""
    wire_tokens: int = 0
    """Tokens of the model calls the governor's proxy saw over all its parts:
    the governor's own count, held against ``[limits] tokens`` beside the
    agent's reports, so an agent that reports little has no fresh allowance
    after a pause (`governor.attempt.budget.Budget.carry`)."""

    def save(self) -> Path:
        """Write the file (0600 in a 0700 folder), replacing one of an earlier pause."""
        folder = paused_dir()
        folder.parent.parent.mkdir(parents=True, exist_ok=True)  # $XDG_STATE_HOME itself may not exist yet
        for path in (folder.parent, folder):
            with contextlib.suppress(FileExistsError):
                os.mkdir(path, 0o700)
        path = state_path(self.attempt)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"format": FORMAT, **self.__dict__}, f, indent=1)
        os.replace(tmp, path)
        return path

    @classmethod
    def load(cls, attempt: str) -> PausedState:
        """The state of ``attempt``, or `NotPaused` saying why there is none. Read
        only when it is this user's own (`read_own`): it names the job to run."""
        path = state_path(attempt)
        try:
            raw = json.loads(read_own(path).decode("utf-8"))
        except FileNotFoundError:
            raise NotPaused(
                f"attempt {attempt} has no paused state ({path}): it did not end "
                "needs_approval, or it was resumed already"
            ) from None
        except OSError as e:
            raise NotPaused(f"the paused state {path} cannot be read: {e.strerror or e}") from None
        except ValueError as e:
            raise NotPaused(f"the paused state {path} cannot be read: {e}") from None
        if not isinstance(raw, dict) or raw.pop("format", None) != FORMAT:
            raise NotPaused(f"the paused state {path} is not one this governor writes")
        try:
            return cls(**raw)
        except TypeError as e:
            raise NotPaused(f"the paused state {path} is not one this governor writes: {e}") from None

    def discard(self) -> None:
        """The attempt went on: its state is spent (a second resume is refused)."""
        for path in (state_path(self.attempt), baseline_path(self.attempt)):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()

    def save_baseline(self, baseline: tuple[Snapshot, Baseline]) -> None:
        """What the attempt's start looked like (its roots' snapshot and the tamper
        audit's kept files), beside the state: every part is judged against the
        attempt's start, so what an earlier part did stays in the final verdict.
        Kept as data (JSON, `baseline_json`), never as a pickle: whoever could
        write the file (a process of the user who paused, their agent at
        full-access) could otherwise run code in whoever resumes."""
        path = baseline_path(self.attempt)
        tmp = path.with_name(path.name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(baseline_json(*baseline), f)
        os.replace(tmp, path)

    def load_baseline(self) -> tuple[Snapshot, Baseline] | None:
        """The attempt's start, as `save_baseline` kept it (None when none was);
        `NotPaused` when it is not this user's own (`read_own`) or not one this
        governor writes."""
        path = baseline_path(self.attempt)
        try:
            return baseline_from(json.loads(read_own(path).decode("utf-8")))
        except FileNotFoundError:
            return None
        except OSError as e:
            raise NotPaused(f"the paused attempt's baseline {path} cannot be read: {e.strerror or e}") from None
        except (ValueError, TypeError, KeyError) as e:
            raise NotPaused(f"the paused attempt's baseline {path} is not one this governor writes: {e!r:.200}") from None


def read_own(path: Path) -> bytes:
    """The bytes of ``path``, opened without following a link and read only when
    it is a regular file owned by this process's user and writable by no one
    else: a paused attempt's files decide what the host runs, and whoever
    resumes it (root going on with a user's attempt, a shared state folder)
    must never act on what another user left. `OSError` (its message naming
    the owner and mode) otherwise; `FileNotFoundError` when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise OSError(e.errno, f"{path} is a symbolic link, not the governor's file") from None
        raise
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise OSError(errno.EINVAL, f"{path} is not a regular file")
        if st.st_uid != os.geteuid() or st.st_mode & 0o022:
            raise OSError(
                errno.EPERM,
                f"{path} is not yours alone (owner uid {st.st_uid}, mode "
                f"{st.st_mode & 0o777:o}; you are uid {os.geteuid()}): only the user who "
                "paused an attempt approves or resumes it, from their own state folder",
            )
        return f.read()


def _b64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _bytes(text: object) -> bytes:
    if not isinstance(text, str):
        raise TypeError(f"expected base64 text, got {type(text).__name__}")
    return base64.b64decode(text, validate=True)


def baseline_json(snap: Snapshot, kept: Baseline) -> dict[str, Any]:
    """An attempt's start as plain data (bytes as base64): what `baseline_from`
    reads back, field by field, into the same objects."""
    return {
        "format": FORMAT,
        "snapshot": {
            "files": {p: [*s[:5], _b64(s.digest)] for p, s in snap.files.items()},
            "complete": snap.complete,
            "rechecked": snap.rechecked,
            "ignored": {
                r: None if i is None else {"folders": sorted(i.folders), "files": sorted(i.files)}
                for r, i in snap.ignored.items()
            },
            "started_ns": snap.started_ns,
            "left_unknown": snap.left_unknown,
            "left_ignored": snap.left_ignored,
            "closed": snap.closed,
        },
        "kept": {
            "roots": list(kept.roots),
            "texts": kept.texts,
            "marks": {
                p: [[m.rule, m.label, m.scope, m.line, list(m.near)] for m in ms]
                for p, ms in kept.marks.items()
            },
            "sources": {p: _b64(b) for p, b in kept.sources.items()},
            "source_bytes": kept.source_bytes,
            "kept_bytes": kept.kept_bytes,
            "skipped": kept.skipped,
            "encodings": kept.encodings,
            "present": sorted(kept.present),
            "starts": {p: _b64(b) for p, b in kept.starts.items()},
            "start_bytes": kept.start_bytes,
        },
    }


def _typed(value: Any, kind: type | tuple[type, ...]) -> Any:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise TypeError(f"{value!r:.60} is not {kind}")
    return value


def baseline_from(raw: Any) -> tuple[Snapshot, Baseline]:
    """`baseline_json`'s data read back, every field checked for its type (a
    `TypeError`, `KeyError` or `ValueError` otherwise): data, never code."""
    from governor.confine.workspace import Ignored, Seen, Snapshot
    from governor.tamper.baseline import Baseline
    from governor.tamper.facts import Mark

    if _typed(raw, dict).get("format") != FORMAT:
        raise ValueError("not a baseline this governor writes")
    s, k = _typed(raw["snapshot"], dict), _typed(raw["kept"], dict)

    def seen(v: Any) -> Seen:
        size, mtime, ctime, ino, mode, digest = _typed(v, list)
        size, mtime, ctime, ino, mode = (_typed(x, int) for x in (size, mtime, ctime, ino, mode))
        return Seen(size, mtime, ctime, ino, mode, None if digest is None else _bytes(digest))

    def strs(v: Any) -> list[str]:
        return [_typed(x, str) for x in _typed(v, list)]

    def mark(v: Any) -> Mark:
        rule, label, scope, line, near = _typed(v, list)
        above, below = strs(near)
        return Mark(_typed(rule, str), _typed(label, str), _typed(scope, str), _typed(line, int),
                    (above, below))  # fmt: skip

    snap = Snapshot(
        files={_typed(p, str): seen(v) for p, v in _typed(s["files"], dict).items()},
        complete=_typed(s["complete"], bool),
        rechecked=_typed(s["rechecked"], bool),
        ignored={
            _typed(r, str): None
            if i is None
            else Ignored(frozenset(strs(i["folders"])), frozenset(strs(i["files"])))
            for r, i in _typed(s["ignored"], dict).items()
        },
        started_ns=_typed(s["started_ns"], int),
        left_unknown=_typed(s["left_unknown"], bool),
        left_ignored={_typed(p, str): _typed(c, int) for p, c in _typed(s["left_ignored"], dict).items()},
        closed=strs(s["closed"]),
    )
    kept = Baseline(
        roots=tuple(strs(k["roots"])),
        texts={_typed(p, str): _typed(t, str) for p, t in _typed(k["texts"], dict).items()},
        marks={
            _typed(p, str): [mark(m) for m in _typed(ms, list)]
            for p, ms in _typed(k["marks"], dict).items()
        },
        sources={_typed(p, str): _bytes(b) for p, b in _typed(k["sources"], dict).items()},
        source_bytes=_typed(k["source_bytes"], int),
        kept_bytes=_typed(k["kept_bytes"], int),
        skipped=_typed(k["skipped"], int),
        encodings={_typed(p, str): _typed(e, str) for p, e in _typed(k["encodings"], dict).items()},
        present=frozenset(strs(k["present"])),
        starts={_typed(p, str): _bytes(b) for p, b in _typed(k["starts"], dict).items()},
        start_bytes=_typed(k["start_bytes"], int),
    )
    return snap, kept


def baseline_path(attempt: str) -> Path:
    """The start baseline beside ``attempt``'s state file."""
    return state_path(attempt).with_suffix(".baseline")


JOB_FIELDS: Final = (
    "prompt", "agent", "argv", "workspace", "extra_dirs", "policy", "capability", "ceiling",
    "timeout", "sandbox_agent", "env", "model", "mode", "agent_args", "append_rules",
    "governor_tools", "durability", "allow_hosts", "kind", "checks", "held_out", "concealed",
)  # fmt: skip
"""The fields of `governor.job.spec.AttemptSpec` a resumed attempt is given again."""


def job_of(spec: Any) -> dict[str, Any] | None:
    """The job as given, as JSON; None when it cannot be written down (a library
    caller's `Policy` or `Ceiling` object, or MCP servers of its own): such an
    attempt is resumed by its caller, not from the command line."""
    if spec.mcp_servers or not all(
        v is None or isinstance(v, str | os.PathLike) for v in (spec.policy, spec.ceiling)
    ):
        return None
    job: dict[str, Any] = {}
    for name in JOB_FIELDS:
        value = getattr(spec, name)
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        elif isinstance(value, list | tuple):
            value = [os.fspath(v) if isinstance(v, os.PathLike) else v for v in value]
        elif name == "capability" and value is not None:
            value = str(value)
        job[name] = value
    for name in ("workspace", "policy", "ceiling"):
        value = job[name]
        if isinstance(value, str) and not (name == "policy" and shipped_name(value) is not None):
            job[name] = os.path.abspath(os.path.expanduser(value))
    job["extra_dirs"] = [os.path.abspath(d) for d in job["extra_dirs"]]
    return job


@dataclass
class Continuation:
    """What a resumed attempt goes on from: its paused state, where its chain
    ends now (the person's decision appended after the pause) and the records
    of its earlier part(s), tallied with its own."""

    state: PausedState
    prev: str
    seq: int
    earlier: list[dict[str, Any]]
    approval: dict[str, Any]
    """The person's decision: the ``approval`` record it was written as."""
    baseline: tuple[Snapshot, Baseline] | None = None
    """The attempt's start (`PausedState.load_baseline`), read before anything
    starts: a part is judged against it, not against its own start."""


def _chain(
    log: Path, attempt: str | None = None
) -> tuple[PausedState, list[dict[str, Any]], list[dict[str, Any]]]:
    """The paused attempt of ``log`` (its last attempt), the records of its chain
    up to the pause, and those after it; `NotPaused` when the log does not verify
    or its last attempt is not paused where its state says."""
    from governor.audit.verify import read_lines, verify

    try:
        checked = verify(read_lines(log))
    except OSError as e:
        raise NotPaused(f"the audit log {log} cannot be read: {e.strerror or e}") from None
    if checked.problem is not None:
        raise NotPaused(f"the audit log {log} does not verify: {checked.problem.what}")
    if not checked.ends:
        raise NotPaused(f"the audit log {log} holds no attempt")
    if attempt is None:
        attempt = only_paused(log, [e.attempt for e in checked.ends])
    elif attempt not in {e.attempt for e in checked.ends}:
        raise NotPaused(f"the audit log {log} holds no attempt {attempt}")
    state = PausedState.load(attempt)
    if Path(state.log) != log.resolve():
        raise NotPaused(f"attempt {attempt} paused with its log at {state.log}, not {log}")
    records = [r for _, r, _ in read_lines(log) if r is not None and r.get("attempt") == attempt]
    upto = [r for r in records if isinstance(r.get("seq"), int) and r["seq"] <= state.records]
    if not upto or upto[-1].get("hash") != state.head:
        raise NotPaused(
            f"attempt {attempt}'s chain in {log} does not hold the record it paused at "
            f"({state.records}, {state.head[:16]}...)"
        )
    return state, upto, records[len(upto) :]


def only_paused(log: Path, attempts: list[str]) -> str:
    """The attempt of ``log`` a command that names none decides: the one paused
    attempt it holds (one whose state is kept), else its last. A log several
    attempts share (``--log``) may hold more than one paused: each numbers its
    requests from 1, so ``--request N`` alone could decide another attempt's
    request than the one the person read; refused, naming them all."""
    ids = list(dict.fromkeys(attempts))
    waiting = [a for a in ids if state_path(a).exists()]
    if len(waiting) > 1:
        raise NotPaused(
            f"the audit log {log} holds {len(waiting)} paused attempts: name the one to "
            f"decide or resume with --attempt ID (the id its pause printed): "
            + ", ".join(waiting)
        )
    return waiting[0] if waiting else ids[-1]


def os_user() -> tuple[str, int]:
    """Who is deciding: the OS user of this process (its name, else its uid)."""
    uid = os.getuid()
    try:
        return pwd.getpwuid(uid).pw_name, uid
    except KeyError:
        return str(uid), uid


@contextlib.contextmanager
def exclusive(attempt: str) -> Iterator[None]:
    """Held while one command decides or resumes ``attempt`` (a lock beside its
    state): a second `governor approve` or `governor resume` of the same attempt
    at the same moment is refused, never run twice into one chain."""
    folder = paused_dir()
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    fd = os.open(
        folder / f"{state_path(attempt).stem}.lock",
        os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
        0o600,
    )
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise NotPaused(
                f"attempt {attempt} is being approved or resumed by another command: wait for it"
            ) from None
        yield
    finally:
        os.close(fd)


def approve(
    log: Path, request: int | None, answer: str, user: str, uid: int, attempt: str | None = None
) -> dict[str, Any]:
    """Write a person's decision on the paused request of ``log`` into its chain:
    an ``approval`` record (who: the OS user; when: its time; which request; the
    answer: ``once``, ``always`` or ``deny``). One decision per pause: a second
    is refused, naming the first, as is one made at the same moment
    (`exclusive`)."""
    state, _, _ = _chain(log, attempt)
    with exclusive(state.attempt):
        return _approve(log, request, answer, user, uid, state.attempt)


def _approve(
    log: Path, request: int | None, answer: str, user: str, uid: int, attempt: str
) -> dict[str, Any]:
    from governor.audit.log import AuditLog

    state, _, after = _chain(log, attempt)  # read again under the lock
    waiting = state.pending.get("request")
    if request is not None and request != waiting:
        raise NotPaused(
            f"request {request} of attempt {state.attempt} is not the one waiting: "
            f"request {waiting} is ({state.pending.get('kind')}: {state.pending.get('shown')})"
        )
    if after:
        first = after[0]
        raise NotPaused(
            f"request {waiting} of attempt {state.attempt} was decided already "
            f"({first.get('answer')}, by {first.get('user')}, record {first.get('seq')}): "
            f"governor resume {log} --attempt {state.attempt}"
        )
    audit = AuditLog(log, state.attempt)
    audit.continue_chain(state.head, state.records)
    try:
        record = audit.record(
            "approval",
            by="person",
            user=user,
            uid=uid,
            request=waiting,
            paused_record=state.pending.get("seq"),
            answer=answer,
            subject=state.pending.get("subject"),
            reason=f"{answer} by {user}: {state.pending.get('reason', '')}",
        )
        # what the person decided, shown to them (masked, a command's env too): never in the record
        return {**record, "shown": state.pending.get("shown")}
    finally:
        audit.close()


def continuation(log: Path, attempt: str | None = None) -> Continuation:
    """What `governor resume` goes on from: the paused attempt of ``log`` with
    the person's decision written after its pause; `NotPaused` when none was."""
    state, upto, after = _chain(log, attempt)
    if not after:
        raise NotPaused(
            f"request {state.pending.get('request')} of attempt {state.attempt} waits for a "
            f"person's decision: governor approve {log} --attempt {state.attempt} (or --deny) first"
        )
    if len(after) != 1 or after[0].get("kind") != "approval":
        raise NotPaused(
            f"attempt {state.attempt} has records after its pause that are not one "
            f"person's decision: it went on already"
        )
    return Continuation(
        state, after[0]["hash"], after[0]["seq"], [*upto, *after], after[0], state.load_baseline()
    )


def prepared_again(
    going_on: Continuation,
    *,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    environ: Mapping[str, str] | None = None,
) -> Prepared:
    """The paused job as it was given, prepared again through every check, with
    the person's decision as its approver (`governor.gate.approver.Granted`;
    any other ask pauses again). `RefusedBeforeStart` when its policy or its
    ceiling is no longer the one it began with (an approval answers one request;
    it never changes the job), or when its wall time is spent. ``environ``: where
    the agent's variables come from (default ``os.environ``, as at the start)."""
    from governor.gate.approver import Granted, Pause
    from governor.job.spec import AttemptSpec, RefusedBeforeStart, prepare
    from governor.policies.canonical import digest

    state = going_on.state
    answer = going_on.approval.get("answer")
    granted = Granted(
        str(state.pending.get("kind")),
        str(state.pending.get("key") or ""),  # the request whole: a state without one grants nothing
        "refuse" if answer == "deny" else "always" if answer == "always" else "once",
        Pause(),
    )
    job = dict(state.job)
    spec = AttemptSpec(**job, approver=granted, log=state.log, on_event=on_event, environ=environ)
    prepared = prepare(spec)
    changed = [
        f"the {what} in force is not the one attempt {state.attempt} began with "
        f"({where}): an approval answers one request, it never changes the job"
        for what, now, then, where in (
            ("policy", digest(prepared.policy), state.policy_digest, job.get("policy") or "read-only"),
            ("ceiling", digest(prepared.ceiling), state.ceiling_digest, prepared.ceiling.source),
        )
        if now != then
    ]
    if changed:
        raise RefusedBeforeStart(changed)
    if prepared.wall - state.elapsed_s <= 0:
        raise RefusedBeforeStart(
            [f"attempt {state.attempt} has no wall time left ({prepared.wall:.0f}s, all spent)"]
        )
    return prepared
