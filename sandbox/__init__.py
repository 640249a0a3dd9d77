"""Bubblewrap: profiles rendered to bwrap argv (pure) and a trio runner."""
