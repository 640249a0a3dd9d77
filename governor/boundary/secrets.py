"""Masking secrets before anything is logged, recorded or shown.

Two nets: the *values* of secret-looking environment variables the governor
knows (an exact match catches any shape), and common token shapes (API keys,
bearer tokens, private key blocks, JWTs) for secrets that arrive from elsewhere.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, AnyStr, Final, Generic
from urllib.parse import quote, quote_plus

MASK: Final = "[secret]"

_SECRET_NAME: Final = re.compile(
    r"(?i)(token|secret|passw|api_?key|apikey|auth|credential|private|access_?key|session_?key|cookie)"
)

_SHAPES: Final = re.compile(
    "|".join(
        [
            r"-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)",
            r"\bsk-(?:ant-|proj-|live-|test-)?[A-Za-z0-9_\-]{16,}",
            r"\b(?:ghp|gho|ghu|ghs|ghr|github_pat)_[A-Za-z0-9_]{20,}",
            r"\bxox[abposr]-[A-Za-z0-9\-]{10,}",
            r"\bAKIA[0-9A-Z]{16}\b",
            r"\bAIza[0-9A-Za-z_\-]{35}\b",
            r"\bglpat-[A-Za-z0-9_\-]{20,}",
            r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}",
            r"\b[Bb][Ee][Aa][Rr][Ee][Rr]\s+[A-Za-z0-9._~+/\-]{16,}=*",
            r"(?<=[?&])(?:api_?key|token|access_token|key|secret)=[^&\s\"']{8,}",
            r"\b(?:[A-Z0-9]+_)*(?:TOKEN|SECRET|PASSWORD|PASSWD|APIKEY|KEY|CREDENTIALS?)=[^\s\"'&;]{4,}",
        ]
    )
)


SIGNING_KEY_VARIABLE: Final = "ACP_GOVERNOR_AUDIT_PRIVATE_KEY"
"""The variable that may hold the audit log's signing key (`governor.audit.signing`)."""

NEVER_FORWARDED: Final[Mapping[str, str]] = {
    SIGNING_KEY_VARIABLE: "the audit log's signing key",
}
"""The governor's own secrets, by the variable that holds them, and what each
is: never passed to any sandbox (the agent, its commands, an MCP server, a
check) nor sent as an HTTP server's header, whoever names it. A signing key
the agent can read makes every later signature prove nothing. The key the
ceiling's ``audit_key`` file holds is caught by its value wherever it is
named (`forwarding_problems`' ``holds_key``), and the file itself is hidden
from every sandbox (the bound policy's ``masked``)."""


def forwarding_problems(
    named: Iterable[tuple[str, str | None, str]],
    holds_key: Callable[[str], bool] | None = None,
) -> list[str]:
    """Why the variables a job forwards may not be forwarded, one line each:
    ``named`` is (variable, its value or None, where the job named it); one of
    `NEVER_FORWARDED`, or whose value ``holds_key`` says holds the signing key
    (under another name), is refused. The line names the variable and the
    place, never the value. The one check every path that forwards
    environment calls (`governor.job.spec.prepare`, the checks, ``governor sandbox``)."""
    found: list[str] = []
    for name, value, where in named:
        what = NEVER_FORWARDED.get(name)
        if what is None and value and holds_key is not None and holds_key(value):
            what = "the audit log's signing key (its value is the key)"
        if what is not None:
            line = (
                f"{name} holds {what}, named in {where}: it is never passed to a sandbox "
                "(the agent, a command, an MCP server, a check) nor sent as a header"
            )
            if line not in found:
                found.append(line)
    return found


