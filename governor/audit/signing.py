"""Ed25519 signatures over an attempt's head: what ties a log to a key outside it.

Rules of this file:

- **One signature per attempt, in its end record.** The end record's bytes up to
  its ``signature`` field (closed with ``}``) are signed; they hold ``prev``, the
  hash of the record before, so the signature covers the whole chain. The
  signature then becomes the end record's last field before ``hash``, so the
  head (the end record's hash) covers the signature too. Why not a signed
  checkpoint every N records: it would put a signing on the decision path every
  N answers, and still leave the newest records of a crashed attempt unsigned;
  a crash-cut attempt has no end record, verifies as unfinished, and nothing
  but the anchor (which a crashed governor never reported either) could vouch
  for its records.
- **The operator's key only.** The key comes from the ceiling's ``audit_key``
  (a file) or `KEY_VARIABLE` (the key itself, as a CI secret holds it), never
  from a job's policy; both at once is refused rather than one chosen.
- **The private key never leaves this file's objects.** No message, record or
  ``repr`` shows it; errors name the file or the variable, never its content.
- **An optional extra.** ``cryptography`` (``pip install 'acp-governor[signing]'``)
  is imported only when a key is used; without it, a key given is refused
  before start, naming the install line.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from governor.boundary.person_files import write_output
from governor.boundary.secrets import SIGNING_KEY_VARIABLE

KEY_VARIABLE: Final = SIGNING_KEY_VARIABLE
"""The environment variable that may hold the signing key (its PEM text); its
name looks secret (`governor.boundary.secrets`), so its value is masked wherever it
could appear, and it is one of `governor.boundary.secrets.NEVER_FORWARDED`."""
INSTALL: Final = "pip install 'acp-governor[signing]'"
DOMAIN: Final = b"acp-governor audit head v1\n"
"""Prefixed to what is signed, so a signature over a log's record can never be
taken for one over anything else this key might sign."""
_SIGNATURE_TAIL: Final = re.compile(
    rb',"signature":\{"key":"([0-9a-f]{16})","ed25519":"([0-9a-f]{128})"\},"hash":"[0-9a-f]{64}"\}\Z'
)


class SigningUnavailable(Exception):
    """A signing or public key that cannot be used (missing, unreadable, not
    Ed25519, or the extra not installed): the message names the culprit."""


def _crypto() -> Any:
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ed25519
    except ImportError:
        raise SigningUnavailable(
            f"signing the audit log needs the cryptography package: {INSTALL}"
        ) from None
    return serialization, ed25519


def fingerprint(public_raw: bytes) -> str:
    """A key's short name in records and messages: the first 16 hex digits of the
    SHA-256 of its raw 32-byte public key."""
    return hashlib.sha256(public_raw).hexdigest()[:16]


class Signer:
    """An Ed25519 private key that signs end records; shows only its fingerprint."""

    __slots__ = ("_key", "_spellings", "key_id", "source")

    def __init__(self, pem: bytes, source: str) -> None:
        serialization, ed25519 = _crypto()
        try:
            key = serialization.load_pem_private_key(pem, password=None)
        except (ValueError, TypeError):
            raise SigningUnavailable(
                f"{source}: not an unencrypted PEM private key (make one with "
                "`governor audit keygen`)"
            ) from None
        if not isinstance(key, ed25519.Ed25519PrivateKey):
            raise SigningUnavailable(f"{source}: the key is not an Ed25519 key")
        self._key = key
        self.source = source
        raw = key.public_key().public_bytes(
            serialization.Encoding.Raw, serialization.PublicFormat.Raw
        )
        self.key_id = fingerprint(raw)
        seed = key.private_bytes(
            serialization.Encoding.Raw, serialization.PrivateFormat.Raw, serialization.NoEncryption()
        )
        text = pem.decode("ascii", "replace").strip()
        body = "".join(line for line in text.splitlines() if not line.startswith("-----"))
        self._spellings = tuple(
            v for v in (text, body, seed.hex(), base64.b64encode(seed).decode()) if v
        )

    def __repr__(self) -> str:
        return f"Signer(key {self.key_id} from {self.source})"

    def unsaid(self) -> tuple[str, ...]:
        """The key's spellings (its PEM, the PEM's base64 body, the raw key in hex
        and base64), for a masker only: a key that came from the ceiling's file is
        in no environment the masker reads, and must be masked all the same."""
        return self._spellings

    def held_in(self, value: str) -> bool:
        """Whether ``value`` holds this key (whitespace aside): a variable the
        job forwards under another name must not carry it
        (`governor.boundary.secrets.forwarding_problems`)."""
        flat = "".join(value.split())
        return any("".join(s.split()) in flat for s in self._spellings[1:])

    def sealed(self, body: bytes) -> bytes:
        """A record's compact JSON (``{...}``) with its ``signature`` field appended
        last, signing the bytes as given."""
        signature = self._key.sign(DOMAIN + body).hex()
        return b'%s,"signature":{"key":"%s","ed25519":"%s"}}' % (
            body[:-1],
            self.key_id.encode(),
            signature.encode(),
        )


@dataclass(frozen=True, slots=True)
class Signed:
    """What an end record's signature claims: the key's fingerprint, the
    signature, and the bytes it signs (the record up to its ``signature``)."""

    key: str
    signature: bytes
    message: bytes


def signed_part(line: bytes) -> Signed | None:
    """The signature of a sealed line (`Signer.sealed`, then hashed), or None when
    it carries none in the place and form the writer puts it."""
    tail = _SIGNATURE_TAIL.search(line)
    if tail is None:
        return None
    return Signed(tail.group(1).decode(), bytes.fromhex(tail.group(2).decode()), line[: tail.start()] + b"}")


class PublicKey:
    """An Ed25519 public key that checks end records' signatures."""

    def __init__(self, pem: bytes, source: str) -> None:
        serialization, ed25519 = _crypto()
        try:
            key = serialization.load_pem_public_key(pem)
        except (ValueError, TypeError):
            raise SigningUnavailable(
                f"{source}: not a PEM public key (`governor audit keygen` writes one beside "
                "the private key, as KEY.pub)"
            ) from None
        if not isinstance(key, ed25519.Ed25519PublicKey):
            raise SigningUnavailable(f"{source}: the key is not an Ed25519 key")
        self._key = key
        self.source = source
        self.key_id = fingerprint(
            key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        )

    @classmethod
    def load(cls, path: str | Path) -> PublicKey:
        """The public key in a PEM file."""
        try:
            pem = Path(path).read_bytes()
        except OSError as e:
            raise SigningUnavailable(f"{path}: cannot read the public key: {e.strerror}") from None
        return cls(pem, str(path))

    def verifies(self, signed: Signed) -> bool:
        """Whether ``signed`` is this key's signature over its message."""
        from cryptography.exceptions import InvalidSignature

        try:
            self._key.verify(signed.signature, DOMAIN + signed.message)
        except InvalidSignature:
            return False
        return True


