"""The ACP schema models imported the governor's quick way (`governor.acp.models`)
are the ordinary import's models: every model's JSON Schema is the same once
field descriptions (the docstrings the quick import skips) are left out, and
pydantic is left as it was found for the models defined after."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

DUMP = r"""
import json, sys
import pydantic
if sys.argv[1] == "quick":
    from governor.acp.models import schema
else:
    from acp import schema

def bare(node):
    if isinstance(node, dict):
        return {k: bare(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [bare(v) for v in node]
    return node

out = {}
for name in sorted(vars(schema)):
    model = getattr(schema, name)
    if isinstance(model, type) and issubclass(model, pydantic.BaseModel) and model.__module__ == "acp.schema":
        out[name] = bare(model.model_json_schema())
described = schema.RequestPermissionRequest.model_fields["session_id"].description
class After(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(use_attribute_docstrings=True)
    x: int
    "the docstring of a field defined after the import"
print(json.dumps({
    "schemas": out,
    "described": described,
    "after_described": After.model_fields["x"].description,
    "after_built": type(After.__pydantic_validator__).__name__,
    "config": dict(pydantic.BaseModel.model_config),
}))
"""


def _dump(how: str, tmp_path: Path) -> dict[str, object]:
    script = tmp_path / "dump.py"  # a file: pydantic reads field docstrings from the source
    script.write_text(DUMP)
    done = subprocess.run(
        [sys.executable, str(script), how], capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(done.stdout)
    return result


def test_quick_import_gives_the_ordinary_models(tmp_path: Path) -> None:
    quick, ordinary = _dump("quick", tmp_path), _dump("ordinary", tmp_path)
    schemas = quick["schemas"]
    assert isinstance(schemas, dict) and len(schemas) > 200
    assert schemas == ordinary["schemas"]
    # The quick path was taken (this pydantic's internals are the ones it expects)...
    assert quick["described"] is None
    assert ordinary["described"]
    # ...and undone: a model defined afterwards keeps its docstring and is built at once.
    assert quick["after_described"] == "the docstring of a field defined after the import"
    assert quick["after_built"] == ordinary["after_built"] == "SchemaValidator"
    assert quick["config"] == ordinary["config"]
