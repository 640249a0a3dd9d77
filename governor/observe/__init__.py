"""The `observe` room (see docs/internals.md)."""