def load_signer(key_file: str | None, environ: Mapping[str, str]) -> Signer | None:
    """The operator's signing key: the ceiling's ``audit_key`` file, or the key in
    `KEY_VARIABLE`; None when neither is set. Both set is refused: which one
    signs must never be a guess."""
    pem = environ.get(KEY_VARIABLE)
    if key_file and pem:
        raise SigningUnavailable(
            f"the ceiling's audit_key ({key_file}) and ${KEY_VARIABLE} are both set: "
            "give the signing key one way"
        )
    if pem:
        return Signer(pem.encode(), f"${KEY_VARIABLE}")
    if not key_file:
        return None
    path = Path(key_file).expanduser()
    try:
        data = path.read_bytes()
        mode = os.stat(path).st_mode
    except OSError as e:
        raise SigningUnavailable(
            f"{key_file} (the ceiling's audit_key): cannot read the signing key: {e.strerror}"
        ) from None
    if mode & 0o077:
        raise SigningUnavailable(
            f"{key_file} (the ceiling's audit_key): the signing key is readable by others "
            f"(mode {mode & 0o777:o}): chmod 600 it"
        )
    return Signer(data, f"{key_file} (the ceiling's audit_key)")


def keygen(private: Path) -> tuple[Path, str]:
    """Write a new Ed25519 key pair: ``private`` (PEM, mode 600, never over an
    existing file) and ``private`` + ``.pub``; returns the public file and the
    key's fingerprint."""
    serialization, ed25519 = _crypto()
    key = ed25519.Ed25519PrivateKey.generate()
    public = private.with_name(private.name + ".pub")
    for path in (private, public):
        if path.exists():
            raise SigningUnavailable(f"{path} exists: keygen never overwrites a key")
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    pub = key.public_key()
    try:
        fd = os.open(private, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        write_output(  # never through a link in its place (checked above: only a dangling one)
            public,
            pub.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo),
        )
    except OSError as e:
        raise SigningUnavailable(f"{e.filename}: cannot write the key: {e.strerror}") from None
    raw = pub.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return public, fingerprint(raw)
