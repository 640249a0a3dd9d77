"""acp-governor: an ACP client that governs coding agents."""

__version__ = "0.1.0"
