"""The `ending` room (see docs/internals.md)."""
