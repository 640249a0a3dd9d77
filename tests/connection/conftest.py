"""Run a real peer process over real pipes against a real `Connection`."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from governor.acp.connection import DEFAULT_NOTIFICATIONS, Connection
from governor.acp.dispatch import HandlerTable

PEERS = Path(__file__).parent / "peers"
PEER_DEADLINE = 30.0
"""Only a guard against a hang turning into a stuck CI job; never an assertion on speed."""


@dataclass
class Run:
    """What happened: what the peer read from its stdin, what we were told."""

    read: list[dict[str, Any]]
    notifications: list[tuple[str, Any]] = field(default_factory=list)
    connection: Connection | None = None
    returncode: int | None = None

    @property
    def responses(self) -> list[dict[str, Any]]:
        """The responses the peer got to its requests, in the order it read them."""
        return [
            entry["line"]
            for entry in self.read
            if isinstance(entry.get("line"), dict) and "method" not in entry["line"]
        ]

    def answer(self, id: Any) -> dict[str, Any]:
        """The one response the peer got for its request `id`."""
        found = [r for r in self.responses if r.get("id") == id and type(r.get("id")) is type(id)]
        assert len(found) == 1, f"expected one answer to {id!r}, got {found!r}"
        return found[0]


Body = Callable[[Connection], Awaitable[None]]


@pytest.fixture
def peer(tmp_path: Path) -> Callable[..., Awaitable[Run]]:
    """``await peer(steps, handlers, body=..., ...)``: run the scripted peer to its end.

    `body` runs once `serve` is up; with ``kill=True`` the peer is killed after
    the body instead of being waited for.
    """

    async def run(
        steps: list[dict[str, Any]],
        handlers: HandlerTable | None = None,
        *,
        body: Body | None = None,
        on_notification: Callable[[str, Any], Any] | None = None,
        notifications: Collection[str] = DEFAULT_NOTIFICATIONS,
        kill: bool = False,
        **options: Any,
    ) -> Run:
        script = tmp_path / "script.json"
        script.write_text(json.dumps(steps))
        log = tmp_path / "read.jsonl"
        log.write_text("")
        result = Run(read=[])

        def remember(method: str, params: Any) -> None:
            result.notifications.append((method, params))

        argv = [sys.executable, str(PEERS / "scripted.py"), str(script), str(log)]
        with trio.fail_after(PEER_DEADLINE):
            async with trio.open_nursery() as nursery:
                process: trio.Process = await nursery.start(
                    partial(
                        trio.run_process,
                        argv,
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        check=False,
                    )
                )
                connection = Connection.from_process(process, **options)
                result.connection = connection
                await nursery.start(
                    partial(
                        connection.serve,
                        handlers or {},
                        on_notification or remember,
                        notifications=notifications,
                    )
                )
                if body is not None:
                    await body(connection)
                if kill:
                    nursery.cancel_scope.cancel()
        result.returncode = process.returncode
        if not kill:
            assert process.returncode == 0, f"the peer failed: {connection.stderr_tail}"
        result.read = [json.loads(line) for line in log.read_text().splitlines()]
        return result

    return run
