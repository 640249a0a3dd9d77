"""The version of acp-governor, importable from every room."""

__version__ = "0.1.0"
