"""A log is checked against what was reported outside it: the head in its outcome
(`governor audit verify --head`) and the operator's signature on each end record
(`--public-key`). Real demo attempts, real files, the real CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import trio
from audit_helpers import demo_spec, log_lines

from governor.attempt.lifecycle import run_attempt
from governor.audit.log import chain_hash, sealed
from governor.audit.signing import KEY_VARIABLE
from governor.ending.outcome import Outcome
from governor.job.spec import RefusedBeforeStart

GOVERNOR = Path(sys.executable).parent / "governor"


def governor(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    done = subprocess.run(
        [str(GOVERNOR), *args], capture_output=True, text=True, timeout=120, env=env
    )
    return done.returncode, done.stdout + done.stderr


def rewritten(lines: list[str]) -> list[str]:
    """The forger's script: the one refusal turned into an allow with another
    reason, the end record's tally changed to match, and every hash recomputed
    in order (each ``prev`` the new hash before it). A signature it cannot make
    is kept as it was."""
    out: list[str] = []
    prev: str | None = None
    for line in lines:
        record = json.loads(line)
        if record.get("verdict") == "deny":
            record.update(verdict="allow", reason="the policy allows it", rule="capability")
        if record["kind"] == "attempt-end":
            record["tally"] = {**record["tally"], "allowed": record["tally"]["allowed"] + 1,
                               "refused": record["tally"]["refused"] - 1}  # fmt: skip
        if record["prev"] is not None:
            record["prev"] = prev
        record["hash"] = chain_hash(record)
        prev = record["hash"]
        out.append(sealed(record).decode().rstrip("\n"))
    return out


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A key pair made by `governor audit keygen`: the private key's path (KEY.pub beside it)."""
    private = tmp_path_factory.mktemp("key") / "audit.key"
    code, out = governor("audit", "keygen", str(private))
    assert code == 0, out
    assert oct(private.stat().st_mode & 0o777) == "0o600"
    return private


def signed_environ(key: Path) -> dict[str, str]:
    return {**os.environ, KEY_VARIABLE: key.read_text()}


@pytest.fixture(scope="module")
def signed(
    tmp_path_factory: pytest.TempPathFactory, key: Path
) -> tuple[bytes, list[Outcome]]:
    """A log of two real demo attempts signed with the key (through the
    variable), and their outcomes, made once."""
    tmp = tmp_path_factory.mktemp("signed")
    log = tmp / "audit.jsonl"

    async def two() -> list[Outcome]:
        return [
            await run_attempt(demo_spec(tmp, log, environ=signed_environ(key))) for _ in range(2)
        ]

    outcomes = trio.run(two)
    return log.read_bytes(), outcomes


@pytest.fixture
def log(tmp_path: Path, signed: tuple[bytes, list[Outcome]]) -> Path:
    path = tmp_path / "audit.jsonl"
    path.write_bytes(signed[0])
    return path


@pytest.fixture
def heads(signed: tuple[bytes, list[Outcome]]) -> list[str]:
    found = [o.log_head for o in signed[1]]
    assert all(isinstance(h, str) and len(h) == 64 for h in found)
    return [h for h in found if h is not None]


def anchored(log: Path, heads: list[str], key: Path | None = None) -> tuple[int, str]:
    args = [a for h in heads for a in ("--head", h)]
    if key is not None:
        args += ["--public-key", f"{key}.pub"]
    return governor("audit", "verify", str(log), *args)


def attempts(lines: list[str]) -> list[list[str]]:
    """The lines of each attempt, in order."""
    out: dict[str, list[str]] = {}
    for line in lines:
        out.setdefault(json.loads(line)["attempt"], []).append(line)
    return list(out.values())


def test_the_outcome_carries_its_end_records_hash_count_and_key(
    log: Path, signed: tuple[bytes, list[Outcome]], key: Path
) -> None:
    first, _ = attempts(log_lines(log))
    end = json.loads(first[-1])
    outcome = signed[1][0]
    assert end["kind"] == "attempt-end"
    assert (outcome.log_head, outcome.log_records) == (end["hash"], end["seq"])
    assert outcome.to_json()["log_head"] == end["hash"]
    fingerprint = governor("audit", "keygen", str(key))[1]  # refused: it exists
    assert "exists" in fingerprint
    assert outcome.log_key == end["signature"]["key"]


def test_an_untouched_log_passes_against_its_heads_and_its_key(
    log: Path, heads: list[str], key: Path
) -> None:
    code, out = anchored(log, heads, key)
    assert code == 0, out
    lines = len(log_lines(log))
    assert f"intact, anchored and signed ({lines} line(s), 2 attempt(s))" in out
    assert out.count("its chain ends at its head") == 2 and out.count("is signed by key") == 2


def test_a_verify_with_no_anchor_says_the_log_is_intact_but_not_anchored(log: Path) -> None:
    code, out = governor("audit", "verify", str(log))
    assert code == 0
    assert "intact, not anchored" in out and "nothing outside the file vouches for it" in out


