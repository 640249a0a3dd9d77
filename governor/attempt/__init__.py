"""The `attempt` room (see docs/internals.md)."""
