

def test_a_quoted_text_is_clipped_to_its_limit_with_an_ellipsis_and_kept_whole_within_it() -> None:
    from governor.policies.errors import clipped

    assert clipped("x" * 10, 10) == "x" * 10
    assert clipped("x" * 11, 10) == "x" * 9 + "…" and len(clipped("y" * 500, 60)) == 60
