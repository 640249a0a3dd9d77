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
