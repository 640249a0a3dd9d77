"""A handler answers through jsonrpcserver's public API: its `Success`/`Error`
returned, its `JsonRpcError` raised, each sent as it says."""

from __future__ import annotations

import json
from typing import Any

from acp import schema
from jsonrpcserver import Error, JsonRpcError, Success

from governor.acp.dispatch import Route, Routes, RpcError, begin, reply

READ = {"sessionId": "s", "path": "/a"}


def answer(handler: Any) -> dict[str, Any]:
    """The line the agent gets for a read that `handler` answers, parsed."""
    routes = Routes({"fs/read_text_file": Route(schema.ReadTextFileRequest, handler)})
    line = reply(7, begin(routes, "fs/read_text_file", READ))
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    parsed: dict[str, Any] = json.loads(line)
    assert parsed["jsonrpc"] == "2.0" and parsed["id"] == 7
    return parsed


def raises(exc: Exception) -> Any:
    def handler(_: Any) -> Any:
        raise exc

    return handler


def test_a_returned_success_is_the_result_a_model_in_it_dumped_by_alias() -> None:
    assert answer(lambda _: Success({"content": "x"}))["result"] == {"content": "x"}
    model = schema.ReadTextFileResponse(content="y", field_meta={"k": 1})
    assert answer(lambda _: Success(model))["result"] == {"content": "y", "_meta": {"k": 1}}
    assert answer(lambda _: Success())["result"] == {}  # None is sent as {}, as ACP asks


def test_a_returned_error_is_the_error_its_data_left_out_only_when_it_has_none() -> None:
    with_data = answer(lambda _: Error(-32002, "Resource not found", {"path": "/a"}))
    assert with_data["error"] == {
        "code": -32002,
        "message": "Resource not found",
        "data": {"path": "/a"},
    }
    assert "result" not in with_data
    assert answer(lambda _: Error(-32002, "gone"))["error"] == {"code": -32002, "message": "gone"}
    assert answer(lambda _: Error(-32002, "gone", None))["error"]["data"] is None


def test_a_raised_jsonrpc_error_is_the_error_without_data_unless_given() -> None:
    assert answer(raises(JsonRpcError(-32001, "no")))["error"] == {"code": -32001, "message": "no"}
    assert answer(raises(RpcError(-32001, "no")))["error"] == {"code": -32001, "message": "no"}
    given = answer(raises(RpcError(-32001, "no", {"why": "policy"})))["error"]
    assert given == {"code": -32001, "message": "no", "data": {"why": "policy"}}


def test_a_result_that_is_not_json_is_an_internal_error_not_an_exception() -> None:
    error = answer(lambda _: Success({"size": float("nan")}))["error"]
    assert error["code"] == -32603 and "not JSON" in error["message"]
