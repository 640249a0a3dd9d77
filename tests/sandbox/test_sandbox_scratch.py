"""Scratch roots (a check's sandbox), pure: the roots are thrown-away overlays,
the pins still hold over them, and nothing binds the host's folders writable."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from governor.policies.capability import Capability
from governor.sandbox.plan.bwrap_argv import render
from governor.sandbox.plan.profile import BwrapFeatures, Profile, ProfileError

sys.path.insert(0, str(Path(__file__).parent))
from test_sandbox_profile import ALL, FACTS, WS, position


def scratch() -> Profile:
    return Profile(capability=Capability.EDIT_WORKSPACE, workspace=Path(WS), scratch=True)


def test_scratch_roots_are_overlays_and_never_bound_writable_from_the_host() -> None:
    argv = render(scratch(), FACTS, ALL, seccomp_fd=9)
    overlay = position(argv, "--overlay-src", WS, "--tmp-overlay", WS)
    binds = [argv[i + 1] for i, a in enumerate(argv) if a == "--bind"]
    assert binds == [], "a --bind over a scratch root would write to the host"
    for pin in FACTS.pins:
        assert position(argv, "--ro-bind", pin, pin) > overlay
    ordinary = render(replace(scratch(), scratch=False), FACTS, ALL, seccomp_fd=9)
    assert position(ordinary, "--bind", WS, WS) >= 0 and "--tmp-overlay" not in ordinary


def test_scratch_roots_are_refused_on_a_bwrap_without_tmp_overlay() -> None:
    old = BwrapFeatures(tmp_overlay=False)
    with pytest.raises(ProfileError, match="--tmp-overlay"):
        render(scratch(), FACTS, old, seccomp_fd=9)
    assert position(render(replace(scratch(), scratch=False), FACTS, old, seccomp_fd=9), "--bind", WS, WS) >= 0


def test_scratch_roots_need_edit_workspace() -> None:
    with pytest.raises(ProfileError, match="edit-workspace"):
        Profile(capability=Capability.READ_ONLY, workspace=Path(WS), scratch=True)
    assert Profile(capability=Capability.READ_ONLY, workspace=Path(WS)).scratch is False


def test_a_root_shown_as_a_copy_binds_the_copy_alone_and_a_sealed_stub_in_it_is_pinned_by_a_mount() -> None:
    """A check's root shown as a copy (`governor.checks.observed`): the copy is
    bound writable at the root's path, the host's root never, and every pin
    still holds over it, by a mount even where the stub is sealed (a copy made
    before the stub was has no file there for a ``--lock-file``)."""
    copy = "/state/checks/run-1/copy-1/0"
    shown = replace(scratch(), scratch_copies=((Path(copy), Path(WS)),))
    sealed = FACTS.pins[:1]
    argv = render(shown, FACTS, ALL, seccomp_fd=9, sealed=sealed)
    root = position(argv, "--bind", copy, WS)
    binds = [argv[i + 1] for i, a in enumerate(argv) if a == "--bind"]
    assert binds == [copy] and "--tmp-overlay" not in argv
    assert "--lock-file" not in argv
    for pin in FACTS.pins:
        assert position(argv, "--ro-bind", pin, pin) > root
    overlay = render(scratch(), FACTS, ALL, seccomp_fd=9, sealed=sealed)
    assert position(overlay, "--lock-file", sealed[0]) >= 0  # an overlay shows the host's stub


def test_a_root_shown_as_a_copy_is_a_scratch_root() -> None:
    with pytest.raises(ProfileError, match="scratch"):
        Profile(
            capability=Capability.EDIT_WORKSPACE,
            workspace=Path(WS),
            scratch_copies=((Path("/state/copy"), Path(WS)),),
        )
