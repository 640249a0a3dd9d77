"""The scripts in sandbox/standalone/ run by path, some as root, under ``-I -S``:
they may import the standard library only, never our packages or a third party's."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import governor.sandbox.standalone

FOLDER = Path(governor.sandbox.standalone.__file__).parent
SCRIPTS = sorted(p for p in FOLDER.glob("*.py") if p.name != "__init__.py")


def _imported(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add("." if node.level else (node.module or "").split(".")[0])
    return names


def test_the_folder_holds_the_four_scripts() -> None:
    # the MCP relay's shim is one: an agent runs it with `python3 -I -S` in its sandbox
    assert [p.name for p in SCRIPTS] == ["forkserver.py", "mcp_shim.py", "sweeper.py", "watchdog.py"]


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_standalone_script_imports_the_standard_library_only(script: Path) -> None:
    outside = _imported(script) - set(sys.stdlib_module_names)
    assert outside == set(), f"{script.name} imports {sorted(outside)}"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_a_standalone_script_loads_under_isolated_mode_alone_in_its_folder(
    script: Path, tmp_path: Path
) -> None:
    # A copy alone in a folder: nothing of ours can be found beside it, and
    # -I -S leaves out the venv's site-packages and the environment.
    copy = tmp_path / script.name
    shutil.copy(script, copy)
    code = f"import runpy; runpy.run_path({str(copy)!r}, run_name='loaded'); print('loaded')"
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "loaded"


def test_a_script_that_imports_ours_is_caught(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import os\nfrom governor.sandbox.plan import profile\nimport orjson\n")
    assert _imported(bad) - set(sys.stdlib_module_names) == {"governor", "orjson"}
