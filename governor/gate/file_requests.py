"""``fs/read_text_file`` and ``fs/write_text_file``: governed, then carried out.

Rules of this file:

- **Decided on the resolved path, and on the name given**: a symlink's own
  name may be hidden (or protected) even when its target is not; the first
  refusal of the two is the decision.
- **Governed once, then acted on** (`governor.gate.gatekeeper.Gate.govern`): nothing is
  read or written before the decision is recorded, and a refused request
  touches no file.
- **What was carried out is evidence** (`governor.ending.attribution.Carried`): each
  read path and each write's (size, mtime) right after it, which explain the
  tool calls the agent reports and the workspace's changes at the end.
- The file system itself (symlink-safe opening, atomic writes, limits) is
  `governor.gate.file_access`'s; a small read is answered in the same pass, a larger
  one and every write in a worker thread.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Awaitable
from typing import Any, Final, cast

import trio

from governor.acp.dispatch import Route, RpcError
from governor.acp.jsonrpc import INVALID_PARAMS
from governor.acp.models import schema
from governor.audit import effects
from governor.audit.log import AuditUnavailable
from governor.boundary.secrets import Masker
from governor.confine.workspace import content_digest, seen
from governor.gate.file_access import (
    NOT_KEPT,
    FileAccessError,
    open_text,
    read_opened,
    read_text,
    resolve,
    write_text,
)
from governor.gate.handler_seam import Governs
from governor.gate.ruling import REFUSED, Ruling, then
from governor.policies.actions import ReadFile, WriteFile
from governor.policies.decide import decide
from governor.policies.paths import normalize

INLINE_READ_BYTES: Final = 256 * 1024
"""Files up to this size are read on the trio thread; larger ones in a worker."""


class FileRequests:
    """The agent's fs requests, decided by one gate."""

    def __init__(self, gate: Governs) -> None:
        self.gate = gate

    def routes(self) -> dict[str, Route]:
        """The fs methods' entries in the gate's handler table."""
        return {
            "fs/read_text_file": Route(schema.ReadTextFileRequest, self.read_text_file),
            "fs/write_text_file": Route(schema.WriteTextFileRequest, self.write_text_file),
        }

    def read_text_file(
        self, req: schema.ReadTextFileRequest, *, via: str | None = None
    ) -> schema.ReadTextFileResponse | Awaitable[schema.ReadTextFileResponse]:
        """A governed read: resolved, inside the roots, not hidden. ``via`` names
        the way it came when not ACP (``mcp:governor``: `governor.mcp.own_tools`),
        in its record's subject."""
        gate = self.gate
        gate.check_session(req.session_id)
        path = _resolved(req.path)
        decision = decide(ReadFile(path), gate.policy)
        if path != req.path and decision.allowed:
            # A symlink's own name may be hidden even when its target is not.
            first = decide(ReadFile(normalize(req.path)), gate.policy)
            decision = first if not first.allowed else decision
        subject = {"path": req.path} | ({"resolved": path} if path != req.path else {})
        if via is not None:
            subject["via"] = via
        ruling = gate.govern("read", subject, path, decision, {})
        return cast(
            schema.ReadTextFileResponse | Awaitable[schema.ReadTextFileResponse],
            then(ruling, lambda r: self._read(req, path, r)),
        )

    def _read(
        self, req: schema.ReadTextFileRequest, path: str, ruling: Ruling
    ) -> schema.ReadTextFileResponse | Awaitable[schema.ReadTextFileResponse]:
        """The file's text once the read is allowed: a small file read here and now,
        a larger one in a worker thread (the answer then comes later)."""
        if not ruling.allowed:
            raise RpcError(REFUSED, f"Refused by the governor: {ruling.reason}")
        self.gate.carried.read_paths.add(normalize(req.path))
        try:
            opened = open_text(path, req.line, req.limit)
            if opened.size > INLINE_READ_BYTES:
                # Read again by the worker: no descriptor waits in a task that
                # may never start.
                opened.close()
                return _read_in_worker(path, req)
            content = read_opened(opened, req.line, req.limit)
        except FileAccessError as e:
            raise RpcError(e.code, str(e)) from None
        return schema.ReadTextFileResponse(content=content)

    def write_text_file(
        self, req: schema.WriteTextFileRequest, *, via: str | None = None
    ) -> Awaitable[schema.WriteTextFileResponse]:
        """A governed write: capability, roots, protected paths; symlink-safe and
        atomic. ``via`` as for `read_text_file`."""
        gate = self.gate
        gate.check_session(req.session_id)
        path = _resolved(req.path)
        decision = decide(WriteFile(path), gate.policy)
        if path != req.path and decision.allowed:
            first = decide(WriteFile(normalize(req.path)), gate.policy)
            decision = first if not first.allowed else decision
        subject = {"path": req.path, "bytes": len(req.content.encode())} | (
            {"resolved": path} if path != req.path else {}
        )
        if via is not None:
            subject["via"] = via
        ruling = gate.govern("write", subject, path, decision, {"content": req.content})
        return cast(
            Awaitable[schema.WriteTextFileResponse],
            then(ruling, lambda r: self._write(req, path, r)),
        )

    async def _write(
        self, req: schema.WriteTextFileRequest, path: str, ruling: Ruling
    ) -> schema.WriteTextFileResponse:
        if not ruling.allowed:
            raise RpcError(REFUSED, f"Refused by the governor: {ruling.reason}")
        masker = self.gate.audit.masker
        try:
            diff = await trio.to_thread.run_sync(
                functools.partial(_write_and_diff, path, req.content, ruling.seq, masker)
            )
        except FileAccessError as e:
            raise RpcError(e.code, str(e)) from None
        with contextlib.suppress(AuditUnavailable):  # a log that is full or broken refused all since
            self.gate.audit.append("diff", diff, thin=False)
        try:
            st = os.stat(path)
            self.gate.carried.written[path] = seen(st)._replace(
                digest=content_digest(req.content.encode())
            )
        except OSError:
            pass
        return schema.WriteTextFileResponse()


def _write_and_diff(path: str, content: str, decision: int | None, masker: Masker) -> dict[str, Any]:
    """The write, then its ``diff`` record's fields (masked and bounded:
    `governor.audit.effects`), in the worker thread: masking and diffing a large file
    must not hold up the attempt's other requests."""
    before = write_text(path, content, before=effects.DIFF_INPUT_BYTES)
    if before == NOT_KEPT:
        return {"subject": {"path": path}, "decision": decision,
                "diff": "(not diffed: the file before was not text, or too large)"}  # fmt: skip
    fields = effects.diff_fields(path, decision, before, content, masker)
    return {k: v for k, v in fields.items() if v is not None}


async def _read_in_worker(
    path: str, req: schema.ReadTextFileRequest
) -> schema.ReadTextFileResponse:
    try:
        content = await trio.to_thread.run_sync(read_text, path, req.line, req.limit)
    except FileAccessError as e:
        raise RpcError(e.code, str(e)) from None
    return schema.ReadTextFileResponse(content=content)


def _resolved(path: str) -> str:
    try:
        return resolve(path)
    except FileAccessError as e:
        raise RpcError(INVALID_PARAMS, f"Invalid params: {e}") from None
