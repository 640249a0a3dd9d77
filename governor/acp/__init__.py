"""The wire: ACP over an agent's stdio.

- `jsonrpc`: JSON-RPC 2.0 framing, sans-IO (bytes in, events out), and the ids
  of our requests;
- `dispatch`: the agent's requests validated with the `acp.schema` models and
  handed to their handlers, every outcome one answer line;
- `peer`: the protocol's rules, sans-IO (what each message makes us do: dispatch,
  refuse, cancel, wake, give up; the in-flight cap, the bound on unwritten bytes);
- `connection`: the trio tasks that carry them out (reader, writer, stderr
  drain, one task per request answered later).

May import: nothing of ours (the wire knows no policy, no sandbox).
"""
