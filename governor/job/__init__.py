"""The `job` room (see docs/internals.md)."""
