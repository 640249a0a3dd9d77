"""`is_under`: the one check of "is this path under that root", traps included."""

from __future__ import annotations

import posixpath
from pathlib import PurePosixPath

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governor.policies.paths import is_under

CASES = [
    # path, root, under, strictly under
    ("/a/b", "/a/b", True, False),
    ("/a/b/c", "/a/b", True, True),
    ("/a/b/c/d", "/a/b", True, True),
    ("/a/bc", "/a/b", False, False),  # a string prefix, not a component
    ("/a/b.git", "/a/b", False, False),
    ("/home/alice", "/home/al", False, False),
    ("/a", "/a/b", False, False),  # the root's parent
    ("/a/b/", "/a/b", True, False),  # a trailing slash changes nothing
    ("/a/b", "/a/b/", True, False),
    ("/a/b/c/", "/a/b/", True, True),
    ("/a/bc/", "/a/b/", False, False),
    ("/x", "/", True, True),  # "/" holds every absolute path
    ("/", "/", True, False),
    ("/", "/a", False, False),
    ("x", "/", False, False),  # but no relative one
    ("/a/b", "", False, False),  # an empty root holds nothing
    ("", "/", False, False),
    ("/a/b/../c", "/a/b", False, False),  # ".." is folded, not a name
    ("/a/b/c/..", "/a/b", True, False),
    ("/a/./b/c", "/a/b", True, True),
    ("/a//b/c", "/a/b", True, True),
    ("/a/b", "/a//b", True, False),
    ("~/tools/go", "~/tools", True, True),  # relative paths compare as written
    ("~/toolsx", "~/tools", False, False),
    ("~/tools/../.ssh", "~/tools", False, False),
    ("/home/u/tools", "~/tools", False, False),  # nothing is expanded
]


@pytest.mark.parametrize(("path", "root", "under", "strictly"), CASES)
def test_a_path_is_under_a_root_by_whole_components_and_the_root_itself_counts_unless_strictly(
    path: str, root: str, under: bool, strictly: bool
) -> None:
    assert is_under(path, root) is under
    assert is_under(path, root, strictly=True) is strictly


SEGMENTS = st.sampled_from(["", ".", "..", "a", "b", "ab", "a.b", ".a", "é"])
PATHS = st.builds(
    lambda parts, slash: "/" + "/".join(parts) + ("/" if slash else ""),
    st.lists(SEGMENTS, max_size=6),
    st.booleans(),
)


@settings(max_examples=2000, deadline=None)
@given(PATHS, PATHS)
def test_an_absolute_path_is_under_a_root_as_its_folded_components_say(
    path: str, root: str
) -> None:
    def folded(p: str) -> PurePosixPath:
        return PurePosixPath("/" + posixpath.normpath(p).lstrip("/"))

    assert is_under(path, root) == folded(path).is_relative_to(folded(root))
