"""`normalize` (paths lexically folded) against posixpath's own normpath."""

from __future__ import annotations

import posixpath

from hypothesis import given, settings
from hypothesis import strategies as st

from governor.policies.paths import normalize

SEGMENTS = st.sampled_from(["", ".", "..", "a", "b.c", ".git", "..x", "x..", "é", "a b"])


@settings(max_examples=2000, deadline=None)
@given(st.lists(SEGMENTS, max_size=8), st.booleans())
def test_an_absolute_path_folds_as_normpath_does(segments: list[str], trailing: bool) -> None:
    path = "/" + "/".join(segments) + ("/" if trailing else "")
    assert normalize(path) == "/" + posixpath.normpath(path).lstrip("/")


@settings(max_examples=500, deadline=None)
@given(st.lists(SEGMENTS, max_size=6))
def test_a_relative_path_is_taken_against_cwd(segments: list[str]) -> None:
    path = "/".join(segments)
    if path.startswith("/"):
        return
    assert normalize(path, "/ws/app") == "/" + posixpath.normpath(f"/ws/app/{path}").lstrip("/")
    assert normalize(path) == path  # no cwd: left as it is, for the caller to refuse
