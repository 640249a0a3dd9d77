"""Test-runner configuration that changes what runs or how it is judged: pure.

- pytest: the keys of `PYTEST_KEYS` in ``pytest.ini`` (``[pytest]``),
  ``tox.ini`` and ``setup.cfg`` (``[pytest]`` / ``[tool:pytest]``, read with
  `configparser`) and ``pyproject.toml`` (``[tool.pytest.ini_options]`` and
  ``[tool.pytest]``, read with `tomllib`); a conftest's hooks and collection
  variables (``pytest_collection_modifyitems``, ``pytest_ignore_collect``,
  ``collect_ignore``..., read with `ast`): added, changed or removed.
- jest / vitest / mocha: the keys of `JS_KEYS` in ``jest.config.*``,
  ``vitest.config.*``, ``vite.config.*`` (read with tree-sitter) and in
  ``package.json``'s ``jest`` object and ``.mocharc.json`` (read with `json`).
- CI workflows (``.github/workflows/*.yml``): any change, since a workflow
  decides which checks run at all. Compared line by line (a heuristic: no
  YAML parser is a dependency), the finding on the first line that differs.

A file that no longer parses is a change of its configuration.
"""

from __future__ import annotations

import configparser
import difflib
import json
import posixpath
import re
import tomllib
from collections.abc import Callable, Mapping
from typing import Final

from governor.tamper import python, syntax
from governor.tamper.facts import Finding

PYTEST_KEYS: Final = frozenset(
    {
        "addopts",
        "testpaths",
        "python_files",
        "python_classes",
        "python_functions",
        "norecursedirs",
        "xfail_strict",
        "confcutdir",
        "required_plugins",
        "usefixtures",
        "empty_parameter_set_mark",
    }
)
"""pytest keys that choose which tests run, or turn a failure into a pass."""

JS_KEYS: Final = frozenset(
    {
        "testPathIgnorePatterns",
        "modulePathIgnorePatterns",
        "testMatch",
        "testRegex",
        "roots",
        "passWithNoTests",
        "bail",
        "coverageThreshold",
        "coveragePathIgnorePatterns",
        "include",
        "exclude",
        "spec",
        "ignore",
        "grep",
        "allowOnly",
    }
)
"""jest, vitest and mocha keys that choose which tests run or how they are judged."""

_JS_CONFIG: Final = re.compile(r"^(jest|vitest|vite)\.config\.(js|cjs|mjs|ts|cts|mts)$")


def kind(path: str) -> str | None:
    """Which runner configuration ``path`` is (``pytest-ini``, ``pyproject``,
    ``conftest``, ``js-config``, ``json-config``, ``workflow``), or None."""
    name = posixpath.basename(path)
    if name in ("pytest.ini", "tox.ini", "setup.cfg"):
        return "pytest-ini"
    if name == "pyproject.toml":
        return "pyproject"
    if name == "conftest.py":
        return "conftest"
    if _JS_CONFIG.match(name):
        return "js-config"
    if name in ("package.json", ".mocharc.json", "jest.config.json"):
        return "json-config"
    if "/.github/workflows/" in f"/{path}" and name.endswith((".yml", ".yaml")):
        return "workflow"
    return None


def findings(path: str, before: str | None, after: str | None) -> list[Finding]:
    """What changed in a runner configuration file (None: absent then)."""
    which = kind(path)
    if which is None or before == after:
        return []
    if which == "workflow":
        return [_workflow(path, before, after)]
    read = _READERS[which]
    old, new = read(before or "", path), read(after or "", path)
    if new is None:
        return [Finding(path, None, "runner-config-changed", "it no longer parses")]
    old = old or {}
    out = []
    for key in sorted(old.keys() | new.keys()):
        was, now = old.get(key), new.get(key)
        if was is not None and now is not None and was[1] == now[1]:
            continue
        line = now[0] if now is not None else None
        how = "added" if was is None else "removed" if now is None else "changed"
        out.append(Finding(path, line, "runner-config-changed", f"{key} {how}"))
    return out


Entries = dict[str, tuple[int | None, str]]
"""A configuration's relevant entries: key -> (its line, its value as text)."""


def _pytest_ini(text: str, path: str) -> Entries | None:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error:
        return None
    out: Entries = {}
    for section in ("pytest", "tool:pytest"):
        if parser.has_section(section):
            for key, value in parser.items(section):
                if key in PYTEST_KEYS:
                    out[key] = (_line_of(text, key, r"\s*[=:]"), value.strip())
    return out


def _pyproject(text: str, path: str) -> Entries | None:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return None
    tool = data.get("tool")
    pytest = tool.get("pytest") if isinstance(tool, dict) else None
    if not isinstance(pytest, dict):
        return {}
    tables = [pytest, pytest.get("ini_options")]
    out: Entries = {}
    for table in tables:
        if isinstance(table, dict):
            for key, value in table.items():
                if key in PYTEST_KEYS:
                    out[key] = (_line_of(text, key, r"\s*="), json.dumps(value, sort_keys=True))
    return out


def _conftest(text: str, path: str) -> Entries | None:
    hooks = python.conftest_hooks(text)
    if hooks is None:
        return None
    return {name: (line, dumped) for name, (line, dumped) in hooks.items()}


def _json_config(text: str, path: str) -> Entries | None:
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError:
        return None
    if not isinstance(data, dict):
        return {}
    if posixpath.basename(path) == "package.json":
        jest = data.get("jest")
        data = jest if isinstance(jest, dict) else {}
    return {
        key: (_line_of(text, f'"{key}"', r"\s*:", anywhere=True), json.dumps(value, sort_keys=True))
        for key, value in data.items()
        if key in JS_KEYS
    }


def _js_config(text: str, path: str) -> Entries | None:
    language = "typescript" if path.endswith("ts") else "javascript"
    found = syntax.object_pairs(text, language)
    if found is None:
        return None
    return {
        key: (line, value)
        for key, (line, value) in found.items()
        if key.rsplit(".", 1)[-1] in JS_KEYS
    }


_READERS: Final[Mapping[str, Callable[[str, str], Entries | None]]] = {
    "pytest-ini": _pytest_ini,
    "pyproject": _pyproject,
    "conftest": _conftest,
    "json-config": _json_config,
    "js-config": _js_config,
}


def _line_of(text: str, key: str, then: str, *, anywhere: bool = False) -> int | None:
    """The line a key is set on (the parsers above give values, not lines); at
    the start of a line unless ``anywhere`` (JSON may hold it after a brace)."""
    start = "" if anywhere else r"^\s*"
    match = re.search(rf"{start}{re.escape(key)}{then}", text, re.M)
    return None if match is None else text.count("\n", 0, match.start()) + 1


def _workflow(path: str, before: str | None, after: str | None) -> Finding:
    if after is None:
        return Finding(path, None, "runner-config-changed", "the CI workflow was deleted")
    if before is None:
        return Finding(path, 1, "runner-config-changed", "a CI workflow was added")
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(), autojunk=False)
    first = next((op for op in matcher.get_opcodes() if op[0] != "equal"), None)
    line = None if first is None else first[3] + 1
    return Finding(path, line, "runner-config-changed", "the CI workflow was changed")
