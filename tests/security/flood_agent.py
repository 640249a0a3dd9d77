"""An ACP agent (stdlib only, real stdio) that turns its requests against the
audit log and the disk, then reports what it was answered.

    python flood_agent.py connects N | hugehost N | titles N | write MB | fork N

``connects``: N CONNECTs to a refused host through the proxy, on 4 threads;
``hugehost``: N CONNECTs whose host is 60 KB, on 8 threads, then one to the
allowed ``$ALLOWED`` (host:port); ``titles``: N permission requests with a
30 KB title (each allowed, until the log is full); ``write``: MB megabytes
into the workspace, one each 0.2 s, until ``stop`` appears; ``fork``: N
children (each sleeping), and at the first refusal it dies saying so the way
many programs do, ``BlockingIOError: Resource temporarily unavailable``.
Each writes ``answers.json`` in its working directory: how many of its
requests were allowed and refused, as it saw them.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time
from typing import Any

_ids = iter(range(1000, 10**9))
_lock = threading.Lock()


def send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
    sys.stdout.flush()


def connect(target: str) -> str:
    """The proxy's status line for ``CONNECT target``."""
    try:
        with socket.create_connection(("127.0.0.1", 3128), timeout=20) as s:
            if len(target) < 1024:
                s.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
            else:  # the head must fit: HTTP/1.0 needs no Host header
                s.sendall(f"CONNECT {target} HTTP/1.0\r\n\r\n".encode())
            data = b""
            while b"\r\n" not in data:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            return data.split(b"\r\n", 1)[0].decode(errors="replace")
    except OSError as e:
        return f"error {e}"


def connects(targets: list[str], threads: int, answers: dict[str, int]) -> None:
    def work(mine: list[str]) -> None:
        for target in mine:
            line = connect(target)
            with _lock:
                key = "allowed" if " 200 " in line else "refused" if line[9:12] in ("403", "400", "503") else "other"
                answers[key] += 1

    pool = [threading.Thread(target=work, args=(targets[i::threads],)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()


def titles(count: int, session: str, answers: dict[str, int], replies: Any) -> None:
    for n in range(count):
        ident = next(_ids)
        send({"id": ident, "method": "session/request_permission", "params": {
            "sessionId": session,
            "toolCall": {"toolCallId": f"t{n}", "title": f"read {n} " + "x" * 30_000, "kind": "read"},
            "options": [{"optionId": "ok", "name": "Allow", "kind": "allow_once"},
                        {"optionId": "no", "name": "Reject", "kind": "reject_once"}],
        }})  # fmt: skip
        reply = replies(ident)
        outcome = (reply.get("result") or {}).get("outcome") or {}
        answers["allowed" if outcome.get("optionId") == "ok" else "refused"] += 1


def main() -> None:
    kind, amount = sys.argv[1], int(sys.argv[2])
    cwd, session = ".", "s1"
    answers = {"allowed": 0, "refused": 0, "other": 0}
    lines = iter(sys.stdin)

    def replies(ident: int) -> dict[str, Any]:
        for line in lines:
            message = json.loads(line)
            if message.get("id") == ident and "method" not in message:
                return dict(message)
        raise SystemExit("stdin closed")

    for line in lines:
        message = json.loads(line)
        method, ident = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize":
            send({"id": ident, "result": {"protocolVersion": 1, "agentCapabilities": {}}})
        elif method == "session/new":
            cwd = params.get("cwd", ".")
            send({"id": ident, "result": {"sessionId": session}})
        elif method == "session/prompt":
            if kind == "connects":
                connects(["refused.example:443"] * amount, 4, answers)
            elif kind == "hugehost":
                connects([("h" * 60_000) + ":443"] * amount, 8, answers)
                connects([os.environ["ALLOWED"]], 1, answers)
            elif kind == "titles":
                titles(amount, session, answers, replies)
            elif kind == "fork":
                for _ in range(amount):
                    try:
                        pid = os.fork()
                    except OSError as e:
                        print(f"{type(e).__name__}: {e.strerror}", file=sys.stderr)
                        sys.exit(1)
                    if pid == 0:
                        time.sleep(60)
                        os._exit(0)
            elif kind == "write":
                with open(os.path.join(cwd, "big.bin"), "wb") as out:
                    for _ in range(amount):
                        if os.path.exists(os.path.join(cwd, "stop")):
                            break
                        out.write(b"\0" * (1 << 20))
                        out.flush()
                        time.sleep(0.2)
            with open(os.path.join(cwd, "answers.json"), "w") as report:
                json.dump(answers, report)
            send({"id": ident, "result": {"stopReason": "end_turn"}})
        elif ident is not None:
            send({"id": ident, "result": None})


if __name__ == "__main__":
    main()
