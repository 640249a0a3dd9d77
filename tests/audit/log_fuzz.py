"""Crafted audit logs and batch outcome lines, for the readers' fuzz test
(`test_audit_fuzz.py`) and its long run (``bench/audit_fuzz.py``).

A seeded generator, so that a failure is replayed from its seed: most lines are
records the writer could have written but with hostile values (huge, nested,
of the wrong type, out of range, NaN, escape sequences), sealed with a correct
hash so that the chain holds and the readers see them; some are torn, foreign
or not JSON at all.
"""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any, Final

FIELDS: Final = (
    "kind", "verdict", "by", "rule", "reason", "request", "subject", "option", "status",
    "tally", "duration_s", "time", "seq", "argv", "roots", "workspace", "preset", "agent",
    "explained_by", "of", "requests", "approvals", "protected", "agent_hosts", "prev",
)  # fmt: skip
KINDS: Final = (
    "attempt-start", "attempt-end", "permission", "read", "write", "terminal", "network",
    "unasked", "changed", "repeated", "limit", "config", "mode", "elicitation", "reported",
    "mcp", "mcp-server", "mcp-tools",
)  # fmt: skip
SUBJECT_KEYS: Final = (
    "host", "port", "method", "path", "command", "argv", "cwd", "env", "title", "tool_kind",
    "paths", "input", "resolved", "origin", "addresses", "problem", "change", "tool_call",
    "server", "name", "tools", "hidden", "writable", "network", "url",
)  # fmt: skip


def value(rng: random.Random, depth: int = 0) -> Any:
    """A JSON value the readers must survive."""
    pick = rng.randrange(22)
    if pick == 0:
        return None
    if pick == 1:
        return rng.choice([True, False])
    if pick == 2:
        return rng.choice([0, -1, 1, 2**31, 2**62, -(2**63), 7])
    if pick == 3:
        return rng.choice([0.5, -0.0, 1e300, -1e300, 1e-300, 3.0, 1e11, 1.7e9])
    if pick == 4:
        return "x" * rng.choice([0, 1, 100, 5000, 70_000])
    if pick == 5:
        return rng.choice(["\x1b[31mred", "\u202eevil", "<script>alert(1)</script>", "\x00", "\ud7ff",
                           "deny", "allow", "approval", "person", "/etc/passwd", "a;b", "$(x)", "'"])
    if pick == 6:
        return rng.choice(KINDS)
    if pick == 7 and depth < 3:
        return [value(rng, depth + 1) for _ in range(rng.randrange(4))]
    if pick == 8 and depth < 3:
        return {rng.choice(SUBJECT_KEYS): value(rng, depth + 1) for _ in range(rng.randrange(5))}
    if pick == 9:
        deep: Any = rng.choice([[], {}, 1])
        for _ in range(rng.choice([10, 100, 250])):
            deep = [deep] if rng.random() < 0.5 else {"a": deep}
        return deep
    if pick == 10:
        return ["p"] * rng.choice([0, 3, 100, 3000])
    return rng.choice(["a1", "r", "policy", "x", "sub/dir", "", "host.example"])


TEXT: Final = ("kind", "verdict", "by", "rule", "reason", "status", "of", "option", "preset",
                "agent", "workspace", "approvals")  # fmt: skip


def typed(rng: random.Random, key: str) -> Any:
    """A value of the type the writer gives ``key``, hostile within it; now and
    then one of any type (which the readers must refuse, naming it)."""
    if rng.random() < 0.03:
        return value(rng)
    if key in TEXT:
        text = value(rng)
        return text if isinstance(text, str) else rng.choice(KINDS)
    if key in ("subject", "explained_by"):
        return subject(rng, mapping=True)
    if key == "tally":
        return {rng.choice(("asked", "refused", "x")): rng.choice([0, 3, 2**62]) for _ in range(3)}
    if key in ("argv", "roots", "protected", "agent_hosts"):
        return [value(rng) for _ in range(rng.randrange(4))]
    if key in ("seq", "requests"):
        return rng.choice([0, 1, 5, 2**62])
    if key in ("time", "duration_s"):
        return rng.choice([0, 0.0, 1.7e9, 9.9e10, 1e-300, 12.5])
    return value(rng)


