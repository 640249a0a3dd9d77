"""One import name: installed, acp-governor adds `governor` to site-packages and
nothing as generic as `sandbox` or `policies`. The repository keeps its
top-level policies/ and sandbox/; governor/policies and governor/sandbox link to
them, so a checkout and an install both import them as governor.policies and
governor.sandbox (docs/internals.md says why a link). A user's own module of
either name then neither breaks us nor is hidden by us: a loop script in a
folder with its own ``sandbox.py`` used to fail at ``from governor import ...``
with ``cannot import name 'Profile' from 'sandbox'``."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

LOOP = """
import json, sys
from governor import AttemptSpec, run

workspace, log = sys.argv[1], sys.argv[2]
outcome = run(AttemptSpec(prompt="make a hello program", agent="demo", workspace=workspace,
                          policy="edit-workspace", log=log, timeout=60))
import policies, sandbox  # the user's own, after ours were imported (rooms-apply: keep)
print(json.dumps({"status": outcome.status, "reason": outcome.reason,
                  "sandbox": sandbox.NAME, "policies": policies.NAME}))
"""


def test_a_script_beside_its_own_sandbox_py_and_policies_package_runs_an_attempt(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "loop"
    (folder / "policies").mkdir(parents=True)
    (folder / "sandbox.py").write_text('NAME = "the user\'s sandbox.py"\n')
    (folder / "policies" / "__init__.py").write_text('NAME = "the user\'s policies"\n')
    (folder / "loop.py").write_text(LOOP)
    workspace = tmp_path / "ws"
    workspace.mkdir()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout's governor, after the folder
    done = subprocess.run(
        [sys.executable, "loop.py", str(workspace), str(tmp_path / "audit.jsonl")],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    said = json.loads(done.stdout.splitlines()[-1])
    assert said["status"] == "completed", said["reason"]
    # ours did not hide theirs: the script's own modules are what it imports
    assert said["sandbox"] == "the user's sandbox.py"
    assert said["policies"] == "the user's policies"
    assert (workspace / "hello.py").exists()


def _top_level_imports(path: Path) -> list[str]:
    try:
        tree = ast.parse(path.read_text(), str(path))
    except SyntaxError:
        return []
    found = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        found += [f"{path.relative_to(ROOT)}:{node.lineno} {n}" for n in names
                  if n.split(".")[0] in ("policies", "sandbox")]  # fmt: skip
    return found


def test_nothing_of_ours_imports_policies_or_sandbox_by_a_top_level_name() -> None:
    """A top-level ``import sandbox`` works in a checkout (the folder is there)
    and nowhere else; and it would load a second copy of every module beside
    governor.sandbox's."""
    found = []
    checked = 0
    for top in ("governor", "policies", "sandbox", "tests", "bench", "examples"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path == Path(__file__).resolve():
                continue  # LOOP above imports the user's own, on purpose
            checked += 1
            found += _top_level_imports(path)
    assert checked > 300
    assert not found, "\n".join(found)


def test_the_links_are_the_repository_folders() -> None:
    for name in ("policies", "sandbox"):
        link = ROOT / "governor" / name
        assert link.is_symlink() and os.readlink(link) == f"../{name}"
        assert link.resolve() == (ROOT / name).resolve()


@pytest.mark.slow
def test_the_wheel_holds_governor_alone_with_policies_and_sandbox_inside(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps",
         "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    (wheel,) = tmp_path.glob("*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    tops = {n.split("/")[0] for n in names}
    assert tops == {"governor", "acp_governor-0.1.0.dist-info"}
    top_level = zipfile.ZipFile(wheel).read("acp_governor-0.1.0.dist-info/top_level.txt")
    assert top_level.decode().split() == ["governor"]
    # the links' contents are in it as files: the shipped policies, the standalone scripts
    for shipped in ("governor/policies/edit-workspace.toml", "governor/policies/decide.py",
                    "governor/sandbox/standalone/mcp_shim.py", "governor/sandbox/plan/profile.py",
                    "governor/policies/shell/__init__.py"):  # fmt: skip
        assert shipped in names
