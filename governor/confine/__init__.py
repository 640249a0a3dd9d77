"""The `confine` room (see docs/internals.md)."""
