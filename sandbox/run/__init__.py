"""Processes on trio: launching bwrap from a plan, commands, sessions,
terminals and the agent's own sandbox.

Every process here is owned by a nursery or an async context manager and
reaped, killed as a tree when its scope ends.
"""