def test_a_rewritten_log_is_intact_by_itself_and_fails_against_its_head_and_its_key(
    log: Path, heads: list[str], key: Path
) -> None:
    first, _ = attempts(log_lines(log))
    forged = rewritten(first)
    assert any('"verdict":"deny"' in line for line in first)
    assert not any('"verdict":"deny"' in line for line in forged)
    write(log, forged)
    attempt = json.loads(first[0])["attempt"]
    # the hazard: the chain alone takes it
    code, out = governor("audit", "verify", str(log))
    said = f"intact, not anchored ({len(forged)} line(s), 1 attempt(s))"
    assert (code, said in out) == (0, True), out
    code, out = anchored(log, heads[:1])
    assert code == 1, out
    line = len(first)  # its end record's line and seq
    assert f"TAMPERED: attempt {attempt}: its chain ends at record {line} (line {line})" in out
    assert "not at the head" in out
    code, out = governor("audit", "verify", str(log), "--public-key", f"{key}.pub")
    assert code == 1, out
    assert f"attempt {attempt}: the signature of its end record (line {line}) does not verify" in out
    # nor does dropping the signature it cannot remake help
    end = json.loads(forged[-1])
    del end["signature"]
    end["hash"] = chain_hash(end)
    write(log, [*forged[:-1], sealed(end).decode().rstrip("\n")])
    code, out = governor("audit", "verify", str(log), "--public-key", f"{key}.pub")
    assert code == 1 and f"attempt {attempt}: its end record (line {line}) is not signed" in out, out
    # the same log, untouched, passes both ways
    write(log, first)
    assert anchored(log, heads[:1])[0] == 0
    assert governor("audit", "verify", str(log), "--public-key", f"{key}.pub")[0] == 0


def test_a_log_cut_before_its_end_record_fails_against_its_head_and_its_key_and_reads_as_cut_not_tampered(
    log: Path, heads: list[str], key: Path
) -> None:
    first, _ = attempts(log_lines(log))
    write(log, first[:-2])
    code, out = anchored(log, heads[:1])
    assert code == 1, out
    kept = len(first) - 2
    assert f"its chain stops at record {kept} (line {kept}) with no end record" in out
    assert f"the log was cut after line {kept}" in out
    code, out = governor("audit", "verify", str(log), "--public-key", f"{key}.pub")
    assert code == 1, out  # nothing vouches for it: not signed, though not called tampering
    assert "intact but NOT SIGNED" in out and "TAMPERED" not in out
    assert "no end record, so no signature covers its records" in out


def test_a_log_truncated_after_an_end_record_drops_the_attempt_after_it_and_fails(
    log: Path, heads: list[str], key: Path
) -> None:
    first, _ = attempts(log_lines(log))
    write(log, first)  # cut right after the first attempt's end record
    code, out = anchored(log, heads, key)
    assert code == 1, out
    assert f"no record has the head {heads[1][:16]}" in out
    # its signature alone cannot tell: what it does not prove
    assert governor("audit", "verify", str(log), "--public-key", f"{key}.pub")[0] == 0


def test_an_attempt_dropped_from_the_middle_of_a_log_fails_against_the_heads(
    log: Path, heads: list[str]
) -> None:
    _, second = attempts(log_lines(log))
    write(log, second)
    code, out = anchored(log, heads)
    assert code == 1, out
    assert f"no record has the head {heads[0][:16]}" in out
    assert f"attempt {json.loads(second[0])['attempt']}: its chain ends at its head" in out


def test_an_attempt_spliced_in_from_another_log_fails_against_the_heads(
    log: Path, heads: list[str], key: Path, tmp_path: Path
) -> None:
    first, _ = attempts(log_lines(log))
    write(log, first)
    other = tmp_path / "other"
    other.mkdir()
    outcome = trio.run(run_attempt, demo_spec(other, other / "a.jsonl", environ=signed_environ(key)))
    write(log, [*first, *log_lines(other / "a.jsonl")])
    code, out = anchored(log, heads[:1], key)
    assert code == 1, out
    last = len(first) + len(log_lines(other / "a.jsonl"))
    assert f"attempt {outcome.run_id} (its last record on line {last}) has no head among" in out
    # signed by the same key, its signature holds: only the head tells it does not belong
    code, out = governor("audit", "verify", str(log), "--public-key", f"{key}.pub")
    assert code == 0, out


def test_an_old_log_put_in_place_of_the_new_one_fails_against_the_new_head(
    log: Path, heads: list[str], key: Path, tmp_path: Path
) -> None:
    first, _ = attempts(log_lines(log))
    write(log, first)  # the earlier run's genuine, signed log
    code, out = anchored(log, heads[1:])
    assert code == 1, out
    said = f"TAMPERED: attempt {json.loads(first[0])['attempt']}: its chain ends at record {len(first)}"
    assert said in out
    assert "or the log was replaced by another" in out


def test_a_line_cut_by_a_crash_is_still_reported_as_incomplete_with_a_key_given(
    log: Path, key: Path
) -> None:
    data = log.read_bytes()
    lines = data.count(b"\n")
    log.write_bytes(data[:-60])  # the second end record's write, cut short
    code, out = governor("audit", "verify", str(log), "--public-key", f"{key}.pub")
    assert code == 1, out  # the second attempt has no end record: no signature covers it
    assert f"line {lines}: the last line is incomplete" in out
    assert "no end record, so no signature covers its records" in out
    assert out.count("is signed by key") == 1  # the first attempt's


