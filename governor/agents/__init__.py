"""Bundled ACP agents: the scripted demo agent (stdlib only, no account needed)."""
