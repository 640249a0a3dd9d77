"""Every accept loop of the governor: one function, so none of them ends the attempt
when the agent floods it.

Rules of this file: a listening socket's ``accept`` that fails for want of
descriptors or memory (``EMFILE``, ``ENFILE``, ``ENOMEM``, ``ENOBUFS``) waits
and tries again, as trio's own listeners do, and a connection that died
before it was taken (``ECONNABORTED``, ``EPROTO``, ``EPERM``) is skipped. Why:
an agent that holds a thousand connections to a relay socket or to the proxy
would otherwise raise out of the accept loop, through its nursery, and end the
governor with a traceback, no outcome and no end record (issue 35, finding 7).
What it holds is bounded elsewhere (the proxy's `ProxyLimits.connections`, the
relay's sessions per server); this loop only never dies of it.

`governor.sandbox.host.descriptors.raise_descriptor_limit` is the other half: the
governor's soft limit raised to its hard one at start.
"""

from __future__ import annotations

import errno
import socket
from collections.abc import Callable
from typing import Final

import structlog
import trio

log = structlog.get_logger("governor.sandbox.net.accepting")

STARVED: Final = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
"""Errors that say the process (or the machine) is out of descriptors or memory:
waited out, never raised."""
GONE: Final = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM})
"""Errors that say the one connection died before it was taken: skipped."""
STARVED_WAIT: Final = 0.1
"""Seconds between tries while starved (trio's own listeners wait as long)."""


async def accept_forever(
    listener: socket.socket,
    take: Callable[[socket.socket], None],
    *,
    starved: Callable[[OSError], None] | None = None,
) -> None:
    """Accept on ``listener`` until cancelled, handing each connection to
    ``take`` (which starts its task; it must not block). ``starved`` is told
    once per spell of running out of descriptors or memory (a notice). The
    listener is closed when the loop ends."""
    listener.setblocking(False)
    short = False
    with listener:
        while True:
            try:
                sock, _ = listener.accept()
            except BlockingIOError:
                await trio.lowlevel.wait_readable(listener)
                continue
            except OSError as e:
                if e.errno in GONE:
                    continue
                if e.errno not in STARVED:
                    raise
                if not short:
                    short = True
                    log.warning("accept starved", errno=errno.errorcode.get(e.errno or 0, "?"))
                    if starved is not None:
                        starved(e)
                await trio.sleep(STARVED_WAIT)
                continue
            short = False
            take(sock)
