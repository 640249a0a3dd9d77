"""The `boundary` room (see docs/internals.md)."""