def secret_looking(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret."""
    return bool(_SECRET_NAME.search(name))


SHORTEST: Final = 6
"""Values shorter than this are too short to mask (they would mask ordinary words)."""
_SHORTEST_SPELLING: Final = 7
"""An encoded spelling shorter than this is left out (it could match ordinary
text). A secret of `SHORTEST` bytes has base64 cores of 7 characters at its
two unaligned places, so every spelling of a secret long enough to mask is kept."""


def spellings(value: str) -> set[str]:
    """``value`` and the spellings it takes when a program encodes it: its base64
    (standard and URL-safe) at each of the three alignments it can have inside a
    longer base64 text (the characters that depend on its bytes only), its hex
    (both cases) and its URL-encoded forms (``%2F`` and ``%2f``, ``+`` for a
    space). A server that prints its environment base64-encoded, or an agent
    that has a tool encode a secret, hands it over as surely as in clear."""
    raw = value.encode("utf-8", "surrogatepass")
    found = {value}
    for k in range(3):
        encoded = base64.b64encode(bytes(k) + raw).decode()
        start, end = -(-8 * k // 6), 8 * (k + len(raw)) // 6
        core = encoded[start:end]
        found.add(core)
        found.add(core.translate(_URL_SAFE))
    found.add(base64.b64encode(raw).decode())  # whole, with its padding
    found.add(base64.urlsafe_b64encode(raw).decode())
    found.update({raw.hex(), raw.hex().upper()})
    for quoted in {quote(value, safe=""), quote(value), quote_plus(value)}:
        found.update({quoted, _PERCENT.sub(lambda m: m.group(0).lower(), quoted)})
    return {s for s in found if s == value or len(s) >= _SHORTEST_SPELLING}


_URL_SAFE: Final = str.maketrans("+/", "-_")
_PERCENT: Final = re.compile(r"%[0-9A-F]{2}")


def alternation(words: Iterable[str]) -> str:
    """A regular expression matching any of ``words``, longest first at each
    place, written as a trie (``ab(?:c|d)``): Python's ``re`` tries an
    alternation's branches one by one, so a flat ``a|b|c`` of a hundred
    spellings costs a hundred tries at every character; the trie costs about
    one, which keeps masking every message cheap."""
    trie: dict[str, Any] = {}
    for word in set(words):
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _trie_pattern(trie)


def _trie_pattern(node: dict[str, Any]) -> str:
    """The pattern of one trie node; a run of single children is one literal, so
    the nesting is as deep as the words' branch points, not their length."""
    branches = []
    for char, child in sorted(node.items()):
        if not char:
            continue
        run = [char]
        while "" not in child and len(child) == 1:
            (next_char, child), = child.items()
            run.append(next_char)
        branches.append(re.escape("".join(run)) + _trie_pattern(child))
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if "" in node:  # a word ends here and a longer one goes on: the longer tried first
        return "(?:" + body + ")?" if len(branches) == 1 else body + "?"
    return body


class Spelt(Generic[AnyStr]):
    """Known words (a secret's spellings) replaced by a mask, fast on long texts:
    a text of `SCAN_FROM` characters or more is first searched for each word's
    first `_HEAD` characters (``in``, at C speed), and the pattern runs only when
    one is there, as it rarely is. Made by `spelt_text` and `spelt_bytes`."""

    def __init__(self, pattern: re.Pattern[AnyStr], heads: tuple[AnyStr, ...], mask: AnyStr) -> None:
        self._pattern: re.Pattern[AnyStr] = pattern
        self._heads: tuple[AnyStr, ...] = heads
        self._mask: AnyStr = mask

    def sub(self, text: AnyStr) -> AnyStr:
        """``text`` with every word masked."""
        if len(text) >= SCAN_FROM and not any(head in text for head in self._heads):
            return text
        masked: AnyStr = self._pattern.sub(self._mask, text)
        return masked


def spelt_text(words: Iterable[str]) -> Spelt[str]:
    """A `Spelt` over strings."""
    unique = set(words)
    return Spelt(re.compile(alternation(unique)), tuple({w[:_HEAD] for w in unique}), MASK)


def spelt_bytes(words: Iterable[str]) -> Spelt[bytes]:
    """A `Spelt` over UTF-8 bytes (a line of JSON as it came)."""
    unique = set(words)
    pattern = re.compile(alternation(unique).encode("utf-8", "surrogatepass"))
    heads = tuple({w[:_HEAD].encode("utf-8", "surrogatepass") for w in unique})
    return Spelt(pattern, heads, MASK.encode())


_HEAD: Final = 8
SCAN_FROM: Final = 512
"""From this length on a text is searched for the words' heads before the pattern runs
(below it the pattern alone is faster than the searches' overhead)."""


class Masker:
    """Masks known secret values (and their encodings: `spellings`) and token
    shapes in strings and JSON values."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        known = sorted({v for v in values if len(v) >= SHORTEST}, key=len, reverse=True)
        self._values = tuple(known)
        spelt = {s for v in known for s in spellings(v)}
        self._known = spelt_text(spelt) if known else None

    @classmethod
    def from_environ(cls, environ: Mapping[str, str], extra: Iterable[str] = ()) -> Masker:
        """A masker for the secret-looking variables of an environment, plus extra values."""
        return cls([v for k, v in environ.items() if secret_looking(k)] + list(extra))

    @property
    def values(self) -> tuple[str, ...]:
        """The known secret values, longest first."""
        return self._values

    def text(self, value: str) -> str:
        """The string with every known secret and token shape replaced by `MASK`."""
        if self._known is not None:
            value = self._known.sub(value)
        return _SHAPES.sub(MASK, value)

    def json(self, value: Any) -> Any:
        """A JSON value with every string masked (keys kept)."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.json(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.json(v) for v in value]
        return value

    def listener(
        self, listener: Callable[[str, dict[str, Any]], None] | None
    ) -> Callable[[str, dict[str, Any]], None] | None:
        """``listener`` given only masked events, as the audit log holds them: what
        the agent said and did, the paths and commands (a decision's ``records``
        are the log's own, masked already)."""
        if listener is None:
            return None

        def emit(kind: str, info: dict[str, Any]) -> None:
            records = info.get("records")
            shown = self.json({k: v for k, v in info.items() if k != "records"})
            if records is not None:
                shown["records"] = records
            listener(kind, shown)

        return emit
