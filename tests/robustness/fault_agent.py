"""An ACP agent that misbehaves on purpose, one way per mode (stdlib only).

    python fault_agent.py MODE SIDE_FILE MARKER [ARG]

It answers ``initialize`` and ``session/new`` like any agent; on
``session/prompt`` it does what MODE says. Everything it receives in answer to
its own requests goes to SIDE_FILE, one JSON line each, flushed at once, so a
test can compare what the agent was told with what the audit log holds even
when the governor dies mid-run. MARKER is only there to be found in
``/proc/*/cmdline`` (of this process, its children and the daemon it forks).

Modes:

- ``steady [N]``: starts a child process (MARKER in its argv), then N rounds
  (0: forever) of a permission ask for an edit and the write of
  ``steady-I.txt``; stops after 20 refusals in a row. Stubborn: when its stdin
  ends mid-turn it does not exit, it waits to be killed;
- ``exit-mid-request``: starts a long command in a terminal, asks to wait for
  it and to read a file, and exits without reading any answer;
- ``no-read [N]``: sends N reads (default 300) of ``big.txt`` and never reads
  stdin again;
- ``flood``: writes ``session/update`` notifications (and stderr lines) forever;
- ``close-stdout``: closes its stdout and goes on running;
- ``ignore-term``: ignores SIGTERM and, after its turn, the end of its stdin;
- ``daemon``: forks a daemon (new session, new argv with MARKER) that sleeps
  ten minutes, then ends its turn;
- ``garbage N[/K]``: sends N lines that are not JSON-RPC (0: forever), with a
  harmless ``session/update`` after every K of them if K is given, then ends
  its turn;
- ``after-turn``: writes ``during.txt`` through the client, then sends its
  prompt result and, in the same write, three writes of ``after-I.txt``;
- ``terminals``: runs ``touch ran-1`` in a terminal, waits for the file
  ``go`` in its cwd, then runs ``touch ran-2``; each answer goes to SIDE_FILE.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# The loop every stdlib agent shares, by path: it runs in sandboxes (stdlib only).
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "governor" / "agents"))
from stdio_peer import Closed, Peer


class FaultPeer(Peer):
    """A cancel that comes while an answer is awaited goes to SIDE_FILE."""

    def __init__(self, agent: Agent) -> None:
        super().__init__(first_id=1000)
        self.agent = agent

    def cancel_seen(self, message: dict[str, Any]) -> None:
        self.agent.note({"kind": "session/cancel"})


class Agent:
    def __init__(self, mode: str, side: str, marker: str, arg: str | None) -> None:
        self.mode = mode
        self.side = open(side, "a", encoding="utf-8")  # noqa: SIM115 - for the whole run
        self.marker = marker
        self.arg = arg
        self.peer = FaultPeer(self)
        self.session = "fault-session"
        self.cwd = os.getcwd()
        self.stubborn = False

    # -- the wire --

    def send(self, message: dict[str, Any]) -> None:
        self.peer.send(message)

    def receive(self) -> dict[str, Any] | None:
        return self.peer.receive()

    def note(self, entry: dict[str, Any]) -> None:
        self.side.write(json.dumps(entry) + "\n")
        self.side.flush()

    def ask(self, method: str, params: dict[str, Any], *, wait: bool = True) -> dict[str, Any]:
        rid = self.peer.ask(method, {"sessionId": self.session, **params})
        if not wait:
            return {}
        try:
            return self.peer.wait(rid)
        except Closed:
            while self.stubborn:
                time.sleep(60)
            raise

    def update(self, body: dict[str, Any]) -> None:
        self.send(
            {"method": "session/update", "params": {"sessionId": self.session, "update": body}}
        )

    # -- the lifecycle --

    def serve(self) -> None:
        if self.mode == "ignore-term":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while (message := self.receive()) is not None:
            method = message.get("method")
            if "id" not in message or method is None:
                continue
            params = message.get("params") or {}
            if method == "initialize":
                result: dict[str, Any] = {"protocolVersion": 1, "authMethods": []}
            elif method == "session/new":
                self.cwd = params.get("cwd") or self.cwd
                result = {"sessionId": self.session}
            elif method == "session/prompt":
                stop = getattr(self, "turn_" + self.mode.replace("-", "_"))()
                result = {"stopReason": stop}
            else:
                self.send({"id": message["id"], "error": {"code": -32601, "message": "no"}})
                continue
            if method == "session/prompt" and self.mode == "after-turn":
                self.late(message["id"], result)
                continue
            self.send({"id": message["id"], "result": result})
            if method == "session/prompt" and self.mode == "ignore-term":
                while True:  # deaf to the end of stdin and to SIGTERM
                    time.sleep(60)

    def late(self, prompt_id: Any, result: dict[str, Any]) -> None:
        lines = [{"jsonrpc": "2.0", "id": prompt_id, "result": result}]
        for i in range(3):
            path = os.path.join(self.cwd, f"after-{i}.txt")
            lines.append({"jsonrpc": "2.0", "id": f"after-{i}", "method": "fs/write_text_file",
                          "params": {"sessionId": self.session, "path": path, "content": "late\n"}})
        self.peer.write(b"".join(json.dumps(m).encode() + b"\n" for m in lines))
        while (message := self.receive()) is not None:
            if str(message.get("id", "")).startswith("after-"):
                self.note({"kind": "late", "answer": message})

    def turn_steady(self) -> str:
        subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(600)", self.marker, "child"],
            stdin=subprocess.DEVNULL,
        )
        self.stubborn = True
        rounds = int(self.arg or 0)
        refused_in_a_row = 0
        i = 0
        while rounds == 0 or i < rounds:
            path = os.path.join(self.cwd, f"steady-{i}.txt")
            answer = self.ask(
                "session/request_permission",
                {
                    "toolCall": {
                        "toolCallId": f"steady-{i}",
                        "title": f"Write steady-{i}.txt",
                        "kind": "edit",
                        "locations": [{"path": path}],
                    },
                    "options": [
                        {"optionId": "yes", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "no", "name": "Reject", "kind": "reject_once"},
                    ],
                },
            )
            outcome = (answer.get("result") or {}).get("outcome") or {}
            allowed = outcome.get("optionId") == "yes"
            self.note({"i": i, "kind": "permission", "allowed": allowed, "answer": answer})
            write = self.ask("fs/write_text_file", {"path": path, "content": f"{i}\n"})
            self.note({"i": i, "kind": "write", "allowed": "result" in write, "answer": write})
            refused_in_a_row = 0 if "result" in write else refused_in_a_row + 1
            if refused_in_a_row >= 20:
                break
            i += 1
        return "end_turn"

    def turn_exit_mid_request(self) -> str:
        created = self.ask(
            "terminal/create",
            {"command": sys.executable, "args": ["-c", "import time; time.sleep(120)", self.marker]},
        )
        self.note({"kind": "terminal", "answer": created})
        terminal = (created.get("result") or {}).get("terminalId", "none")
        self.ask("terminal/wait_for_exit", {"terminalId": terminal}, wait=False)
        self.ask("fs/read_text_file", {"path": os.path.join(self.cwd, "big.txt")}, wait=False)
        os._exit(3)

    def turn_no_read(self) -> str:
        count = int(self.arg or 300)
        for _ in range(count):
            self.ask("fs/read_text_file", {"path": os.path.join(self.cwd, "big.txt")}, wait=False)
        self.note({"kind": "sent", "requests": count})
        while True:
            time.sleep(60)

    def turn_flood(self) -> str:
        body = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "t" * 200}}
        line = json.dumps(
            {"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": self.session, "update": body}},
            separators=(",", ":"),
        ).encode() + b"\n"
        chunk = line * 200
        noise = b"stderr flood " * 40 + b"\n"
        while True:
            self.peer.write(chunk)
            os.write(2, noise)

    def turn_close_stdout(self) -> str:
        self.peer.flush()
        os.close(1)
        self.note({"kind": "closed stdout"})
        while True:
            time.sleep(60)

    def turn_ignore_term(self) -> str:
        self.note({"kind": "ignoring SIGTERM"})
        return "end_turn"

    def turn_daemon(self) -> str:
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                os.execv(
                    sys.executable,
                    [sys.executable, "-c", "import time; time.sleep(600)", self.marker, "daemon"],
                )
            os._exit(0)
        os.wait()
        self.note({"kind": "daemon forked"})
        self.update(
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done"}}
        )
        return "end_turn"

    def turn_garbage(self) -> str:
        count, _, every = (self.arg or "0").partition("/")
        total, k = int(count), int(every or 0)
        junk = [b"this is not json\n", b"\xff\xfe not utf-8\n", b"[1,2,3]\n", b'{"jsonrpc":"2.0"}\n']
        body = {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "."}}
        good = json.dumps(
            {"jsonrpc": "2.0", "method": "session/update",
             "params": {"sessionId": self.session, "update": body}}
        ).encode() + b"\n"
        sent = 0
        try:
            while total == 0 or sent < total:
                self.peer.write(junk[sent % len(junk)], flush=False)
                sent += 1
                if k and sent % k == 0:
                    self.peer.write(good, flush=False)
                if sent % 100 == 0:
                    self.peer.flush()
            self.peer.flush()
        except BrokenPipeError:
            os._exit(0)
        self.update(
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done"}}
        )
        return "end_turn"

    def turn_after_turn(self) -> str:
        during = self.ask(
            "fs/write_text_file", {"path": os.path.join(self.cwd, "during.txt"), "content": "ok\n"}
        )
        self.note({"kind": "during", "answer": during})
        return "end_turn"

    def turn_terminals(self) -> str:
        for n in (1, 2):
            if n == 2:
                while not os.path.exists(os.path.join(self.cwd, "go")):
                    time.sleep(0.05)
            created = self.ask(
                "terminal/create", {"command": "touch", "args": [f"ran-{n}"], "cwd": self.cwd}
            )
            self.note({"n": n, "kind": "terminal", "answer": created})
            terminal = (created.get("result") or {}).get("terminalId")
            if terminal:
                self.ask("terminal/wait_for_exit", {"terminalId": terminal})
        self.update(
            {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "done"}}
        )
        return "end_turn"


def main(argv: list[str]) -> int:
    if len(argv) not in (3, 4):
        print("usage: fault_agent.py MODE SIDE_FILE MARKER [ARG]", file=sys.stderr)
        return 2
    Agent(argv[0], argv[1], argv[2], argv[3] if len(argv) == 4 else None).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
