"""TLS at the proxy: the attempt's own CA, its leaves, and the upstream's trust.

The proxy terminates TLS only for the hosts a credential is bound to (the
model API: `governor.sandbox.net.credentials`), so that it can put the real key
in and read the model's usage; every other host stays a tunnel it never reads.

- The CA is the attempt's: made at its start, its key only ever in the
  governor's memory (never a file: a leaf's key reaches `ssl` through a memfd),
  its certificate in a bundle in the attempt's own folder under the governor's
  hidden state folder. It lives a day at most and signs only leaves
  (``path_length=0``), so a copy of its certificate vouches for nothing after
  the attempt, and for no host but through this proxy.
- A leaf per host (a DNS name, or an IP address as an IP SAN: a loopback
  stand-in is reached as ``127.0.0.1``), made once and kept for the attempt.
- Upstream, the real host is verified against the host's own trust store (the
  system's), plus one extra CA file when the operator names one
  (``ACP_GOVERNOR_UPSTREAM_CA``: a company gateway's CA, or a test's loopback
  stand-in): never against the attempt's own CA, which would let a sandbox
  that reached the proxy vouch for itself.
- The sandboxes trust the CA through a bundle file (the system's bundle plus
  ours) bound read-only, and the variables node, Python, curl, Rust and Go
  clients read (`trust_env`).
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

UPSTREAM_CA_ENV: Final = "ACP_GOVERNOR_UPSTREAM_CA"
"""The governor's variable naming one more CA file (PEM) the proxy trusts for
the real hosts behind terminated connections, besides the system's."""

SYSTEM_BUNDLES: Final = (
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/ssl/cert.pem",
)
"""Where distributions keep the system's CA bundle (Debian, Fedora, SUSE, Alpine)."""

BUNDLE_NAME: Final = "ca-bundle.pem"

TRUST_VARIABLES: Final = (
    "SSL_CERT_FILE",  # OpenSSL: Python's ssl, Ruby, Rust's openssl-probe, Go (on Linux), uv
    "REQUESTS_CA_BUNDLE",  # Python requests
    "CURL_CA_BUNDLE",  # curl
    "NODE_EXTRA_CA_CERTS",  # node: added to its own bundled roots
    "GIT_SSL_CAINFO",  # git over https
    "PIP_CERT",  # pip
    "AWS_CA_BUNDLE",  # the AWS SDKs (Bedrock)
    "DENO_CERT",  # deno
)
"""The variables clients read their trusted CAs from, each set to the bundle."""

_LIFETIME: Final = datetime.timedelta(days=1)


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


@dataclass
class AttemptCA:
    """One attempt's CA: its certificate, its key (never written where a sandbox
    looks), and the leaves it signed, by host."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    _leaves: dict[str, ssl.SSLContext] = field(default_factory=dict)

    @classmethod
    def make(cls, label: str) -> AttemptCA:
        """A fresh CA named for the attempt ``label``."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        name = _name(f"acp-governor attempt {label[:40]}")
        signs_only = x509.KeyUsage(
            digital_signature=False, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True,
            crl_sign=True, encipher_only=False, decipher_only=False,
        )  # fmt: skip
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _LIFETIME)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(signs_only, critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256())
        )
        return cls(cert, key)

    @property
    def cert_pem(self) -> bytes:
        return self.cert.public_bytes(serialization.Encoding.PEM)

    def trust_folder(self, folder: Path) -> Path:
        """Write the bundle a sandbox trusts (the system's bundle, then this
        CA) into ``folder`` (made ``0700``: it is bound read-only into the
        attempt's sandboxes); its path."""
        folder.mkdir(mode=0o700, exist_ok=True)
        bundle = folder / BUNDLE_NAME
        bundle.write_bytes(system_bundle() + b"\n" + self.cert_pem)
        bundle.chmod(0o644)
        return bundle

    def server_context(self, host: str) -> ssl.SSLContext:
        """The TLS server context the proxy presents to a sandbox for ``host``:
        a leaf for that host (an IP address as an IP SAN), made once."""
        context = self._leaves.get(host)
        if context is None:
            context = self._leaves[host] = self._leaf_context(host)
        return context

    def _leaf_context(self, host: str) -> ssl.SSLContext:
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        try:
            san: x509.GeneralName = x509.IPAddress(ipaddress.ip_address(host.strip("[]")))
        except ValueError:
            san = x509.DNSName(host)
        cert = (
            x509.CertificateBuilder()
            .subject_name(_name(host[:64]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _LIFETIME)
            .add_extension(x509.SubjectAlternativeName([san]), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(self.key.public_key()),
                critical=False,
            )
            .sign(self.key, hashes.SHA256())
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_alpn_protocols(["http/1.1"])  # the proxy reads HTTP/1 only
        chain = cert.public_bytes(serialization.Encoding.PEM) + self.cert_pem
        key_pem = key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
        _load_chain(context, chain, key_pem)
        return context


def _load_chain(context: ssl.SSLContext, chain: bytes, key: bytes) -> None:
    """Load a certificate chain and key held in memory: `ssl` reads files only,
    so through a memfd that never has a name on any file system."""
    cert_fd = os.memfd_create("leaf-chain", os.MFD_CLOEXEC)
    key_fd = os.memfd_create("leaf-key", os.MFD_CLOEXEC)
    try:
        os.write(cert_fd, chain)
        os.write(key_fd, key)
        context.load_cert_chain(f"/proc/self/fd/{cert_fd}", f"/proc/self/fd/{key_fd}")
    finally:
        os.close(cert_fd)
        os.close(key_fd)


def system_bundle() -> bytes:
    """The system's CA bundle (empty when there is none: then a sandbox trusts
    only the attempt's CA, which is all a terminated host needs)."""
    for path in SYSTEM_BUNDLES:
        try:
            return Path(path).read_bytes()
        except OSError:
            continue
    return b""


def upstream_context(extra_ca: str | None = None) -> ssl.SSLContext:
    """The client context for the real host: the system's trust store, plus
    ``extra_ca`` (a PEM file) when given; hostnames checked."""
    context = ssl.create_default_context()
    context.set_alpn_protocols(["http/1.1"])
    if extra_ca:
        context.load_verify_locations(cafile=extra_ca)
    return context


def trust_env(bundle: str) -> dict[str, str]:
    """The variables that point a sandbox's clients at ``bundle``."""
    return dict.fromkeys(TRUST_VARIABLES, bundle)
