"""The mechanisms under issue 35's findings 6 and 7, each on its own: the one
list of the governor's secrets (a library's checks call it too), the spellings
a secret is masked in, the accept loop that waits out a descriptor famine, and
an attempt that ends with its records whatever one of its tasks raises.
(The attacks through the CLI: tests/security/test_hostile_mcp_floods.py.)"""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from urllib.parse import quote

from hypothesis import example, given
from hypothesis import strategies as st

from governor.attempt.lifecycle import run_attempt
from governor.audit.signing import keygen
from governor.boundary.secrets import (
    MASK,
    SIGNING_KEY_VARIABLE,
    Masker,
    alternation,
    forwarding_problems,
)
from governor.checks.check_runs import run_checks
from governor.mcp.servers import Unsaid
from governor.policies.policy import parse_policy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "audit"))
from audit_helpers import demo_spec

ROOT = Path(__file__).resolve().parents[2]


# -- the one list -------------------------------------------------------------------------


def test_the_signing_keys_variable_is_refused_wherever_it_is_named_and_the_line_names_the_place() -> None:
    found = forwarding_problems([(SIGNING_KEY_VARIABLE, "-----BEGIN secret", "[[mcp.servers]] x env"),
                                 ("CI", "true", "the policy's env")])  # fmt: skip
    assert len(found) == 1 and SIGNING_KEY_VARIABLE in found[0] and "[[mcp.servers]] x env" in found[0]
    assert "BEGIN secret" not in found[0]


async def test_a_librarys_checks_are_refused_the_signing_key_and_never_given_it(
    tmp_path: Path,
) -> None:
    keygen(tmp_path / "key")
    pem = (tmp_path / "key").read_text()
    ws = tmp_path / "ws"
    ws.mkdir()
    policy = parse_policy(f'capability = "edit-workspace"\nenv = ["{SIGNING_KEY_VARIABLE}", "CI"]', "p.toml")
    bound = policy.bind(str(ws))
    environ = {SIGNING_KEY_VARIABLE: pem, "CI": "yes", "PATH": "/usr/bin:/bin"}
    line = f'test -z "${SIGNING_KEY_VARIABLE}" || echo got-the-key'
    checks = await run_checks(bound, commands=(line,), environ=environ)
    (ran,) = checks.runs
    assert not ran.passed and SIGNING_KEY_VARIABLE in (ran.error or ""), ran
    assert "got-the-key" not in ran.tail and ran.exit is None  # never ran with it
    # the neighbour: an ordinary variable reaches a check
    ordinary = parse_policy('capability = "edit-workspace"\nenv = ["CI"]', "p.toml").bind(str(ws))
    checks = await run_checks(ordinary, commands=('test "$CI" = yes',), environ=environ)
    assert checks.runs[0].passed, checks.runs[0]


# -- spellings ----------------------------------------------------------------------------

secrets = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), min_size=6, max_size=40)
around = st.binary(max_size=12)


@given(secret=secrets, before=around, after=around)
@example(secret="abcdef", before=b"", after=b"zzzz")
@example(secret="abcdef", before=b"x", after=b"zzzz")  # the shortest secret, each alignment
@example(secret="abcdef", before=b"xy", after=b"z")
def test_a_secret_inside_a_longer_base64_text_is_masked_at_every_alignment_in_both_alphabets(
    secret: str, before: bytes, after: bytes
) -> None:
    raw = secret.encode()
    masker, unsaid = Masker([secret]), Unsaid([secret])
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        text = encode(before + raw + after).decode()
        for masked in (masker.text(text), unsaid.text(text), unsaid.line(json.dumps(text).encode()).decode()):
            assert MASK in masked, (secret, text)
            # what is left of the secret's base64: at most the two characters at each edge
            left = masked.replace(MASK, " ")
            core = encode(raw).decode().rstrip("=")[2:-2]
            assert len(core) < 8 or core not in left


@given(secret=secrets)
def test_a_secrets_hex_and_url_encodings_are_masked_and_ordinary_text_is_not(secret: str) -> None:
    raw = secret.encode()
    masker = Masker([secret])
    for spelt in (raw.hex(), raw.hex().upper(), quote(secret, safe=""), quote(secret)):
        assert secret not in masker.text(f"x {spelt} y") or spelt == secret
        assert spelt not in masker.text(f"x {spelt} y")
    assert masker.text("ordinary words aGVsbG8= 68656c6c6f a%20b") == "ordinary words aGVsbG8= 68656c6c6f a%20b"


@given(words=st.lists(st.text("abc", min_size=1, max_size=5), min_size=1, max_size=8), text=st.text("abc ", max_size=40))
def test_the_trie_pattern_matches_what_the_longest_first_alternation_matches(words: list[str], text: str) -> None:
    flat = re.compile("|".join(map(re.escape, sorted(set(words), key=len, reverse=True))))
    trie = re.compile(alternation(words))
    assert [m.span() for m in trie.finditer(text)] == [m.span() for m in flat.finditer(text)]


# -- the accept loop ----------------------------------------------------------------------

STARVED = textwrap.dedent(
    """
    import os, resource, socket, sys, trio
    sys.path.insert(0, sys.argv[1])
    from governor.sandbox.net.accepting import accept_forever

    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    path = sys.argv[2]
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(8)
    client = socket.socket(socket.AF_UNIX)
    taken = []

    async def main():
        async with trio.open_nursery() as nursery:
            nursery.start_soon(accept_forever, listener, taken.append)
            await trio.sleep(0.05)
            filler = []
            while True:  # every descriptor taken
                try:
                    filler.append(os.dup(0))
                except OSError:
                    break
            client.connect(path)  # waits in the backlog: accept() says EMFILE
            await trio.sleep(0.5)
            starved = not taken
            for fd in filler:
                os.close(fd)
            with trio.fail_after(30):
                while not taken:
                    await trio.sleep(0.05)
            print("starved" if starved else "never starved", "then taken")
            nursery.cancel_scope.cancel()

    trio.run(main)
    """
)


def test_an_accept_loop_out_of_descriptors_waits_and_takes_the_connection_once_some_are_free(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", STARVED, str(ROOT), str(tmp_path / "s.sock")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "starved then taken", done.stdout + done.stderr[-2000:]


# -- an attempt whose task raises ---------------------------------------------------------


async def test_an_attempt_whose_task_raises_ends_failed_with_its_end_record_and_a_verified_log(
    tmp_path: Path,
) -> None:
    def listener(kind: str, info: dict[str, object]) -> None:  # a library caller's bug
        if kind == "spawned":
            raise RuntimeError("the caller's listener broke")

    log = tmp_path / "a.jsonl"
    outcome = await run_attempt(demo_spec(tmp_path, log, on_event=listener))
    assert outcome.status == "failed", outcome
    assert "the governor failed during the attempt: RuntimeError: the caller's listener broke" in outcome.reason
    kinds = [json.loads(line)["kind"] for line in log.read_text().splitlines()]
    assert kinds[0] == "attempt-start" and kinds[-1] == "attempt-end", kinds
    verified = subprocess.run([sys.executable, "-m", "governor.cli", "audit", "verify", str(log)],
                              capture_output=True, text=True, timeout=120)  # fmt: skip
    assert verified.returncode == 0, verified.stdout + verified.stderr
