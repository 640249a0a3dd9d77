"""A plain program as the agent (``kind = "command"``): the prompt on its stdin,
the newest bytes of its stdout and stderr kept for its judgement (its exit
status, its last words, the workspace's diff).

A program that writes without end cannot grow the governor: each stream keeps
its newest `OUTPUT_BYTES`, the older ones dropped as they come.
"""

from __future__ import annotations

import contextlib
from typing import Any, Final

import trio

OUTPUT_BYTES: Final = 2**20
"""The newest bytes of a plain program's stdout (and of its stderr) kept."""


async def converse(process: Any, prompt: bytes, stdout: bytearray, stderr: bytearray) -> None:
    """Send ``prompt`` to ``process``'s stdin and close it, while its stdout and
    stderr are read onto ``stdout`` and ``stderr`` (their newest bytes), until
    both end and it exits. Cancelled, what was read so far stays in both."""

    async def feed() -> None:
        assert process.stdin is not None
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await process.stdin.send_all(prompt)
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await process.stdin.aclose()

    async def drain(stream: Any, into: bytearray) -> None:
        while chunk := await stream.receive_some(65536):
            into.extend(chunk)
            if len(into) > OUTPUT_BYTES:
                del into[: len(into) - OUTPUT_BYTES]

    async with trio.open_nursery() as nursery:
        nursery.start_soon(feed)
        nursery.start_soon(drain, process.stdout, stdout)
        nursery.start_soon(drain, process.stderr, stderr)
    await process.wait()
