"""The MCP server an agent is given in place of each real one (stdlib only).

    python3 -I -S mcp_shim.py SOCKET

The agent spawns this as a stdio MCP server, inside its own sandbox: it
connects to the governor's Unix socket SOCKET (bound into that sandbox) and
copies bytes both ways -- the agent's stdin to the socket, the socket to the
agent's stdout -- and nothing else. Every decision is the governor's, on its
side of the socket; the shim holds no policy, no credential and no server, so
an agent that runs it by hand, or a copy of its own, gets no more than the
socket gives anyone.

Its first line on the socket is the attempt's token, from
``ACP_GOVERNOR_MCP_TOKEN`` (its entry's ``env`` in ``session/new``): the
governor closes, unanswered, a connection that does not say it, so a socket of
another attempt's, found by hand, gives nothing. A socket path longer than
``bind`` takes is reached through its folder's descriptor.

It exits when the governor closes the socket (the session is over), or when
the agent closes its stdin and the governor has closed its side in turn. A
socket it cannot reach, or no token, is one line on stderr and exit status 2,
which agents show as a server that failed to start.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading

CHUNK = 65536
TOKEN_VARIABLE = "ACP_GOVERNOR_MCP_TOKEN"
TOKEN_PREFIX = b"acp-governor-token "
UNIX_PATH_MAX = 107


def _connect(sock: socket.socket, path: str) -> None:
    """Connect to ``path``, through its folder's descriptor when it is longer
    than a Unix socket path may be."""
    if len(os.fsencode(path)) <= UNIX_PATH_MAX:
        sock.connect(path)
        return
    fd = os.open(os.path.dirname(path), os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        sock.connect(f"/proc/self/fd/{fd}/{os.path.basename(path)}")
    finally:
        os.close(fd)


def _to_socket(sock: socket.socket) -> None:
    """stdin -> socket; on stdin's end, half-close so the governor sees it."""
    try:
        while True:
            data = os.read(0, CHUNK)
            if not data:
                break
            sock.sendall(data)
    except OSError:
        pass
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_WR)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        sys.stderr.write("usage: mcp_shim.py SOCKET\n")
        return 2
    token = os.environ.get(TOKEN_VARIABLE, "")
    if not token:
        sys.stderr.write(
            f"mcp_shim: {TOKEN_VARIABLE} is not set (the agent did not pass its MCP server "
            "entry's env): the governor refuses a connection without it\n"
        )
        return 2
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        _connect(sock, argv[1])
        sock.sendall(TOKEN_PREFIX + token.encode() + b"\n")
    except OSError as e:
        sys.stderr.write(f"mcp_shim: cannot reach the governor at {argv[1]}: {e.strerror or e}\n")
        return 2
    threading.Thread(target=_to_socket, args=(sock,), daemon=True).start()
    try:
        while True:
            data = sock.recv(CHUNK)
            if not data:
                break
            view = memoryview(data)
            while view:
                view = view[os.write(1, view) :]
    except OSError:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
