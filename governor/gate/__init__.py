"""The `gate` room (see docs/internals.md)."""
