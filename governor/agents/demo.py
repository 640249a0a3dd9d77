"""The demo agent: a scripted ACP agent that needs no account and no network.

It speaks ACP v1 over stdio (newline-delimited JSON-RPC 2.0) with nothing but
the standard library, so it runs anywhere the governor does, sandboxed or not.
Over one turn it does what real agents do, good and bad, so that one run shows
every part of the governor:

1. announces a plan;
2. asks permission to write ``hello.py`` and writes it through the client;
3. reads it back through the client;
4. asks permission to run it and runs it in a client terminal;
5. asks for something the default policy refuses (a git hook);
6. writes ``NOTES.md`` *itself*, without asking (an unasked change);
7. ends the turn with a summary.

Run it as ``python governor/agents/demo.py`` (stdlib only: a sandbox needs just this file
and its sibling ``stdio_peer.py``); ``--steps N`` stops after N steps
(for tests), ``--no-unasked`` skips step 6.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from governor.agents.stdio_peer import Peer
else:  # run by path (in a sandbox too): its sibling, found even under python -I
    sys.path.insert(0, os.path.dirname(os.path.realpath(__file__)))
    from stdio_peer import Peer


class Demo:
    def __init__(self, peer: Peer, steps: int, unasked: bool, final: str | None = None) -> None:
        self.peer = peer
        self.final = final
        self.messages = 0
        self.steps = steps
        self.unasked = unasked
        self.session = ""
        self.cwd = ""
        self.done: list[str] = []
        self.plan = [
            "Write hello.py",
            "Read it back",
            "Run it",
            "Install a pre-commit hook",
            "Leave notes",
        ]
        self.status = ["pending"] * len(self.plan)

    def call(self, method: str, params: dict[str, Any]) -> tuple[Any, dict[str, Any] | None]:
        """A request to the client: its result and its error (one of them None)."""
        answer = self.peer.request(method, params)
        return answer.get("result"), answer.get("error")

    def update(self, body: dict[str, Any]) -> None:
        self.peer.notify("session/update", {"sessionId": self.session, "update": body})

    def say(self, text: str) -> None:
        """One whole message (its own messageId, so the last one is the final message)."""
        self.messages += 1
        self.update(
            {
                "sessionUpdate": "agent_message_chunk",
                "messageId": f"m{self.messages}",
                "content": {"type": "text", "text": text},
            }
        )

    def show_plan(self) -> None:
        self.update(
            {
                "sessionUpdate": "plan",
                "entries": [
                    {"content": c, "priority": "medium", "status": s}
                    for c, s in zip(self.plan, self.status, strict=True)
                ],
            }
        )

    def step(self, i: int, status: str) -> None:
        self.status[i] = status
        self.show_plan()

    def tool(self, call: str, title: str, kind: str, raw: dict[str, Any], path: str | None) -> None:
        body: dict[str, Any] = {
            "sessionUpdate": "tool_call",
            "toolCallId": call,
            "title": title,
            "kind": kind,
            "status": "pending",
            "rawInput": raw,
        }
        if path:
            body["locations"] = [{"path": path}]
        self.update(body)

    def finish(self, call: str, status: str, text: str | None = None) -> None:
        body: dict[str, Any] = {
            "sessionUpdate": "tool_call_update",
            "toolCallId": call,
            "status": status,
        }
        if text is not None:
            body["content"] = [{"type": "content", "content": {"type": "text", "text": text}}]
        self.update(body)

    def ask(self, call: str, title: str, kind: str, raw: dict[str, Any], path: str | None) -> bool:
        tool_call: dict[str, Any] = {
            "toolCallId": call,
            "title": title,
            "kind": kind,
            "status": "pending",
            "rawInput": raw,
        }
        if path:
            tool_call["locations"] = [{"path": path}]
        result, error = self.call(
            "session/request_permission",
            {
                "sessionId": self.session,
                "toolCall": tool_call,
                "options": [
                    {"optionId": "always", "name": "Always allow", "kind": "allow_always"},
                    {"optionId": "once", "name": "Allow", "kind": "allow_once"},
                    {"optionId": "no", "name": "Reject", "kind": "reject_once"},
                ],
            },
        )
        if error or not isinstance(result, dict):
            return False
        outcome = result.get("outcome") or {}
        return outcome.get("outcome") == "selected" and outcome.get("optionId") in (
            "once",
            "always",
        )

    def turn(self) -> str:
        join = os.path.join
        hello = join(self.cwd, "hello.py")
        steps = [self.write_hello, self.read_hello, self.run_hello, self.hook, self.notes]
        self.say("I will add a small program, check it, run it, and leave notes.\n")
        self.show_plan()
        for n, step in enumerate(steps[: self.steps]):
            if self.peer.cancelled:
                return "cancelled"
            self.step(n, "in_progress")
            step(n, hello)
        summary = "Done: " + "; ".join(self.done) + "." if self.done else "Nothing done."
        self.say(self.final if self.final is not None else summary)
        self.update({"sessionUpdate": "usage_update", "used": 1200, "size": 200000})
        return "cancelled" if self.peer.cancelled else "end_turn"

    def write_hello(self, n: int, hello: str) -> None:
        content = 'print("hello from the demo agent")\n'
        raw = {"file_path": hello, "content": content}
        self.tool("write", "Write hello.py", "edit", raw, hello)
        if not self.ask("write", "Write hello.py", "edit", raw, hello):
            self.finish("write", "failed", "refused")
            self.step(n, "completed")
            return
        _, error = self.call(
            "fs/write_text_file", {"sessionId": self.session, "path": hello, "content": content}
        )
        self.finish("write", "failed" if error else "completed")
        if not error:
            self.done.append("wrote hello.py")
        self.step(n, "completed")

    def read_hello(self, n: int, hello: str) -> None:
        self.tool("read", "Read hello.py", "read", {"file_path": hello}, hello)
        result, error = self.call(
            "fs/read_text_file", {"sessionId": self.session, "path": hello, "line": 1, "limit": 50}
        )
        text = (result or {}).get("content", "") if isinstance(result, dict) else ""
        self.finish("read", "failed" if error else "completed", text if not error else None)
        if not error:
            self.done.append(f"read hello.py ({len(text.splitlines())} line)")
        self.step(n, "completed")

    def run_hello(self, n: int, hello: str) -> None:
        command = "python3 hello.py"
        raw = {"command": command}
        self.tool("run", f"Run `{command}`", "execute", raw, None)
        if not self.ask("run", f"Run `{command}`", "execute", raw, None):
            self.finish("run", "failed", "refused")
            self.step(n, "completed")
            return
        created, error = self.call(
            "terminal/create",
            {
                "sessionId": self.session,
                "command": "python3",
                "args": ["hello.py"],
                "cwd": self.cwd,
                "outputByteLimit": 4096,
            },
        )
        if error or not isinstance(created, dict):
            self.finish("run", "failed", f"could not run: {(error or {}).get('message')}")
            self.step(n, "completed")
            return
        tid = created["terminalId"]
        self.update(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": "run",
                "status": "in_progress",
                "content": [{"type": "terminal", "terminalId": tid}],
            }
        )
        exit_status, _ = self.call(
            "terminal/wait_for_exit", {"sessionId": self.session, "terminalId": tid}
        )
        output, _ = self.call("terminal/output", {"sessionId": self.session, "terminalId": tid})
        self.call("terminal/release", {"sessionId": self.session, "terminalId": tid})
        code = (exit_status or {}).get("exitCode")
        text = (output or {}).get("output", "")
        self.finish("run", "completed" if code == 0 else "failed", text)
        self.done.append(f"ran hello.py (exit {code}): {text.strip()}")
        self.step(n, "completed")

    def hook(self, n: int, hello: str) -> None:
        path = os.path.join(self.cwd, ".git", "hooks", "pre-commit")
        raw = {"file_path": path, "content": "#!/bin/sh\npython3 hello.py\n"}
        self.tool("hook", "Install .git/hooks/pre-commit", "edit", raw, path)
        if self.ask("hook", "Install .git/hooks/pre-commit", "edit", raw, path):
            _, error = self.call(
                "fs/write_text_file",
                {"sessionId": self.session, "path": path, "content": raw["content"]},
            )
            self.finish("hook", "failed" if error else "completed")
            if not error:
                self.done.append("installed a pre-commit hook")
        else:
            self.finish("hook", "failed", "refused by the client")
            self.done.append("was refused a pre-commit hook")
        self.step(n, "completed")

    def notes(self, n: int, hello: str) -> None:
        if not self.unasked:
            self.step(n, "completed")
            return
        path = os.path.join(self.cwd, "NOTES.md")
        self.tool("notes", "Write NOTES.md", "edit", {"file_path": path}, path)
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write("# Notes\n\nhello.py prints a greeting.\n")
            self.finish("notes", "completed")
            self.done.append("left NOTES.md (without asking)")
        except OSError as e:
            self.finish("notes", "failed", f"could not write NOTES.md: {e.strerror}")
            self.done.append("could not leave NOTES.md")
        self.step(n, "completed")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--no-unasked", action="store_true")
    parser.add_argument(
        "--final",
        default=None,
        help="the final message instead of the summary (e.g. 'BLOCKED: ...')",
    )
    args = parser.parse_args(argv)
    peer = Peer()
    demo = Demo(peer, args.steps, not args.no_unasked, args.final)
    while True:
        message = peer.receive()
        if message is None:
            return 0
        method, mid, params = message.get("method"), message.get("id"), message.get("params") or {}
        if method == "initialize":
            peer.send(
                {
                    "id": mid,
                    "result": {
                        "protocolVersion": 1,
                        "agentCapabilities": {"loadSession": False},
                        "authMethods": [],
                        "agentInfo": {
                            "name": "demo",
                            "title": "acp-governor demo agent",
                            "version": "1.0",
                        },
                    },
                }
            )
        elif method == "session/new":
            demo.session = "demo-session-1"
            demo.cwd = params.get("cwd") or os.getcwd()
            peer.send({"id": mid, "result": {"sessionId": demo.session}})
        elif method == "session/prompt":
            peer.cancelled = False
            stop = demo.turn()
            peer.send({"id": mid, "result": {"stopReason": stop}})
        elif method == "session/cancel":
            peer.cancelled = True
        elif mid is not None and method is not None:
            peer.send(
                {"id": mid, "error": {"code": -32601, "message": f"method not found: {method}"}}
            )


if __name__ == "__main__":
    sys.exit(main())
