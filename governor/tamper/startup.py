"""What runs before any test, outside the tests' own text: pure.

A runner's verdict is decided by whatever runs in its process, and the test
files are not all of it. Python runs, before a test is collected:

- the interpreter's start-up files: a ``.pth`` in a site folder (a workspace
  ``.venv`` has one), ``sitecustomize.py`` and ``usercustomize.py`` on the path;
- a runner's start-up files: a new ``conftest.py`` (pytest imports it before
  the tests beside and below it; a fixture there replaces one the tests use);
  a new ``__init__.py`` in a test folder is a test file and read as one
  (`governor.tamper.python`: its module-level code);
- bytecode: ``__pycache__/NAME.cpython-XY.pyc`` is run in place of
  ``NAME.py`` when its header matches the source's mtime and size, which the
  agent can set. A ``.pyc`` the attempt wrote is trusted here only when it is
  byte for byte what this interpreter compiles from its source now; pytest's
  assertion-rewrite cache (``NAME.cpython-XY-pytest-V.pyc``) is compared as
  code, in a child process (`governor.tamper.baseline`), since its bytes
  differ by reference flags between processes.

And the file's encoding: Python decodes a file as its coding cookie says
(``# coding: utf-7``), so the audit reads it so (`decode`), and a cookie other
than UTF-8 added is a finding (`coding-changed`): it hides code from every
reader that assumes UTF-8.
"""

from __future__ import annotations

import importlib.util
import io
import marshal
import posixpath
import re
import tokenize
from typing import Final

from governor.tamper.facts import Finding

UTF8: Final = ("utf-8", "utf-8-sig")

_PYC: Final = re.compile(
    r"^(?P<name>[^/]+?)\.(?P<tag>[a-z]+-\d+)(?:-pytest-(?P<pytest>[^/]+?))?(?:\.opt-\d)?\.pyc$"
)


def decode(path: str, data: bytes) -> tuple[str, str]:
    """A file's text as its runtime reads it, and the encoding used: a Python
    file by its coding cookie (`tokenize.detect_encoding`, what the interpreter
    does), anything else as UTF-8. Bytes the encoding cannot decode are
    replaced (the interpreter refuses such a file: it then fails to import)."""
    if not path.endswith((".py", ".pyw", ".pyi")):
        return data.decode("utf-8", "replace"), "utf-8"
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding, "replace"), encoding
    except (SyntaxError, LookupError, ValueError):
        return data.decode("utf-8", "replace"), "utf-8"


def coding(path: str, before: str | None, after: str) -> Finding | None:
    """`coding-changed` when a Python file now declares an encoding other than
    UTF-8 that it did not declare before (``before``: its encoding then, None
    when it did not exist)."""
    if after in UTF8 or after == before:
        return None
    return Finding(
        path,
        1,
        "coding-changed",
        f"it declares {after}: Python decodes it so, and a reader that assumes UTF-8 "
        "sees other code",
    )


def started(path: str, created: bool, text: str | None) -> Finding | None:
    """A start-up file the attempt created or changed: a ``.pth``,
    ``sitecustomize.py``, ``usercustomize.py``, or a new ``conftest.py`` that
    holds code."""
    name = posixpath.basename(path)
    if name.endswith(".pth"):
        return Finding(
            path,
            None,
            "import-code-added",
            f"a .pth {'added' if created else 'changed'}: Python runs its import lines "
            "and adds its folders to the path at start-up",
        )
    if name in ("sitecustomize.py", "usercustomize.py"):
        return Finding(
            path,
            None,
            "import-code-added",
            f"{name} {'added' if created else 'changed'}: Python imports it at start-up",
        )
    if name == "conftest.py" and created and text is not None and _holds_code(text):
        return Finding(
            path,
            None,
            "import-code-added",
            "a conftest.py added: pytest imports it before the tests beside and below it "
            "(its fixtures replace the tests' own)",
        )
    return None


