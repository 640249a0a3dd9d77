"""Scripts run by path, some as root, with ``python3 -I -S``: the session's
fork server, the unsandboxed agent's watchdog, the placeholder sweeper.

Rule of this folder: the standard library only. Nothing of ours is imported
(the interpreter that runs them may not see this package, and a root process
must not import code from a folder an agent could reach); ours may import
them. `tests/sandbox/test_standalone.py` runs each under ``-I -S``.
"""
