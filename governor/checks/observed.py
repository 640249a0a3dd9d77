"""What a check read, observed rather than parsed.

The harness closure (`governor.confine.harness.closure`) parses a check's
shell and make text for the files it runs or sources; a shell reaches files
by what it computes (``$(dirname "$0")``, a variable, a ``cd``, a glob,
``find -exec``, ``xargs``, ``eval``, a make variable), and whatever the parser
does not follow was neither pinned nor a finding: an agent put its "fix" in
such a file, which the check ran to write the fix into its own thrown-away
overlay, and the loop accepted a workspace that still held the bug.

So each check runs over a **copy** of the roots (`copy_roots`), bound where
the roots are and thrown away after it (as the overlay was), whose every
file's access time is set back to the epoch before the run. The kernel's
``relatime`` updates the access time of a file read, mapped or executed whose
access time is older than its modification time (or a day old), so after the
run the files whose access time moved are exactly the files the check's
processes opened for their content, whatever idiom reached them (`Copies.read`).
The check owns its copy and could set an access time back once it has read
a file, or put a fresh file in its place: either moves the change time
(which only the kernel sets) or the inode, so those count as read too.
An overlay cannot do this: it reads its lower files with ``O_NOATIME``.

What the caller does with it (`governor.confine.harness.read_findings`): a
file the check read that the attempt changed, and that is not a source
module (the code under test, `governor.policies.harness.MODULE_SUFFIXES`), is
a ``harness-changed`` finding.

Residuals (docs/loops.md): a mount of the state folder with ``noatime`` (or
``relatime`` off) shows nothing, so `atime_moves` probes it first and the
check runs unobserved with a notice; roots past `MAX_COPY_BYTES` or
`MAX_COPY_ENTRIES` are not copied (the same notice); a file read only
through a pin (bound from the workspace itself) or a canary copy is seen by
what pins it, not here; and a source module by its name is the code under
test whoever reads it.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

MAX_COPY_BYTES: Final = 1024 * 1024 * 1024
"""The bytes of the roots a check's copy may hold; past it the check runs on
an overlay, unobserved, and the outcome says so."""
MAX_COPY_ENTRIES: Final = 200_000
"""The paths of the roots a check's copy may hold (as `MAX_COPY_BYTES`)."""


_SWEPT: Final = frozenset({"__pycache__", ".pytest_cache"})


class Unobserved(Exception):
    """The roots could not be copied for observation; the message says why."""


@dataclass(frozen=True, slots=True)
class Copies:
    """The roots' copies for one check: ``(copy, root)`` pairs."""

    pairs: tuple[tuple[str, str], ...]
    files: Mapping[str, tuple[str, int, int, int]] = field(default_factory=dict)
    """Each file copied, by its path in the copy: its root path, and its
    copy's ``(device, inode, change time)`` once its access time was set back."""

    def read(self) -> tuple[str, ...]:
        """The root paths of the files the check read, mapped or executed (the
        access time moved) or touched otherwise (its change time moved: a
        write, a ``chmod``, or the access time set back again to hide a read,
        which the kernel stamps with a change time only it sets; or it was
        removed or replaced), sorted. Not counted: the bytecode caches the
        check's own first line sweeps (`governor.checks.check_runs.cache_sweep`)."""
        out = []
        for path, (root_path, dev, ino, ctime) in self.files.items():
            try:
                st = os.lstat(path)
            except OSError:
                touched = True
            else:
                touched = (st.st_dev, st.st_ino, st.st_ctime_ns) != (dev, ino, ctime)
                touched = touched or st.st_atime_ns != 0
            if touched and not _SWEPT.intersection(path.split("/")):
                out.append(root_path)
        return tuple(sorted(out))

    def remove(self) -> None:
        """Throw the copies away (made writable first: a check may leave a
        folder it cannot list)."""
        for copy, _ in self.pairs:
            for dirpath, dirnames, _ in os.walk(copy):
                for name in dirnames:
                    path = posixpath.join(dirpath, name)
                    if not os.path.islink(path):
                        os.chmod(path, 0o700)
            shutil.rmtree(copy, ignore_errors=True)