def _holds_code(text: str) -> bool:
    """Whether a Python text holds a statement (a comment or a blank file holds none)."""
    try:
        return any(
            tok.type not in _NOT_CODE
            for tok in tokenize.generate_tokens(io.StringIO(text).readline)
        )
    except (tokenize.TokenError, SyntaxError):
        return True


_NOT_CODE: Final = {
    tokenize.COMMENT,
    tokenize.NL,
    tokenize.NEWLINE,
    tokenize.ENDMARKER,
    tokenize.INDENT,
    tokenize.DEDENT,
}


def bytecode_source(path: str) -> str | None:
    """The source a ``.pyc`` stands for (``pkg/__pycache__/calc.cpython-311.pyc``
    -> ``pkg/calc.py``; a ``.pyc`` outside ``__pycache__`` stands for the
    ``.py`` beside it), or None when ``path`` is no bytecode."""
    if not path.endswith(".pyc"):
        return None
    folder, name = posixpath.split(path)
    if posixpath.basename(folder) == "__pycache__":
        match = _PYC.match(name)
        stem = match.group("name") if match else name.split(".", 1)[0]
        return posixpath.join(posixpath.dirname(folder), f"{stem}.py")
    return posixpath.join(folder, name[: -len(".pyc")] + ".py")


def pytest_version(path: str) -> str | None:
    """The pytest version a cache file's name says rewrote it, or None when it is
    plain bytecode."""
    match = _PYC.match(posixpath.basename(path))
    return None if match is None else match.group("pytest")


Stamp = tuple[int, int]
"""A source's mtime (whole seconds) and size, as a ``.pyc`` header holds them."""


def stale(data: bytes, source: bytes | None, stamp: Stamp | None, *, pytest: bool = False) -> bool:
    """Whether the loader would skip this ``.pyc`` and compile the source
    instead: its header's stamp (or checked hash) is not the source's as it is
    now. Bytecode written before the agent's last edit is harmless, however
    it differs. pytest reads only its own two forms: a timestamp (flags 0,
    pytest before 9) or a checked hash (flags 3)."""
    if source is None or stamp is None or len(data) < 16:
        return False
    flags = int.from_bytes(data[4:8], "little")
    if flags == 0:
        mtime, size = stamp
        return data[8:12] != (mtime & 0xFFFFFFFF).to_bytes(4, "little") or data[12:16] != (
            size & 0xFFFFFFFF
        ).to_bytes(4, "little")
    if pytest and flags != 3:
        return True
    if flags & 0b10 and data[:4] == importlib.util.MAGIC_NUMBER:  # a checked hash
        return data[8:16] != importlib.util.source_hash(source)[:8]
    return False


def bytecode(
    path: str, data: bytes, source_path: str, source: bytes | None, stamp: Stamp | None = None
) -> Finding | None:
    """A plain ``.pyc`` the attempt wrote, against its source (None: there is
    none) and the source's `Stamp`: no finding when the loader would not use
    it (`stale`) or when it is exactly what this interpreter compiles from the
    source as it is now."""
    name = posixpath.basename(path)
    where = posixpath.basename(posixpath.dirname(path))
    if where != "__pycache__":
        why = "bytecode outside __pycache__ is run when its source is missing"
    elif source is None:
        why = "there is no source beside it"
    elif stale(data, source, stamp):
        return None
    elif data[:4] != importlib.util.MAGIC_NUMBER:
        why = "it was written for another Python: this audit cannot check it against its source"
    elif len(data) < 16 or data[16:] != _compiled(source_path, source, name):
        why = "it is not what its source compiles to: it runs in place of the source"
    else:
        return None
    return Finding(path, None, "bytecode-added", f"{name}: {why}")


def _compiled(source_path: str, source: bytes, name: str) -> bytes | None:
    optimize = 0
    opt = re.search(r"\.opt-(\d)\.pyc$", name)
    if opt is not None:
        optimize = int(opt.group(1))
    try:
        code = compile(source, source_path, "exec", dont_inherit=True, optimize=optimize)
    except (SyntaxError, ValueError):
        return None
    return marshal.dumps(code)
