"""The attempt budget's reading of the kernel memory a sandbox holds in no
process (`governor.sandbox.host.kernel_memory.held_in_kernel`: a child joins each
sandbox's IPC and network namespaces, kept from one measure to the next, and reads its System V segments and its
Unix sockets' buffers), against the watcher's measure without it (the RSS walk
and `held_in_files`), for ``--sandboxes`` bwrap sandboxes as the governor makes
them (``--unshare-all --unshare-user --disable-userns``), each holding a few
processes, rounds interleaved in the same run.

Printed: a measure without the kernel's part, with it, and the ratio; and what
the kernel's part found (0 here: the sandboxes hold nothing there). Target:
the kernel's part <= 2 ms a sandbox a measure, readers kept (the watcher
spaces its measures by ten times their duration, so its share of the wall
stays under 10 % whatever it costs; a reader forked afresh each measure cost
some 8 ms a sandbox). Run as root and as an unprivileged user:
`.venv/bin/python bench/kernel_held.py [--sandboxes N] [--rounds R]`.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import time

from workspace import interleaved

from governor.sandbox.host import budget, kernel_memory
from governor.sandbox.host.bwrap import locate

HOLD = "sleep 3600 & sleep 3600 & sleep 3600 & wait"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sandboxes", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    bwrap = locate()
    argv = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent",
            "--ro-bind", "/", "/", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
            "/bin/sh", "-c", HOLD]  # fmt: skip
    sandboxes = [subprocess.Popen(argv) for _ in range(args.sandboxes)]
    try:
        time.sleep(1.0)  # started
        pids = [pid for s in sandboxes for pid in budget._tree(s.pid)]

        def without() -> None:
            for pid in pids:
                budget._status(pid)
            budget.held_in_files(pids)

        readers = kernel_memory.KernelReaders()  # the attempt's: kept from one measure to the next

        def kernel() -> None:
            without()
            kernel_memory.held_in_kernel(pids, readers=readers)

        plain, withkernel = interleaved([without, kernel], args.rounds)
        found = kernel_memory.held_in_kernel(pids, readers=readers)
        readers.close()
        print(f"{args.sandboxes} sandboxes, {len(pids)} processes, uid {os.getuid()}, "
              f"load {os.getloadavg()[0]:.1f}")  # fmt: skip
        print(f"measure without the kernel's part: {plain * 1e3:7.1f} ms")
        print(f"with held_in_kernel:               {withkernel * 1e3:7.1f} ms"
              f" = {withkernel / plain:.2f} x ({found} bytes found)")  # fmt: skip
    finally:
        for s in sandboxes:
            s.kill()
            s.wait()


if __name__ == "__main__":
    main()