def atime_moves(folder: str) -> bool:
    """Whether reading a file under ``folder`` moves its access time once it
    was set back (the file system is mounted ``relatime`` or
    ``strictatime``, not ``noatime``): the condition for `Copies.read`."""
    probe = posixpath.join(folder, ".atime-probe")
    try:
        with open(probe, "w") as f:
            f.write("probe\n")
        os.utime(probe, ns=(0, os.stat(probe).st_mtime_ns))
        with open(probe) as f:
            f.read()
        return os.stat(probe).st_atime_ns != 0
    except OSError:
        return False
    finally:
        with contextlib.suppress(OSError):
            os.unlink(probe)


def copy_roots(roots: tuple[str, ...], under: str) -> Copies:
    """Each of ``roots`` copied into a fresh folder under ``under`` (regular
    files with their modes and modification times, folders, symbolic links;
    a socket or pipe left out), every file's access time set to the epoch.
    Raises `Unobserved` past the bounds or when a path cannot be copied."""
    pairs = []
    files: dict[str, tuple[str, int, int, int]] = {}
    entries = 0
    size = 0
    try:
        for n, root in enumerate(roots):
            copy = posixpath.join(under, str(n))
            pairs.append((copy, root))
            os.mkdir(copy, 0o700)
            folders = [(root, copy)]
            for dirpath, dirnames, filenames in os.walk(root, onerror=_raise):
                at = (
                    posixpath.join(copy, posixpath.relpath(dirpath, root))
                    if dirpath != root
                    else copy
                )
                for name in (*dirnames, *filenames):
                    entries += 1
                    if entries > MAX_COPY_ENTRIES:
                        raise Unobserved(
                            f"the roots hold more than {MAX_COPY_ENTRIES} paths to copy"
                        )
                    source, dest = posixpath.join(dirpath, name), posixpath.join(at, name)
                    st = os.lstat(source)
                    if stat.S_ISLNK(st.st_mode):
                        os.symlink(os.readlink(source), dest)
                        _owned(dest, st)
                    elif stat.S_ISDIR(st.st_mode):
                        os.mkdir(dest, 0o700)
                        folders.append((source, dest))
                    elif stat.S_ISREG(st.st_mode):
                        size += st.st_size
                        if size > MAX_COPY_BYTES:
                            raise Unobserved(
                                f"the roots hold more than {MAX_COPY_BYTES} bytes to copy"
                            )
                        shutil.copyfile(source, dest, follow_symlinks=False)
                        _owned(dest, st)
                        os.chmod(dest, stat.S_IMODE(st.st_mode))
                        os.utime(dest, ns=(0, st.st_mtime_ns))
                        made = os.lstat(dest)
                        files[dest] = (source, made.st_dev, made.st_ino, made.st_ctime_ns)
                dirnames[:] = [
                    d for d in dirnames if not os.path.islink(posixpath.join(dirpath, d))
                ]
            for source, dest in reversed(folders):  # innermost first: a 0555 folder last
                st = os.lstat(source)
                _owned(dest, st)
                os.chmod(dest, stat.S_IMODE(st.st_mode))
                os.utime(dest, ns=(st.st_atime_ns, st.st_mtime_ns))
    except OSError as e:
        Copies(tuple(pairs)).remove()
        raise Unobserved(f"the roots could not be copied: {e.strerror}: {e.filename}") from None
    except Unobserved:
        Copies(tuple(pairs)).remove()
        raise
    return Copies(tuple(pairs), files)


def _raise(error: OSError) -> None:
    """A folder the walk cannot list is not left out of the copy silently."""
    raise error


def _owned(dest: str, st: os.stat_result) -> None:
    """``dest`` owned as its source is, where the governor can say so (as
    root): a file of another user's in the workspace is not the check's own
    in the copy, to read or write, when it was not in the workspace."""
    if os.geteuid() == 0 and (st.st_uid, st.st_gid) != (0, 0):
        os.lchown(dest, st.st_uid, st.st_gid)
