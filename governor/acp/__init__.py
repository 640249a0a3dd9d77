"""The wire: ACP over an agent's stdio.

- `jsonrpc`: JSON-RPC 2.0 framing, sans-IO (bytes in, events out);
- `dispatch`: the agent's requests validated with the `acp.schema` models and
  handed to their handlers, every outcome one answer line;
- `connection`: the trio tasks around them (reader, writer, stderr drain, one
  task per incoming request).
"""
