"""A DNS server on a loopback address, written with the stdlib: the stand-in
for whatever resolver the host names, so that a test can see every query the
governor's proxy sends and answer it as a hostile resolver would.

It answers A queries from its table (every other name: NXDOMAIN; AAAA of a
known name: no data), over UDP, and keeps each query it got as (name, type).
The proxy reaches it the ordinary way, through the C library's resolver
reading ``/etc/resolv.conf``: the proxy's process gets a mount namespace
whose ``/etc/resolv.conf`` names this server (`resolv_conf`). The C library
has no port in ``nameserver``, so the server listens on port 53 (root only).
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Mapping
from types import TracebackType

ADDRESS = "127.0.0.153"
"""Not 127.0.0.53 (systemd-resolved's) nor 127.0.0.1 (the attacks' servers)."""
TYPES = {1: "A", 28: "AAAA"}


def resolv_conf() -> str:
    """The ``/etc/resolv.conf`` that sends every lookup here, once, quickly."""
    return f"nameserver {ADDRESS}\noptions attempts:1 timeout:2\n"


class Standin:
    """The server, run in a thread for the length of a ``with`` block."""

    def __init__(self, table: Mapping[str, str]) -> None:
        self.table = {name.lower().rstrip("."): ip for name, ip in table.items()}
        self.queries: list[tuple[str, str]] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind((ADDRESS, 53))
        self._sock.settimeout(0.2)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> Standin:
        self._thread.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._done.set()
        self._thread.join()
        self._sock.close()

    def answer(self, table: Mapping[str, str]) -> None:
        """Answer each name of ``table`` with its IPv4 address from now on."""
        self.table.update({name.lower().rstrip("."): ip for name, ip in table.items()})

    def names(self) -> list[str]:
        """The names asked about, in order, once each."""
        return list(dict.fromkeys(name for name, _ in self.queries))

    def _serve(self) -> None:
        while not self._done.is_set():
            try:
                packet, peer = self._sock.recvfrom(512)
            except TimeoutError:
                continue
            answer = self._answer(packet)
            if answer is not None:
                self._sock.sendto(answer, peer)

    def _answer(self, packet: bytes) -> bytes | None:
        if len(packet) < 12:
            return None
        ident, _flags, qdcount = struct.unpack("!HHH", packet[:6])
        if qdcount != 1:
            return None
        labels, at = [], 12
        while at < len(packet) and packet[at]:
            size = packet[at]
            labels.append(packet[at + 1 : at + 1 + size].decode("ascii", "replace"))
            at += 1 + size
        question = packet[12 : at + 5]
        qtype = struct.unpack("!H", packet[at + 1 : at + 3])[0]
        name = ".".join(labels).lower()
        self.queries.append((name, TYPES.get(qtype, str(qtype))))
        ip = self.table.get(name)
        if ip is None:
            return struct.pack("!HHHHHH", ident, 0x8183, 1, 0, 0, 0) + question  # NXDOMAIN
        if qtype != 1:
            return struct.pack("!HHHHHH", ident, 0x8180, 1, 0, 0, 0) + question  # no data
        record = b"\xc0\x0c" + struct.pack("!HHIH", 1, 1, 5, 4) + socket.inet_aton(ip)
        return struct.pack("!HHHHHH", ident, 0x8180, 1, 1, 0, 0) + question + record
