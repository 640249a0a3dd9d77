"""An ACP agent that replays a fuzz script at the governor (stdlib only).

    python fuzz_agent.py SCRIPT SIDE_FILE

It answers ``initialize`` and ``session/new`` like any agent. On
``session/prompt`` it plays SCRIPT (written by `fuzz_corpus.write_script`), op by op:

- ``{"op": "send", "size": N}`` then N bytes: written to stdout as they are
  (a batch of lines, good and bad);
- ``{"op": "big", "head", "size", "tail"}``: one line of ``head``, `size`
  bytes of ``x`` and ``tail``, written in 1 MiB pieces;
- ``{"op": "await", "id": X}``: wait for the answer to request X (the probe
  that ends each batch: the governor has read the batch and still serves);
- ``{"op": "end", "answers": N}``: wait until N answers with an id have come.

Then it ends its turn (``end_turn``, final message ``fuzz: done``) and sends
three writes *after* its prompt result, which must never happen.

A reader thread takes everything the governor sends, so the governor's writes
never wait on this agent; every line that is not one of the governor's own
requests goes to SIDE_FILE as received, for the test to check.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

# The loop every stdlib agent shares, by path: it runs in sandboxes (stdlib only).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "governor" / "agents"))
from stdio_peer import Peer, parse

WAIT = 60.0
"""Only a guard: the test fails on a missing answer; this agent must not hang forever."""


class Agent:
    def __init__(self, script: str, side: str) -> None:
        self.script = script
        self.side = open(side, "wb")  # noqa: SIM115 - for the whole run
        self.peer = Peer()
        self.answered: dict[str, int] = {}
        self.answers = 0
        self.changed = threading.Condition()
        self.prompt: Any = None
        self.session = "fuzz-session"
        self.cwd = os.getcwd()
        self.problems: list[str] = []

    def send(self, data: bytes) -> None:
        self.peer.write(data)

    def reply(self, rid: Any, result: Any) -> None:
        self.peer.respond(rid, result)

    # -- the reader thread --

    def read(self) -> None:
        for line in self.peer.lines():
            message = parse(line)
            if message is None:
                self.side.write(line)
                continue
            method = message.get("method")
            if method is not None and "id" in message:
                self.request(message)
                continue
            self.side.write(line)
            if method is None and message.get("id") is not None:
                key = json.dumps(message["id"])
                with self.changed:
                    self.answered[key] = self.answered.get(key, 0) + 1
                    self.answers += 1
                    self.changed.notify_all()
        with self.changed:
            self.answers = -1  # stdin ended
            self.changed.notify_all()

    def request(self, message: dict[str, Any]) -> None:
        method = message["method"]
        params = message.get("params") or {}
        if method == "initialize":
            self.reply(message["id"], {"protocolVersion": 1, "authMethods": [],
                                       "agentInfo": {"name": "fuzz", "version": "1"}})
        elif method == "session/new":
            self.cwd = params.get("cwd") or self.cwd
            self.reply(message["id"], {"sessionId": self.session})
        elif method == "session/prompt":
            with self.changed:
                self.prompt = message["id"]
                self.changed.notify_all()
        else:
            self.peer.fail(message["id"], -32601, "no")

    # -- the main thread --

    def wait(self, done: Any, what: str) -> bool:
        with self.changed:
            if not self.changed.wait_for(lambda: done() or self.answers < 0, timeout=WAIT) or not done():
                self.problems.append(f"gave up waiting for {what}")
                return False
        return True

    def play(self) -> None:
        with open(self.script, "rb") as f:
            while header := f.readline():
                op = json.loads(header)
                if op["op"] == "send":
                    self.send(f.read(op["size"]))
                elif op["op"] == "big":
                    self.big(op["head"].encode(), op["size"], op["tail"].encode())
                elif op["op"] == "await":
                    key = json.dumps(op["id"])
                    if not self.wait(lambda key=key: key in self.answered, f"the answer to {key}"):
                        return
                elif op["op"] == "end":
                    self.wait(lambda n=op["answers"]: self.answers >= n, f"{op['answers']} answers")

    def big(self, head: bytes, size: int, tail: bytes) -> None:
        piece = b"x" * (1 << 20)
        whole, rest = divmod(size, len(piece))
        self.peer.write(head, *[piece] * whole, piece[:rest], tail + b"\n")

    def run(self) -> None:
        reader = threading.Thread(target=self.read, daemon=True)
        reader.start()
        if not self.wait(lambda: self.prompt is not None, "the prompt"):
            return
        self.play()
        text = "fuzz: done" if not self.problems else "FAILED: " + "; ".join(self.problems)
        update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
        self.peer.notify("session/update", {"sessionId": self.session, "update": update})
        self.reply(self.prompt, {"stopReason": "end_turn"})
        for n in range(3):  # after the prompt result: the turn is over
            path = os.path.join(self.cwd, f"after-{n}.txt")
            self.peer.send({"id": f"after-{n}", "method": "fs/write_text_file",
                            "params": {"sessionId": self.session, "path": path, "content": "late\n"}})
        reader.join(timeout=WAIT)
        self.side.close()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: fuzz_agent.py SCRIPT SIDE_FILE", file=sys.stderr)
        return 2
    Agent(argv[0], argv[1]).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
