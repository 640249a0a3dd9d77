"""Pure plans: what a sandbox will show and allow, as values and argv.

Nothing here does I/O or imports trio, a subprocess or a probe of the host:
the facts a plan needs (`HostFacts`) are gathered by `governor.sandbox.host` and passed
in, so every rule here is a function a test can drive with plain values.
"""
