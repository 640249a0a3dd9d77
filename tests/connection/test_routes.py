"""A handler table remembers the methods it was asked for and does not hold, bounded."""

from __future__ import annotations

import json

from acp import schema

from governor.acp.dispatch import Route, Routes, begin, reply
from governor.acp.jsonrpc import METHOD_NOT_FOUND


def test_unknown_methods_are_answered_method_not_found_and_counted_per_method() -> None:
    routes = Routes(
        {"fs/read_text_file": Route(schema.ReadTextFileRequest, lambda req: {"content": ""})}
    )
    for method in ["x/one", "x/one", "_vendor/two", "x/one"]:
        answer = begin(routes, method, {})
        assert json.loads(reply(1, answer))["error"]["code"] == METHOD_NOT_FOUND
    assert routes.unknown == {"x/one": 3, "_vendor/two": 1}
    begin(routes, "fs/read_text_file", {"sessionId": "s", "path": "/a"})
    assert "fs/read_text_file" not in routes.unknown


def test_the_names_kept_are_bounded_and_cut_short() -> None:
    routes = Routes({})
    for i in range(Routes.UNKNOWN_KEPT + 50):
        begin(routes, f"flood/{i}", None)
    begin(routes, "flood/0", None)
    assert len(routes.unknown) == Routes.UNKNOWN_KEPT and routes.unknown["flood/0"] == 2
    long = Routes({})
    begin(long, "m" * 10_000, None)
    assert all(len(name) < 200 for name in long.unknown)
