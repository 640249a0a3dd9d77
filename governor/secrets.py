"""Masking secrets before anything is logged, recorded or shown.

Two nets: the *values* of secret-looking environment variables the governor
knows (an exact match catches any shape), and common token shapes (API keys,
bearer tokens, private key blocks, JWTs) for secrets that arrive from elsewhere.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

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


def secret_looking(name: str) -> bool:
    """Whether an environment variable's name says it holds a secret."""
    return bool(_SECRET_NAME.search(name))


class Masker:
    """Masks known secret values and token shapes in strings and JSON values."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        known = sorted({v for v in values if len(v) >= 6}, key=len, reverse=True)
        self._values = tuple(known)
        self._known = re.compile("|".join(re.escape(v) for v in known)) if known else None

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
            value = self._known.sub(MASK, value)
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
