"""The workspace snapshot an attempt takes before and after: a walk of a
50,000-file tree (`governor.confine.workspace.MAX_FILES`, the most it walks).

Baseline, measured in the same run over the same tree: the walk that kept
``(size, mtime)`` alone (the agent could edit a file and put both back). The
snapshot keeps ctime, inode and mode too, and hashes racy files (changed within
`governor.confine.workspace.RACY_NS` of the walk); printed: the snapshot of a tree at
rest (nothing racy, the attempt's usual case), and the worst case, every file
hashed (a snapshot whose ``before`` hashed them all), and the attempt's end:
the snapshot taken after one at rest (its files looked at first). Target: at rest <= 1.2 x
the baseline. Run: `.venv/bin/python bench/workspace.py [--files N] [--rounds R]`.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from governor.confine import workspace
from governor.confine.workspace import Snapshot, snapshot


def size_and_mtime(roots: list[str], limit: int = workspace.MAX_FILES) -> dict[str, tuple[int, int]]:
    """The walk as it kept ``(size, mtime_ns)`` alone: the baseline."""
    files: dict[str, tuple[int, int]] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            if os.path.basename(dirpath) == ".git":
                dirnames[:] = [d for d in dirnames if d in ("hooks", "config", "info")]
                filenames = [f for f in filenames if f in ("hooks", "config", "info")]
            for name in filenames:
                path = os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                except OSError:
                    continue
                files[path] = (st.st_size, st.st_mtime_ns)
                if len(files) >= limit:
                    return files
    return files


def make_tree(root: Path, count: int) -> None:
    """``count`` files of 200 B to 20 KB (a source tree's), 100 to a folder, 3 deep."""
    for i in range(count):
        folder = root / f"d{i // 10_000}" / f"e{i // 1000 % 10}" / f"f{i // 100 % 10}"
        if i % 100 == 0:
            folder.mkdir(parents=True, exist_ok=True)
        (folder / f"m{i}.py").write_bytes(b"x = 1\n" * (33 + (i * 7919) % 3300))


def interleaved(works: list[Callable[[], object]], rounds: int) -> list[float]:
    """The median wall time of each of ``works`` over ``rounds`` rounds, in
    seconds; each round runs them all in turn, so the machine's load weighs on
    each alike."""
    times: list[list[float]] = [[] for _ in works]
    for _ in range(rounds):
        for work, took in zip(works, times, strict=True):
            start = time.perf_counter()
            work()
            took.append(time.perf_counter() - start)
    return [statistics.median(took) for took in times]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=workspace.MAX_FILES)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="bench-workspace-"))
    try:
        make_tree(base, args.files)
        roots = [str(base)]
        time.sleep(workspace.RACY_NS / 1e9 + 0.5)  # at rest: nothing racy any more
        rest = snapshot(roots)
        assert len(rest.files) == args.files and not any(s.digest for s in rest.files.values())
        every = Snapshot({p: s._replace(digest=b"") for p, s in rest.files.items()})
        snapshot(roots)  # warm the dentry and inode caches for all
        old, new, after, worst = interleaved(
            [lambda: size_and_mtime(roots), lambda: snapshot(roots),
             lambda: snapshot(roots, before=rest), lambda: snapshot(roots, before=every)],
            args.rounds,
        )  # fmt: skip
        megabytes = sum(s.size for s in rest.files.values()) / 1e6
        print(f"tree: {args.files:,} files, {megabytes:.0f} MB, load {os.getloadavg()[0]:.1f}")
        print(f"baseline (size, mtime):            {old * 1e3:8.1f} ms")
        print(f"snapshot at rest (ctime, inode):   {new * 1e3:8.1f} ms = {new / old:.2f} x baseline")
        print(f"the end's snapshot (before's first):{after * 1e3:8.1f} ms = {after / old:.2f} x baseline")
        print(f"snapshot, every file hashed:       {worst * 1e3:8.1f} ms = {worst / old:.2f} x baseline")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