def subject(rng: random.Random, mapping: bool = False) -> Any:
    if rng.random() < 0.1 and not mapping:
        return value(rng)
    return {k: value(rng) for k in rng.sample(SUBJECT_KEYS, rng.randrange(6))}


def sealed(body: dict[str, Any]) -> bytes:
    """A record's line as the writer seals it: its hash of the line without it."""
    data = json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=True)
    raw = data.encode("utf-8", errors="surrogatepass")
    digest = hashlib.sha256(raw).hexdigest()
    return raw[:-1] + b',"hash":"%s"}' % digest.encode()


def log_lines(rng: random.Random, records: int) -> list[bytes]:
    """One attempt's log of ``records`` lines (two attempts now and then), chained."""
    lines: list[bytes] = []
    prev: dict[str, str | None] = {}
    seqs: dict[str, int] = {}
    for n in range(records):
        attempt = "a1" if rng.random() < 0.8 else "a2"
        kind: Any = "attempt-start" if attempt not in prev else rng.choice(KINDS)
        if n == records - 1 and rng.random() < 0.5:
            kind = "attempt-end"
        body: dict[str, Any] = {"seq": seqs.get(attempt, 0) + 1, "time": 1.7e9 + n,
                                "attempt": attempt, "kind": kind}  # fmt: skip
        body["subject"] = subject(rng, mapping=rng.random() < 0.97)
        for key in rng.sample(FIELDS, rng.randrange(8)):
            body[key] = typed(rng, key)
        if kind == "attempt-end" and rng.random() < 0.5:
            body["tally"] = {"asked": rng.choice([1, -1, "1", 1.5, None, 2**70])}
        body["prev"] = prev.get(attempt) if rng.random() < 0.98 else value(rng)
        roll = rng.random()
        if roll < 0.02:
            line = rng.choice([b"", b"not json", b"[1,2]", b'{"a":NaN}', b"{" * 1000, b'{"x":1e999}',
                               b'{"seq":' + b"9" * 30 + b"}", b"\xff\xfe", b'{"attempt":"a1"'])
        elif roll < 0.04:
            line = sealed(body)[: rng.randrange(1, 40)]
        else:
            line = sealed(body)
        lines.append(line)
        try:
            prev[attempt] = json.loads(line).get("hash")
            seqs[attempt] = body["seq"] if isinstance(body["seq"], int) else 0
        except (ValueError, AttributeError):
            pass
    return lines


def write_log(path: Path, rng: random.Random, records: int) -> None:
    path.write_bytes(b"\n".join(log_lines(rng, records)) + (b"\n" if rng.random() < 0.9 else b""))


def outcome_line(rng: random.Random, job: str) -> dict[str, Any]:
    """A batch's outcome line with hostile values."""
    line: dict[str, Any] = {"job": job, "status": "completed", "acp": {"tally": {"asked": 1}}}
    for key in rng.sample(("status", "reason", "duration_s", "acp", "log", "changes", "log_head",
                           "log_records", "run_id"), rng.randrange(5)):  # fmt: skip
        line[key] = value(rng)
    if rng.random() < 0.4:
        line["acp"] = {"tally": rng.choice([value(rng), {"asked": value(rng)}, {"waited": "x"}])}
    return line


def write_batch(root: Path, rng: random.Random, jobs: int, records: int) -> None:
    """A batch's output: an ``outcomes.jsonl`` of hostile lines and each job's files."""
    root.mkdir(parents=True, exist_ok=True)
    out = []
    for j in range(jobs):
        job = f"job{j}"
        (root / job).mkdir(exist_ok=True)
        if rng.random() < 0.3:  # a job that ended before its attempt: its log is empty
            (root / job / "audit.jsonl").write_bytes(b"")
        else:
            write_log(root / job / "audit.jsonl", rng, records)
        (root / job / "changes.patch").write_bytes(b"diff --git a/x b/x\n" if rng.random() < 0.5 else b"")
        out.append(json.dumps(outcome_line(rng, job), allow_nan=True).encode())
    if rng.random() < 0.2:
        out.append(rng.choice([b"garbage", b"[]", b'{"job":1}']))
    (root / "outcomes.jsonl").write_bytes(b"\n".join(out) + b"\n")
