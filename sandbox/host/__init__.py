"""Probes of this machine: what is there to hide, keep or enforce.

Each module reads the host (files, ``/proc``, cgroups, the person's git
config, the bwrap binary) and hands back facts for `governor.sandbox.plan`; none starts
a sandbox. `processes` is the door every host process the governor starts goes
through (the probes here among them). Reads are bounded and cached where a session would repeat them.
"""