def test_a_log_signed_by_another_key_fails_naming_both_keys(
    log: Path, tmp_path: Path, key: Path
) -> None:
    other = tmp_path / "other.key"
    assert governor("audit", "keygen", str(other))[0] == 0
    code, out = governor("audit", "verify", str(log), "--public-key", f"{other}.pub")
    assert code == 1
    assert "is signed by key" in out and "not by the key given" in out


def test_the_private_key_reaches_no_record_outcome_or_message(
    tmp_path: Path, key: Path, signed: tuple[bytes, list[Outcome]]
) -> None:
    pem = key.read_text()
    body = "".join(pem.splitlines()[1:-1])
    data, outcomes = signed
    assert body not in data.decode()
    assert all(body not in json.dumps(o.to_json()) for o in outcomes)
    # a job may not take the variable for its agent
    with pytest.raises(RefusedBeforeStart) as refused:
        trio.run(
            run_attempt,
            demo_spec(tmp_path, tmp_path / "a.jsonl", environ=signed_environ(key), env=[KEY_VARIABLE]),
        )
    assert f"{KEY_VARIABLE} holds the audit log's signing key" in str(refused.value)
    assert body not in str(refused.value)
    # a key that is no key: the variable is named, its value is not shown
    broken = {**os.environ, KEY_VARIABLE: pem.replace(body[:40], "A" * 40)}
    with pytest.raises(RefusedBeforeStart) as bad:
        trio.run(run_attempt, demo_spec(tmp_path, tmp_path / "b.jsonl", environ=broken))
    assert f"${KEY_VARIABLE}: not an unencrypted PEM private key" in str(bad.value)
    assert body[40:80] not in str(bad.value)


def test_a_ceilings_audit_key_signs_and_a_key_given_twice_is_refused(
    tmp_path: Path, key: Path
) -> None:
    ceiling = tmp_path / "ceiling.toml"
    ceiling.write_text(f'allowed_agents = ["demo"]\naudit_key = "{key}"\n')
    log = tmp_path / "a.jsonl"
    outcome = trio.run(run_attempt, demo_spec(tmp_path, log, ceiling=ceiling))
    assert outcome.log_key is not None and outcome.log_head is not None
    code, out = governor(
        "audit", "verify", str(log), "--head", outcome.log_head, "--public-key", f"{key}.pub"
    )
    assert code == 0, out
    with pytest.raises(RefusedBeforeStart) as both:
        trio.run(
            run_attempt,
            demo_spec(tmp_path, tmp_path / "b.jsonl", ceiling=ceiling, environ=signed_environ(key)),
        )
    assert "are both set: give the signing key one way" in str(both.value)
    key.chmod(0o644)
    try:
        with pytest.raises(RefusedBeforeStart) as loose:
            trio.run(run_attempt, demo_spec(tmp_path, tmp_path / "c.jsonl", ceiling=ceiling))
    finally:
        key.chmod(0o600)
    assert "readable by others (mode 644): chmod 600 it" in str(loose.value)


def test_a_head_that_is_not_a_hash_is_a_usage_error_naming_it(log: Path) -> None:
    code, out = governor("audit", "verify", str(log), "--head", "deadbeef")
    assert code == 2 and "--head 'deadbeef' is not a head" in out


def test_the_report_page_says_what_its_log_was_checked_against(
    log: Path, heads: list[str], key: Path, tmp_path: Path
) -> None:
    first, _ = attempts(log_lines(log))
    write(log, first)
    page = tmp_path / "page.html"
    assert governor("audit", "report", str(log), "-o", str(page))[0] == 0
    # said calmly on a default report: nothing was checked, nothing failed
    assert "not checked against an anchor: intact means the file agrees with itself" in page.read_text()
    code, out = governor(
        "audit", "report", str(log), "--head", heads[0], "--public-key", f"{key}.pub",
        "-o", str(page),
    )  # fmt: skip
    assert code == 0, out
    text = page.read_text()
    assert "anchored and signed: checked against the head given and the public key given" in text
    assert heads[0][:16] in text and json.loads(first[-1])["signature"]["key"] in text
    write(log, rewritten(first))
    code, out = governor("audit", "report", str(log), "--head", heads[0], "-o", str(page))
    assert code == 0 and f"warning: {log}: attempt" in out, out
    assert "NOT AUTHENTIC (checked against the head given)" in page.read_text()


def test_a_ceilings_audit_key_must_be_an_absolute_path_to_a_file() -> None:
    from governor.policies.ceiling import parse_ceiling
    from governor.policies.errors import ConfigError

    assert parse_ceiling('audit_key = "/etc/k"').audit_key == "/etc/k"
    for bad, words in [('"keys/k"', "is relative"), ("3", "expected the key file's path")]:
        with pytest.raises(ConfigError) as e:
            parse_ceiling(f"audit_key = {bad}", "c.toml")
        assert "audit_key" in str(e.value) and words in str(e.value)
