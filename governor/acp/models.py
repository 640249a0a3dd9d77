"""The ACP schema models (`acp.schema`), imported without the work a validator
never uses: every module of the governor takes ``schema`` from here.

Importing `acp.schema` builds some 280 pydantic models, and two parts of that
are spent on nothing the governor reads:

- ``use_attribute_docstrings``: for each class pydantic finds its source,
  tokenizes and parses it to copy each field's docstring into the field's
  ``description`` (used by JSON Schema output only): about 0.18 s of a 0.5 s
  import here;
- building every model's validator at class creation, when a run validates a
  few dozen of them: with ``defer_build`` each is built on its first use
  (about 0.07 s).

Both are undone the moment the import ends (`_quick_models`), so models
defined later (ours, the MCP SDK's) are built as pydantic builds them. If
``acp`` is imported already (a library caller's own import), nothing changes;
if pydantic's internals move, the import is the ordinary one. A model another
thread defines during those ~0.3 s is built the quick way too (same validator,
no field descriptions): the governor imports this before it starts threads.
`tests/connection/test_schema_models.py` holds every model to the ordinary
import's JSON Schema, descriptions left out.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def _quick_models() -> Iterator[None]:
    """Inside: models skip field docstrings and build on first use (see above)."""
    if "acp.schema" in sys.modules:
        yield
        return
    import pydantic
    from pydantic._internal import _fields

    docstrings = getattr(_fields, "_update_fields_from_docstrings", None)
    config = pydantic.BaseModel.model_config
    if docstrings is None:
        yield
        return
    _fields._update_fields_from_docstrings = lambda *args, **kwargs: None
    pydantic.BaseModel.model_config = {**config, "defer_build": True}
    try:
        yield
    finally:
        _fields._update_fields_from_docstrings = docstrings
        pydantic.BaseModel.model_config = config


with _quick_models():
    from acp import schema

__all__ = ["schema"]
