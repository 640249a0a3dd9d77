"""The `checks` room (see docs/internals.md)."""
