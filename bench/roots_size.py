"""The workspace limit's walk (`governor.attempt.roots_size.measure`): the
blocks of every entry and the unlinked files the sandboxes hold open, against
the walk as it was (regular files' apparent sizes only), over the same
50,000-file tree (100 files a folder, 3 deep: `bench/workspace.py`'s), rounds
interleaved in the same run.

Printed: the old walk (the baseline), the new walk with no holders, and the new
walk with ``--holders`` sleeping processes (each holding a few descriptors, one
an unlinked file) whose ``/proc/PID/fd`` it reads, as an attempt's sandboxes
would be. Target: the new walk with holders <= 1.2 x the baseline.
Run: `.venv/bin/python bench/roots_size.py [--files N] [--rounds R] [--holders H]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from workspace import interleaved, make_tree

from governor.attempt.roots_size import measure
from governor.boundary.folders import Opening

HOLDER = "import os, sys, time\nf = open(sys.argv[1], 'wb')\nos.unlink(sys.argv[1])\nf.write(b'x' * 65536)\nf.flush()\nprint(flush=True)\ntime.sleep(3600)\n"
"""A process holding a 64 KiB file it unlinked (and its interpreter's own descriptors)."""


def apparent_sizes(roots: Sequence[str]) -> int:
    """The walk as it was: regular files' apparent sizes, a hard link once."""
    seen: set[tuple[int, int]] = set()
    total = 0
    stack = [r for r in roots if os.path.isdir(r)]
    with Opening() as opening:
        while stack:
            entries = opening.listing(stack.pop())
            if entries is None:
                continue
            for entry in entries:
                try:
                    if entry.is_dir(follow_symlinks=False):
                        stack.append(entry.path)
                        continue
                    if not entry.is_file(follow_symlinks=False):
                        continue
                    info = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if info.st_nlink > 1:
                    if (info.st_dev, info.st_ino) in seen:
                        continue
                    seen.add((info.st_dev, info.st_ino))
                total += info.st_size
    return total


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--holders", type=int, default=100)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-roots-size-", dir=os.getcwd()))
    holders: list[subprocess.Popen[bytes]] = []
    try:
        make_tree(base / "tree", args.files)
        roots = [str(base / "tree")]
        for i in range(args.holders):
            holder = subprocess.Popen(
                [sys.executable, "-c", HOLDER, str(base / "tree" / f"held-{i}")],
                stdout=subprocess.PIPE,
            )
            assert holder.stdout is not None
            holder.stdout.readline()  # written and unlinked
            holders.append(holder)
        pids = [h.pid for h in holders]
        measure(roots)  # warm the dentry and inode caches for all
        old, new, held = interleaved(
            [lambda: apparent_sizes(roots), lambda: measure(roots),
             lambda: measure(roots, holders=pids)],
            args.rounds,
        )  # fmt: skip
        sizes, blocks = apparent_sizes(roots), measure(roots, holders=pids).total
        folders = sum(1 for _, dirs, _ in os.walk(roots[0]) for _ in dirs)
        assert stat.S_ISDIR(os.stat(roots[0]).st_mode)
        print(f"tree: {args.files:,} files, {folders} folders, load {os.getloadavg()[0]:.1f}")
        print(f"counted: apparent sizes {sizes / 1e6:.1f} MB, blocks and held {blocks / 1e6:.1f} MB")
        print(f"baseline (apparent sizes):         {old * 1e3:8.1f} ms")
        print(f"blocks of every entry:             {new * 1e3:8.1f} ms = {new / old:.2f} x baseline")
        print(f"  and {args.holders} holders' descriptors: {held * 1e3:8.1f} ms = {held / old:.2f} x baseline")
    finally:
        for holder in holders:
            holder.kill()
            holder.wait()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
