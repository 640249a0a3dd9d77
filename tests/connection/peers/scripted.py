"""A scripted ACP peer (stdlib only): does what a JSON script says, logs what it reads.

    python scripted.py SCRIPT.json LOG.jsonl

The script is a list of steps, run in order:

- ``{"send": obj}``: one compact JSON line on stdout.
- ``{"write": "text"}``: raw text on stdout, exactly (newlines included).
- ``{"write_hex": "ff00..."}``: raw bytes on stdout.
- ``{"long_line": {"head": "...", "size": N, "tail": "..."}}``: head, N bytes
  of ``x``, tail and a newline, written in 1 MiB pieces.
- ``{"read": {"responses": N, "requests": M}}``: read stdin lines until N
  responses and M requests have come; requests are answered with
  ``{"echo": params, "method": method}``. Options: ``"delay": seconds``
  before each answer, ``"error": {...}`` to answer with that error instead,
  ``"answer": false`` to leave requests unanswered.
- ``{"read_to_eof": true}``: read (and log) stdin until it ends.
- ``{"stderr": "text", "repeat": N}``: N lines on stderr.
- ``{"sleep": seconds}``.

Every line read from stdin is appended to LOG as ``{"line": parsed}`` (or
``{"raw": text}`` when it is not JSON), flushed at once. The peer exits at the
end of the script, which closes its stdout.
"""

import json
import sys
import time


def main() -> None:
    script_path, log_path = sys.argv[1], sys.argv[2]
    with open(script_path) as f:
        steps = json.load(f)
    out = sys.stdout.buffer
    log = open(log_path, "a")  # noqa: SIM115 - open for the whole run
    for step in steps:
        if "send" in step:
            out.write(json.dumps(step["send"], separators=(",", ":")).encode() + b"\n")
            out.flush()
        elif "write" in step:
            out.write(step["write"].encode())
            out.flush()
        elif "write_hex" in step:
            out.write(bytes.fromhex(step["write_hex"]))
            out.flush()
        elif "long_line" in step:
            spec = step["long_line"]
            out.write(spec["head"].encode())
            left = spec["size"]
            piece = b"x" * (1 << 20)
            while left > 0:
                out.write(piece[: min(left, len(piece))])
                left -= len(piece)
            out.write(spec["tail"].encode() + b"\n")
            out.flush()
        elif "read" in step:
            read(step["read"], out, log)
        elif "read_to_eof" in step:
            read({"responses": float("inf")}, out, log)
        elif "stderr" in step:
            for _ in range(step.get("repeat", 1)):
                sys.stderr.write(step["stderr"] + "\n")
            sys.stderr.flush()
        elif "sleep" in step:
            time.sleep(step["sleep"])
        else:
            raise SystemExit(f"unknown step {step!r}")
    log.close()


def read(want: dict, out, log) -> None:
    responses = want.get("responses", 0)
    requests = want.get("requests", 0)
    while responses > 0 or requests > 0:
        raw = sys.stdin.buffer.readline()
        if not raw:
            return
        try:
            message = json.loads(raw)
        except ValueError:
            log.write(json.dumps({"raw": raw.decode(errors="replace")}) + "\n")
            log.flush()
            continue
        log.write(json.dumps({"line": message}) + "\n")
        log.flush()
        if isinstance(message, dict) and "method" in message:
            if "id" in message:
                requests -= 1
                if not want.get("answer", True):
                    continue
                time.sleep(want.get("delay", 0))
                answer = {"jsonrpc": "2.0", "id": message["id"]}
                if "error" in want:
                    answer["error"] = want["error"]
                else:
                    answer["result"] = {"echo": message.get("params"), "method": message["method"]}
                out.write(json.dumps(answer, separators=(",", ":")).encode() + b"\n")
                out.flush()
        else:
            responses -= 1


if __name__ == "__main__":
    main()
